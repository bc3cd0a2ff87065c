#!/usr/bin/env python3
"""Golden dequantization of real K-quant mixture blocks (tests/fixtures/kquants/).

Reads GGUFs written by llama.cpp's own llama-quantize (bench/peers/make_kquants.sh) and, for one
tensor of each 5- and 6-bit type (and Q4_K, Q3_K, IQ4_NL), stores the first rows' raw block bytes and their
values as dequantized by llama.cpp's gguf-py (gguf.quants.dequantize, its numpy twin of ggml's
dequantize_row_*). Run with a Python that has numpy and pyyaml, PYTHONPATH pointing at the
peer's gguf-py (make_kquants.sh does this).

  out/<TYPE>.bytes.npy   uint8  [rows, row_bytes]
  out/<TYPE>.values.npy  float32 [rows, cols]
"""
import argparse
import json
import os

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

# (type, file suffix, tensor): a tensor llama-quantize gave that type in SmolLM2-135M's mixtures
PICKS = [
    ("Q5_0", "Q4_K_M", "blk.0.attn_q.weight"),
    ("Q5_1", "Q5_K_M", "blk.0.attn_q.weight"),
    ("Q4_K", "Q4_K_M", None),
    ("Q5_K", "Q5_K_M", None),
    ("Q6_K", "Q4_K_M", None),
    ("Q3_K", "Q3_K_S", None),
    ("IQ4_NL", "IQ4_NL", "blk.0.attn_q.weight"),
    ("IQ4_XS", "IQ4_XS", None),
    ("Q2_K", "Q2_K_ffn_down", None),
]
ROWS = 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True, help="folder with SmolLM2-135M-Instruct.<mix>.gguf")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    meta = {}
    for qtype, mix, name in PICKS:
        path = os.path.join(a.models, f"SmolLM2-135M-Instruct.{mix}.gguf")
        r = GGUFReader(path)
        t = next(t for t in r.tensors if t.tensor_type.name == qtype and (name is None or t.name == name))
        cols = int(t.shape[0])
        raw = np.asarray(t.data)  # [rows, row_bytes] uint8
        rows = raw[:ROWS].copy()
        vals = dequantize(rows, t.tensor_type).astype(np.float32)
        assert vals.shape == (ROWS, cols), vals.shape
        np.save(os.path.join(a.out, f"{qtype}.bytes.npy"), rows)
        np.save(os.path.join(a.out, f"{qtype}.values.npy"), vals)
        meta[qtype] = {"file": os.path.basename(path), "tensor": t.name, "rows": ROWS, "cols": cols,
                       "row_bytes": int(rows.shape[1])}
        print(f"[gen_kquant_fixture] {qtype}: {t.name} from {os.path.basename(path)}, {ROWS}x{cols}")
    with open(os.path.join(a.out, "sources.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
