#!/usr/bin/env python3
"""The table of bench/eval/formats.sh's output folder: file size as bits per parameter (the
reference's parameter count from its size and type is not known here, so the size ratio to the
reference is printed too), KL divergence, same top token, perplexity.
  python3 bench/eval/formats_table.py OUT REF TYPE...   (TYPE: convert types, then a4g64 / a4g32)"""
import json
import sys
from pathlib import Path


def main():
    out, ref, types = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    ref_bytes = int((out / "reference.bytes").read_text())
    base = json.loads((out / "reference.json").read_text())
    print(f"reference {ref}: {ref_bytes / 2**20:.1f} MiB, PPL {base['ppl']:.4f}; text {base['text']}, {base['chunks']} chunks of {base['chunk']}")
    print("| format | file MiB | size / reference | mean KLD | median KLD | 99% KLD | same top | PPL |")
    print("|---|---|---|---|---|---|---|---|")
    kv_names = {"kv_q8": "8-bit KV cache (reference weights)", "kv_q4": "4-bit KV cache (reference weights)"}
    # layouts measured by `tessera eval --requantize` (no file written; size from the layout's bytes per weight)
    requant_names = {"a4g64": "A4G64 (MLX affine 4-bit, group 64; requantized at load)",
                     "a4g32": "A4G32 (MLX affine 4-bit, group 32, as Q4_1 blocks; requantized at load)"}
    for t in types + list(kv_names):
        p = out / f"{t}.json"
        if not p.exists():
            continue
        j = json.loads(p.read_text())
        size = int((out / f"{t}.bytes").read_text()) if (out / f"{t}.bytes").exists() else ref_bytes
        name = kv_names.get(t, requant_names.get(t, t.upper()))
        print(f"| {name} | {size / 2**20:.1f} | {size / ref_bytes:.3f} | {j['kld_mean']:.6f} ± {j['kld_err']:.6f} | {j['kld_median']:.6f} | "
              f"{j['kld_p99']:.6f} | {100 * j['same_top']:.2f}% | {j['ppl']:.4f} |")


if __name__ == "__main__":
    main()
