#!/usr/bin/env python3
"""MLX affine 4-bit reference for tessera's MLX loader: real mlx-lm conversions of
SmolLM2-135M-Instruct plus golden logits computed by MLX itself.

Steps (each skipped when its output exists, unless --force):
  1. HF model dir from the f32 GGUF (transformers' GGUF loader, which un-permutes
     llama's q/k rows), with a config.json that mlx-lm reads correctly
     (top-level rope_theta / rms_norm_eps; no GGUF quantization_config).
  2. `python -m mlx_lm convert -q --q-bits 4 --q-group-size G --dtype bfloat16`
     for each G in --group-sizes (default 64 32).
  3. Goldens for TEXT (HF tokenizer, no special tokens):
       mlx4_g{G}_logits.json        MLX as mlx_lm.load gives it (bf16 scales/biases,
                                    bf16 activations)
       mlx4_g{G}_f32act_logits.json same quantized weights, every floating parameter
                                    (scales, biases, norms) cast to f32 (lossless),
                                    so activations are f32: what an f32 engine should
                                    match closely
       f32_hf_logits.json           transformers float32 on the unquantized weights
     Each: per-position top-5 (id, logit) and logsumexp, full rows (5 significant
     digits) for the first and last position, and the layout of the MLX files.
  4. Checks of MLX's affine format on a real layer (unpack, dequant formula,
     re-quantization, numpy re-implementation of the quantizer): printed and
     written as mlx_affine_checks.json.

Run in the venv (pip install "mlx[cpu]" mlx-lm accelerate gguf on Linux):
  .peers/venv/bin/python bench/reference/make_mlx_reference.py
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
TEXT = ("The quick brown fox jumps over the lazy dog. "
        "When running AI models, laptops can heat up.")
TOPK = 5


def sig5(x: float) -> float:
    return float(f"{x:.5g}")


def versions() -> dict:
    import importlib.metadata as md
    out = {"python": sys.version.split()[0]}
    for p in ("mlx", "mlx-cpu", "mlx-lm", "transformers", "torch", "safetensors",
              "numpy", "gguf", "tokenizers"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


# ---------------------------------------------------------------- step 1
def make_hf_dir(gguf: Path, hf_dir: Path, force: bool) -> None:
    if (hf_dir / "model.safetensors").exists() and not force:
        print(f"[hf] {hf_dir} exists, kept")
        return
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = str(gguf.parent), gguf.name
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    # save_pretrained refuses a model that still carries the GGUF "quantizer".
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.rms_norm_eps = 1e-5  # GGUF stores it as f32 (9.99999975e-06)
    if hf_dir.exists():
        shutil.rmtree(hf_dir)
    model.save_pretrained(hf_dir)
    tok.save_pretrained(hf_dir)
    # mlx-lm's llama ModelArgs reads top-level rope_theta (default 10000!) and
    # ignores transformers 5's rope_parameters: write both, as SmolLM2's own
    # config.json has rope_theta at top level.
    cfg_path = hf_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.pop("quantization_config", None)
    cfg["rope_theta"] = float(cfg.get("rope_parameters", {}).get("rope_theta", 100000.0))
    cfg["rms_norm_eps"] = 1e-5
    cfg["torch_dtype"] = "float32"
    cfg["_name_or_path"] = "SmolLM2-135M-Instruct (from " + gguf.name + ")"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    print(f"[hf] wrote {hf_dir}")


def check_hf_config(hf_dir: Path) -> dict:
    cfg = json.loads((hf_dir / "config.json").read_text())
    want = {"rope_theta": 100000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
            "num_hidden_layers": 30, "hidden_size": 576, "num_attention_heads": 9,
            "num_key_value_heads": 3, "vocab_size": 49152, "intermediate_size": 1536}
    bad = {k: (cfg.get(k), v) for k, v in want.items() if cfg.get(k) != v}
    if bad:
        raise SystemExit(f"config mismatch (got, want): {bad}")
    return {k: cfg[k] for k in want}


# ---------------------------------------------------------------- step 2
def convert(hf_dir: Path, mlx_dir: Path, group: int, dtype: str, force: bool) -> list[str]:
    cmd = [sys.executable, "-m", "mlx_lm", "convert", "--hf-path", str(hf_dir),
           "--mlx-path", str(mlx_dir), "-q", "--q-bits", "4", "--q-group-size", str(group),
           "--q-mode", "affine", "--dtype", dtype]
    if (mlx_dir / "model.safetensors").exists() and not force:
        print(f"[convert] {mlx_dir} exists, kept")
        return cmd
    if mlx_dir.exists():
        shutil.rmtree(mlx_dir)
    print("[convert]", " ".join(cmd))
    subprocess.run(cmd, check=True)
    return cmd


def describe_mlx_dir(mlx_dir: Path) -> dict:
    import mlx.core as mx
    w = {}
    for f in sorted(mlx_dir.glob("*.safetensors")):
        w.update(mx.load(str(f)))
    cfg = json.loads((mlx_dir / "config.json").read_text())
    keep = [k for k in sorted(w) if k.startswith("model.layers.0.") or "layers." not in k]
    return {
        "files": sorted(p.name for p in mlx_dir.iterdir()),
        "config_quantization": cfg.get("quantization"),
        "config_quantization_config": cfg.get("quantization_config"),
        "config_rope_theta": cfg.get("rope_theta"),
        "n_tensors": len(w),
        "tensors_layer0_and_global": {k: [str(w[k].dtype).replace("mlx.core.", ""),
                                          list(w[k].shape)] for k in keep},
        "has_lm_head": any(k.startswith("lm_head") for k in w),
    }


# ---------------------------------------------------------------- step 3
def summarize(logits: np.ndarray, tokens: list[int], meta: dict) -> dict:
    logits = logits.astype(np.float64)
    pos = []
    lse = []
    for row in logits:
        top = np.argsort(-row, kind="stable")[:TOPK]
        pos.append({"top": [[int(t), sig5(row[t])] for t in top]})
        m = row.max()
        lse.append(sig5(m + math.log(np.exp(row - m).sum())))
    last = len(tokens) - 1
    return dict(meta, n_vocab=int(logits.shape[1]), n_tokens=len(tokens), tokens=tokens,
                topk=TOPK, positions=pos, logsumexp=lse,
                full_logits={str(0): [sig5(v) for v in logits[0]],
                             str(last): [sig5(v) for v in logits[last]]})


def mlx_logits(mlx_dir: Path, tokens: list[int], f32act: bool) -> np.ndarray:
    import mlx.core as mx
    from mlx.utils import tree_map
    from mlx_lm import load
    model, _ = load(str(mlx_dir))
    if f32act:
        def up(p):
            return p.astype(mx.float32) if p.dtype in (mx.bfloat16, mx.float16) else p
        model.update(tree_map(up, model.parameters()))
    out = model(mx.array([tokens]))
    return np.array(out[0].astype(mx.float32))


def hf_logits(hf_dir: Path, tokens: list[int]) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32)
    m.eval()
    with torch.no_grad():
        return m(torch.tensor([tokens])).logits[0].float().numpy()


def compare(a: np.ndarray, ref: np.ndarray) -> dict:
    top1 = (a.argmax(-1) == ref.argmax(-1))
    d = np.abs(a.astype(np.float64) - ref)
    return {"top1_agree": int(top1.sum()), "n": int(len(top1)),
            "disagree_positions": [int(i) for i in np.nonzero(~top1)[0]],
            "max_abs_logit_diff": sig5(d.max()), "mean_abs_logit_diff": sig5(d.mean())}


# ---------------------------------------------------------------- step 4
def np_unpack4(wq: np.ndarray) -> np.ndarray:
    """uint32 [..., K/8] -> uint8 [..., K]; element k of a word sits at bits 4k..4k+3."""
    shifts = np.arange(8, dtype=np.uint32) * 4
    q = (wq[..., None] >> shifts) & 0xF
    return q.reshape(*wq.shape[:-1], wq.shape[-1] * 8).astype(np.uint8)


def np_affine_quantize(w: np.ndarray, group: int, bits: int = 4):
    """numpy float32 re-implementation of MLX's CPU affine quantizer."""
    w = w.astype(np.float32).reshape(-1, group)
    n_bins = np.float32((1 << bits) - 1)
    wmax, wmin = w.max(1), w.min(1)
    mask = np.abs(wmin) > np.abs(wmax)
    scale = np.maximum((wmax - wmin) / n_bins, np.float32(1e-7)).astype(np.float32)
    scale = np.where(mask, scale, -scale).astype(np.float32)
    edge = np.where(mask, wmin, wmax).astype(np.float32)
    q0 = np.rint(edge / scale).astype(np.float32)
    nz = q0 != 0
    scale = np.where(nz, edge / np.where(nz, q0, 1), scale).astype(np.float32)
    bias = np.where(nz, edge, 0).astype(np.float32)
    q = np.clip(np.rint((w - bias[:, None]) / scale[:, None]), 0, n_bins).astype(np.uint32)
    return q, scale, bias


def affine_checks(hf_dir: Path, mlx_dir: Path, group: int) -> dict:
    import mlx.core as mx
    from safetensors.numpy import load_file
    res = {}
    # small array: which edge becomes the bias, rounding of ties
    x = mx.array([[0.0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] * 2], dtype=mx.float32)
    y = mx.array([[-15.0, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1, 0.5] * 2],
                 dtype=mx.float32)
    for name, a in (("0..15", x), ("-15..0.5", y)):
        wq, s, b = mx.quantize(a, group_size=32, bits=4)
        res[f"small_{name}"] = {"words": [f"0x{int(v):08x}" for v in np.array(wq)[0]],
                                "scale": float(np.array(s)[0, 0]), "bias": float(np.array(b)[0, 0])}
    # real layer
    key = "model.layers.0.self_attn.q_proj"
    st = mx.load(str(mlx_dir / "model.safetensors"))
    wq, s, b = st[key + ".weight"], st[key + ".scales"], st[key + ".biases"]
    wq_np = np.array(wq)
    s_np = np.array(s.astype(mx.float32))
    b_np = np.array(b.astype(mx.float32))
    q = np_unpack4(wq_np).astype(np.float32)                       # [576, 576]
    g = q.reshape(q.shape[0], -1, group)
    deq_np = (s_np[..., None] * g + b_np[..., None]).reshape(q.shape)  # f32, s*q+b
    deq_mx = np.array(mx.dequantize(wq, s, b, group_size=group, bits=4).astype(mx.float32))
    deq_mx32 = np.array(mx.dequantize(wq, s.astype(mx.float32), b.astype(mx.float32),
                                      group_size=group, bits=4))
    deq_np_bf16 = np.array(mx.array(deq_np).astype(mx.bfloat16).astype(mx.float32))
    res["real_layer"] = key
    res["weight_dtype_shape"] = [str(wq.dtype), list(wq.shape)]
    res["scales_dtype_shape"] = [str(s.dtype), list(s.shape)]
    res["max|dequantize(bf16 s,b) - bf16(f32 s*q+b)|"] = float(np.abs(deq_mx - deq_np_bf16).max())
    res["max|dequantize(bf16 s,b) - f32 s*q+b|"] = float(np.abs(deq_mx - deq_np).max())
    res["max|dequantize(f32 s,b) - f32 s*q+b|"] = float(np.abs(deq_mx32 - deq_np).max())
    # with bf16 scales mx.dequantize rounds after each op: bf16(bf16(s*q) + b)
    sq = np.array(mx.array(s_np[..., None] * g).astype(mx.bfloat16).astype(mx.float32))
    per_op = np.array(mx.array(sq + b_np[..., None]).astype(mx.bfloat16).astype(mx.float32))
    res["max|dequantize(bf16 s,b) - bf16(bf16(s*q)+b)|"] = float(
        np.abs(deq_mx - per_op.reshape(q.shape)).max())
    # the stored tensors are mx.quantize of the bf16-cast HF weight
    hf = load_file(str(hf_dir / "model.safetensors"))
    w32 = hf[key + ".weight"].astype(np.float32)
    wbf = mx.array(w32).astype(mx.bfloat16)
    rq, rs, rb = mx.quantize(wbf, group_size=group, bits=4)
    res["requantize_bf16_hf_weight_equals_stored"] = bool(
        np.array_equal(np.array(rq), wq_np) and np.array_equal(np.array(rs.astype(mx.float32)), s_np)
        and np.array_equal(np.array(rb.astype(mx.float32)), b_np))
    # numpy re-implementation on the bf16-rounded weights
    wbf_np = np.array(wbf.astype(mx.float32))
    nq, ns, nb = np_affine_quantize(wbf_np, group)
    ns_bf = np.array(mx.array(ns).astype(mx.bfloat16).astype(mx.float32)).reshape(s_np.shape)
    nb_bf = np.array(mx.array(nb).astype(mx.bfloat16).astype(mx.float32)).reshape(b_np.shape)
    res["numpy_reimpl_q_equal"] = bool(np.array_equal(nq.reshape(q.shape), q.astype(np.uint32)))
    res["numpy_reimpl_q_mismatch_count"] = int((nq.reshape(q.shape) != q).sum())
    res["numpy_reimpl_scales_equal_after_bf16"] = bool(np.array_equal(ns_bf, s_np))
    res["numpy_reimpl_biases_equal_after_bf16"] = bool(np.array_equal(nb_bf, b_np))
    res["bias_is_group_edge"] = bool(np.array_equal(nb, np.where(
        np.abs(wbf_np.reshape(-1, group).min(1)) > np.abs(wbf_np.reshape(-1, group).max(1)),
        wbf_np.reshape(-1, group).min(1), wbf_np.reshape(-1, group).max(1))))
    res["fraction_groups_negative_scale"] = float((s_np < 0).mean())
    res["max|dequant - bf16 weight| / max|weight|"] = float(
        np.abs(deq_np - wbf_np).max() / np.abs(wbf_np).max())
    return res


def torch_dequant_crosscheck(hf_dir: Path, mlx_dir: Path, group: int, tokens: list[int],
                             mlx_f32act: np.ndarray) -> dict:
    """Dequantize every MLX tensor with numpy (unpack low nibble first, s*q+b in f32),
    load into the transformers model (lm_head = dequantized embed_tokens) and compare
    its f32 logits with MLX's f32-activation logits: validates the format description
    independently of MLX's kernels."""
    import mlx.core as mx
    import torch
    from transformers import AutoModelForCausalLM
    st = {}
    for f in sorted(mlx_dir.glob("*.safetensors")):
        st.update(mx.load(str(f)))

    def f32(k):
        return np.array(st[k].astype(mx.float32))

    def deq(prefix):
        q = np_unpack4(np.array(st[prefix + ".weight"])).astype(np.float32)
        g = q.reshape(q.shape[0], -1, group)
        return (g * f32(prefix + ".scales")[..., None] + f32(prefix + ".biases")[..., None]
                ).reshape(q.shape)

    m = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32)
    new = {}
    for k in m.state_dict():
        base = k[: -len(".weight")]
        if base + ".scales" in st:
            new[k] = torch.from_numpy(deq(base))
        elif k in st:
            new[k] = torch.from_numpy(f32(k))
        elif k == "lm_head.weight":
            new[k] = torch.from_numpy(deq("model.embed_tokens"))
        else:
            raise SystemExit(f"no MLX tensor for {k}")
    m.load_state_dict(new, strict=True)
    m.eval()
    with torch.no_grad():
        lg = m(torch.tensor([tokens])).logits[0].numpy()
    c = compare(lg, mlx_f32act)
    return {"what": "numpy dequant -> transformers f32 vs MLX f32-activation logits",
            "top1_agree": c["top1_agree"], "n": c["n"],
            "max_abs_logit_diff": c["max_abs_logit_diff"]}


# ---------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", type=Path, default=REPO / ".peers/SmolLM2-135M-Instruct.F32.gguf")
    ap.add_argument("--hf-dir", type=Path, default=REPO / ".peers/smollm2-hf-f32")
    ap.add_argument("--mlx-prefix", type=Path, default=REPO / ".peers/smollm2-mlx4-g",
                    help="MLX dirs are PREFIX<group>, e.g. .peers/smollm2-mlx4-g64")
    ap.add_argument("--out", type=Path, default=REPO / "tests/fixtures/mlx")
    ap.add_argument("--group-sizes", type=int, nargs="+", default=[64, 32])
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"],
                    help="dtype of scales/biases and unquantized params (mlx-community "
                         "conversions of SmolLM2 are bfloat16, the checkpoint's dtype)")
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()

    make_hf_dir(a.gguf, a.hf_dir, a.force)
    cfg = check_hf_config(a.hf_dir)
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(a.hf_dir))
    tokens = [int(t) for t in tok(a.text, add_special_tokens=False).input_ids]
    print("[tokens]", tokens)

    a.out.mkdir(parents=True, exist_ok=True)
    ver = versions()
    base = {"text": a.text, "tokenizer": "HF tokenizer saved from the GGUF, add_special_tokens=False",
            "versions": ver}

    ref = hf_logits(a.hf_dir, tokens)
    f32 = summarize(ref, tokens, dict(base, model="SmolLM2-135M-Instruct f32 (from "
                                       + a.gguf.name + ")",
                                       compute="transformers float32", hf_config=cfg))
    (a.out / "f32_hf_logits.json").write_text(json.dumps(f32) + "\n")
    print("[hf] top1 per position:", [tok.decode([int(t)]) for t in ref.argmax(-1)])

    checks_all = {}
    for g in a.group_sizes:
        mdir = Path(str(a.mlx_prefix) + str(g))
        cmd = convert(a.hf_dir, mdir, g, a.dtype, a.force)
        layout = describe_mlx_dir(mdir)
        for f32act in (False, True):
            lg = mlx_logits(mdir, tokens, f32act)
            cmp = compare(lg, ref)
            meta = dict(base, model=mdir.name, mlx_dir=str(mdir.relative_to(REPO)) if
                        mdir.is_relative_to(REPO) else str(mdir),
                        group_size=g, bits=4, mode="affine", dtype=a.dtype,
                        convert_command=" ".join(Path(c).name if i == 0 else
                                                 (str(Path(c).relative_to(REPO))
                                                  if c.startswith(str(REPO)) else c)
                                                 for i, c in enumerate(cmd)),
                        compute=("mlx_lm.load + model(mx.array([tokens])), every floating "
                                 "parameter cast to float32 (f32 activations)") if f32act else
                                ("mlx_lm.load + model(mx.array([tokens])) as loaded "
                                 f"({a.dtype} scales/biases/norms, {a.dtype} activations)"),
                        layout=layout, vs_f32_hf=cmp)
            name = f"mlx4_g{g}_f32act_logits.json" if f32act else f"mlx4_g{g}_logits.json"
            (a.out / name).write_text(json.dumps(summarize(lg, tokens, meta)) + "\n")
            print(f"[mlx g{g} f32act={f32act}] vs f32 HF: {cmp}")
            if f32act:
                lg_f32act = lg
        checks_all[f"g{g}"] = affine_checks(a.hf_dir, mdir, g)
        checks_all[f"g{g}"]["torch_dequant_crosscheck"] = torch_dequant_crosscheck(
            a.hf_dir, mdir, g, tokens, lg_f32act)
        print(f"[checks g{g}]", json.dumps(checks_all[f"g{g}"], indent=1))
    (a.out / "mlx_affine_checks.json").write_text(json.dumps(
        dict(checks_all, versions=ver), indent=1) + "\n")
    for p in sorted(a.out.iterdir()):
        print(f"{p}  {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
