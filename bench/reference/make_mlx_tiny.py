#!/usr/bin/env python3
"""Tiny committed MLX affine 4-bit fixtures, made by real mlx-lm, with goldens computed by MLX.

Small enough for git, so CI can test tessera's MLX loader against MLX itself
(the SmolLM2 conversions of make_mlx_reference.py live in the ignored .peers/).

Steps (everything is rebuilt on each run; the output is deterministic):
  1. A random LlamaForCausalLM (transformers, torch.manual_seed(SEED), f32):
     vocab 512, hidden 128, intermediate 256, 2 layers, 4 heads, 2 kv heads (head_dim 32),
     rope_theta 1e5, rms_norm_eps 1e-5, tied embeddings, max_position_embeddings 256,
     weights N(0, 0.05) (initializer_range=0.05), and the RMSNorm weights set to
     1 + 0.1*N(0, 1) so that a loader which ignores them is caught.  Saved as HF
     safetensors under --hf-dir (ignored .peers/ by default) with a top-level rope_theta
     (mlx-lm's llama reads only that; default 10000) and a byte-level BPE tokenizer.json of
     exactly 512 tokens (256 byte tokens + 256 merges learnt by a deterministic BPE on a
     fixed corpus; no special tokens).  bos/eos ids are null: tests feed token ids.
  2. `python -m mlx_lm convert -q --q-bits 4 --q-group-size G --q-mode affine
     --dtype float16` for G in 64 32, into OUT/tiny-g64 and OUT/tiny-g32, keeping only
     config.json, model.safetensors and tokenizer.json (the canonical one of step 1).
  3. OUT/tiny-g{G}/golden.json: logits (7 significant digits) of TOKENS computed by
     mlx_lm.utils.load_model(fixture dir) with every floating parameter (f16 scales,
     biases, norms) cast to float32, i.e. f32 activations; plus "logits_f32", the
     transformers float32 logits of the unquantized model, for comparison.

Run in the venv of make_mlx_reference.py (mlx[cpu] 0.32.4, mlx-lm 0.32.2):
  .peers/venv/bin/python bench/reference/make_mlx_tiny.py
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from ref_common import bytes_to_unicode

REPO = Path(__file__).resolve().parents[2]
SEED = 1234
TOKENS = [1, 5, 17, 100, 200, 300, 511, 42, 7, 99, 3, 250]
KEEP = ("config.json", "model.safetensors", "tokenizer.json")

CONFIG = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=32, rope_theta=100000.0,
              rms_norm_eps=1e-5, tie_word_embeddings=True, max_position_embeddings=256,
              initializer_range=0.05, hidden_act="silu", attention_bias=False, mlp_bias=False,
              bos_token_id=None, eos_token_id=None, pad_token_id=None)

# Fixed corpus for the tokenizer's merges (any text would do; it only has to be fixed).
CORPUS = """
The quick brown fox jumps over the lazy dog. When running AI models, laptops can heat up.
A tiny model is used to test that the engine reads the weights the same way as MLX does.
Every linear layer and the embedding table are quantized to four bits in groups of
sixty-four or thirty-two values, with one scale and one bias per group.
The scales and biases are stored as half precision floats, the packed values as words.
Tests feed the token ids directly, so the tokenizer only has to be a valid one.
She sells sea shells by the sea shore; the shells she sells are surely sea shells.
How much wood would a woodchuck chuck if a woodchuck could chuck wood?
Peter Piper picked a peck of pickled peppers, a peck of pickled peppers Peter Piper picked.
In the beginning the universe was created. This has made a lot of people very angry and
been widely regarded as a bad move. It was the best of times, it was the worst of times,
it was the age of wisdom, it was the age of foolishness, it was the epoch of belief.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 512 1024 2048 4096 65536.
def main(): return 0  # code, too: for (int i = 0; i < n; ++i) { sum += x[i] * w[i]; }
"""


def sig7(x: float) -> float:
    return float(f"{x:.7g}")


# ---------------------------------------------------------------- tokenizer
def make_tokenizer(vocab_size: int):
    """Byte-level BPE with exactly vocab_size tokens: ids 0..255 are the bytes 0..255,
    the rest are merges learnt greedily on CORPUS (ties broken by the pair's strings)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    words = Counter(w for w, _ in pre.pre_tokenize_str(CORPUS))
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges: list[tuple[str, str]] = []
    seqs = {w: list(w) for w in words}
    while len(vocab) < vocab_size:
        pairs: Counter = Counter()
        for w, n in words.items():
            s = seqs[w]
            for p in zip(s, s[1:]):
                if p[0] + p[1] not in vocab:
                    pairs[p] += n
        if not pairs:
            raise SystemExit(f"corpus too small for {vocab_size} tokens")
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        vocab[best[0] + best[1]] = len(vocab)
        for w, s in seqs.items():
            i, out = 0, []
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(s[i] + s[i + 1])
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    assert tok.get_vocab_size() == vocab_size, tok.get_vocab_size()
    for text in (CORPUS, "Grüße, 世界! 123"):
        assert tok.decode(tok.encode(text).ids) == text
    return tok


# ---------------------------------------------------------------- step 1
def make_hf_dir(hf_dir: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    torch.manual_seed(SEED)
    cfg = LlamaConfig(**CONFIG)
    model = LlamaForCausalLM(cfg).to(torch.float32).eval()
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
    if hf_dir.exists():
        shutil.rmtree(hf_dir)
    model.save_pretrained(hf_dir)
    tok = make_tokenizer(CONFIG["vocab_size"])
    PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(hf_dir)  # for mlx_lm.load
    tok.save(str(hf_dir / "tokenizer.json"))  # canonical file, not the transformers re-save
    cfg_path = hf_dir / "config.json"
    c = json.loads(cfg_path.read_text())
    c["rope_theta"] = CONFIG["rope_theta"]
    c["rms_norm_eps"] = CONFIG["rms_norm_eps"]
    c["torch_dtype"] = "float32"
    c["_name_or_path"] = f"tessera tiny random llama (make_mlx_tiny.py, seed {SEED})"
    for k, v in CONFIG.items():
        if k != "initializer_range" and c.get(k) != v:
            raise SystemExit(f"config.json {k}: {c.get(k)!r} != {v!r}")
    cfg_path.write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")
    print(f"[hf] wrote {hf_dir}")


def hf_logits(hf_dir: Path, tokens: list[int]) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32).eval()
    with torch.no_grad():
        return m(torch.tensor([tokens])).logits[0].float().numpy()


# ---------------------------------------------------------------- step 2
def rel(p: str) -> str:
    return str(Path(p).relative_to(REPO)) if p.startswith(str(REPO)) else p


def convert(hf_dir: Path, out_dir: Path, group: int, dtype: str) -> str:
    cmd = [sys.executable, "-m", "mlx_lm", "convert", "--hf-path", str(hf_dir),
           "--mlx-path", str(out_dir), "-q", "--q-bits", "4", "--q-group-size", str(group),
           "--q-mode", "affine", "--dtype", dtype]
    if out_dir.exists():
        shutil.rmtree(out_dir)
    print("[convert]", " ".join(cmd))
    subprocess.run(cmd, check=True)
    for p in out_dir.iterdir():
        if p.name not in KEEP:
            p.unlink() if p.is_file() else shutil.rmtree(p)
    shutil.copyfile(hf_dir / "tokenizer.json", out_dir / "tokenizer.json")
    return " ".join(["python" if i == 0 else rel(c) for i, c in enumerate(cmd)])


# ---------------------------------------------------------------- step 3
def mlx_f32act_logits(mlx_dir: Path, tokens: list[int]) -> np.ndarray:
    import mlx.core as mx
    from mlx.utils import tree_map
    from mlx_lm.utils import load_model
    model, _ = load_model(mlx_dir)

    def up(p):
        return p.astype(mx.float32) if p.dtype in (mx.bfloat16, mx.float16) else p
    model.update(tree_map(up, model.parameters()))
    out = model(mx.array([tokens]))
    return np.array(out[0].astype(mx.float32))


def describe(path: Path) -> list[str]:
    from safetensors import safe_open
    lines = []
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata()
        for k in sorted(f.keys()):
            sl = f.get_slice(k)
            lines.append(f"{k}  {sl.get_dtype()}  {list(sl.get_shape())}")
    return [f"__metadata__ {meta}"] + lines


def versions() -> dict:
    import importlib.metadata as md
    out = {"python": sys.version.split()[0]}
    for p in ("mlx", "mlx-cpu", "mlx-lm", "transformers", "torch", "safetensors", "numpy",
              "tokenizers"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf-dir", type=Path, default=REPO / ".peers/tiny-llama-hf-f32")
    ap.add_argument("--out", type=Path, default=REPO / "tests/fixtures/mlx")
    ap.add_argument("--group-sizes", type=int, nargs="+", default=[64, 32])
    ap.add_argument("--dtype", default="float16", choices=["bfloat16", "float16", "float32"])
    a = ap.parse_args()

    make_hf_dir(a.hf_dir)
    ref = hf_logits(a.hf_dir, TOKENS)
    ver = versions()
    for g in a.group_sizes:
        d = a.out / f"tiny-g{g}"
        cmd = convert(a.hf_dir, d, g, a.dtype)
        lg = mlx_f32act_logits(d, TOKENS)
        diff = np.abs(lg.astype(np.float64) - ref)
        golden = {
            "tokens": TOKENS,
            "logits": [[sig7(v) for v in row] for row in lg],
            "logits_f32": [[sig7(v) for v in row] for row in ref],
            "mlx_version": ver["mlx"],
            "mlx_lm_version": ver["mlx-lm"],
            "command": "python bench/reference/make_mlx_tiny.py  # runs: " + cmd,
            "compute": ("logits: mlx_lm.utils.load_model(this dir), every floating parameter "
                        f"({a.dtype} scales/biases/norms) cast to float32, "
                        "model(mx.array([tokens])); logits_f32: transformers float32 on the "
                        "unquantized random model (seed %d)" % SEED),
            "group_size": g, "bits": 4, "mode": "affine", "dtype": a.dtype,
            "stats": {"max_abs_logit_mlx": sig7(np.abs(lg).max()),
                      "max_abs_logit_f32": sig7(np.abs(ref).max()),
                      "max_abs_diff_mlx_vs_f32": sig7(diff.max()),
                      "mean_abs_diff_mlx_vs_f32": sig7(diff.mean()),
                      "top1_agree_mlx_vs_f32": int((lg.argmax(-1) == ref.argmax(-1)).sum())},
            "versions": ver,
        }
        (d / "golden.json").write_text(json.dumps(golden) + "\n")
        print(f"[golden g{g}]", json.dumps(golden["stats"]))
        print("\n".join(describe(d / "model.safetensors")))
        for p in sorted(d.iterdir()):
            print(f"  {p}  {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
