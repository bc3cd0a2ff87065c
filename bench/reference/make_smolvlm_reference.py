#!/usr/bin/env python3
"""Golden reference outputs for tessera's SmolVLM (Idefics3) pipeline.

Builds an Idefics3ForConditionalGeneration with SmolVLM-256M shapes (or a narrow
"tiny" variant of the same architecture) and seeded random weights, entirely
offline, saves it in Hugging Face format together with a tokenizer rebuilt from
the SmolLM2 GGUF, converts it with llama.cpp's own convert_hf_to_gguf.py into
text.gguf + mmproj.gguf, and writes golden tensors (.npy, little endian) for
each input image, computed with Hugging Face transformers.

Run inside the venv made by bench/reference/setup_env.sh:

  .peers/venv/bin/python bench/reference/make_smolvlm_reference.py \
      --config tiny --out OUT --images a.png b.png [--seed 1234] [--compact]

Layout of OUT:
  hf/                      HF model dir (config.json, model.safetensors, tokenizer, processor)
                           (--hf-dir puts it elsewhere, e.g. outside a committed fixture)
  text.gguf, mmproj.gguf   llama.cpp converter output
  gguf_dump.json           keys and tensors (name, type, shape) of both GGUFs
  manifest.json            versions, configs, seed, processor class, files and shapes
  golden/<image-stem>/     per-image goldens, see write_goldens()
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

from ref_common import dump_gguf

REPO = Path(__file__).resolve().parents[2]
DEFAULT_LLAMA_CPP = REPO / ".peers/llama_cpp_python-0.3.36/vendor/llama.cpp"
DEFAULT_TOKENIZER_GGUF = REPO / "models/SmolLM2-135M-Instruct.Q4_1.gguf"

QUESTION = "What is the user doing?"

# SmolVLM added-token layout (ids right after SmolLM2's 49152 base tokens).
GLOBAL_IMG_ID = 49152          # <global-img>
ROW_COL_FIRST_ID = 49153       # <row_1_col_1> .. <row_6_col_6> = 49153..49188
FAKE_TOKEN_ID = 49189          # <fake_token_around_image>
IMAGE_TOKEN_ID = 49190         # <image>
END_OF_UTTERANCE_ID = 49279    # <end_of_utterance>
VOCAB_SIZE = 49280

# Chat template written for this script (SmolVLM's published layout):
#   <|im_start|>User:<image>What is the user doing?<end_of_utterance>\nAssistant:
# A role is followed by ':' when its first content item is an image, else ': '.
CHAT_TEMPLATE = (
    "<|im_start|>"
    "{%- for message in messages -%}"
    "{{ message['role'] | capitalize }}"
    "{%- if message['content'][0]['type'] == 'image' -%}{{ ':' }}{%- else -%}{{ ': ' }}{%- endif -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{ part['text'] }}"
    "{%- elif part['type'] == 'image' -%}{{ '<image>' }}{%- endif -%}"
    "{%- endfor -%}"
    "{{ '<end_of_utterance>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ 'Assistant:' }}{%- endif -%}"
)


# ----------------------------------------------------------------------------------------
# configs
# ----------------------------------------------------------------------------------------
def make_config_dict(name: str) -> dict:
    if name == "full":  # SmolVLM-256M shapes
        vision = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12)
        text = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3)
    elif name == "tiny":
        # Same architecture, narrow. Text hidden is 32 (not 64) so that the committed fixture
        # stays < 8 MB: the tied 49280-row embedding dominates (49280*64*2 B = 6.3 MB at f16).
        vision = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2)
        text = dict(hidden_size=32, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2)
    else:
        raise SystemExit(f"unknown config {name}")
    vision.update(image_size=512, patch_size=16, num_channels=3, hidden_act="gelu_pytorch_tanh",
                  layer_norm_eps=1e-6, model_type="idefics3_vision")
    text.update(model_type="llama", architectures=["VLlama3ForCausalLM"], vocab_size=VOCAB_SIZE,
                hidden_act="silu", rms_norm_eps=1e-5, max_position_embeddings=8192,
                rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
                head_dim=text["hidden_size"] // text["num_attention_heads"],
                attention_bias=False, mlp_bias=False, tie_word_embeddings=True,
                bos_token_id=1, eos_token_id=2, pad_token_id=2)
    return dict(vision_config=vision, text_config=text, scale_factor=4, image_token_id=IMAGE_TOKEN_ID,
                tie_word_embeddings=True, use_cache=True, pad_token_id=2)


def build_model(cfg_dict: dict, seed: int):
    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration

    config = Idefics3Config(**cfg_dict)
    config.architectures = ["Idefics3ForConditionalGeneration"]
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config).to(torch.float32).eval()
    init_weights(model, seed)
    return config, model


def init_weights(model, seed: int) -> dict:
    """Seeded, well-scaled random weights; every value is exactly representable in f16.

    - Linear / conv weights: N(0, 1/fan_in)  (variance-preserving, so every block changes the
      residual stream visibly; std 0.02 would make the tiny model's blocks near no-ops)
    - token embedding (tied LM head): N(0, 1/hidden)  -> logits of std ~1
    - vision position embedding: N(0, 0.5^2)
    - LayerNorm / RMSNorm weights: 1 + N(0, 0.1^2);  all biases: N(0, 0.05^2)
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    done = set()
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied lm_head is the same Parameter: seen once
            if id(p) in done:
                continue
            done.add(id(p))
            n = name
            if n.endswith("bias"):
                v = torch.randn(p.shape, generator=gen) * 0.05
            elif "norm" in n and p.dim() == 1:
                v = 1.0 + torch.randn(p.shape, generator=gen) * 0.1
            elif "embed_tokens" in n:
                v = torch.randn(p.shape, generator=gen) / (p.shape[1] ** 0.5)
            elif "position_embedding" in n:
                v = torch.randn(p.shape, generator=gen) * 0.5
            elif p.dim() >= 2:
                fan_in = int(np.prod(p.shape[1:]))
                v = torch.randn(p.shape, generator=gen) / (fan_in ** 0.5)
            else:
                raise RuntimeError(f"unhandled parameter {n} {tuple(p.shape)}")
            p.copy_(v.to(torch.float16).to(torch.float32))
    return {"rule": init_weights.__doc__.strip()}


# ----------------------------------------------------------------------------------------
# tokenizer / processor
# ----------------------------------------------------------------------------------------
def smolvlm_added_tokens() -> list[str]:
    toks = ["<global-img>"]
    toks += [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
    toks += ["<fake_token_around_image>", "<image>"]
    n_reserved = END_OF_UTTERANCE_ID - (IMAGE_TOKEN_ID + 1)
    toks += [f"<|reserved_special_token_{i}|>" for i in range(n_reserved)]
    toks += ["<end_of_utterance>"]
    assert len(toks) == VOCAB_SIZE - 49152
    return toks


def build_tokenizer(gguf_path: Path):
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    r = GGUFReader(str(gguf_path))
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()
    ttypes = r.fields["tokenizer.ggml.token_type"].contents()
    assert r.fields["tokenizer.ggml.model"].contents() == "gpt2"
    assert len(tokens) == 49152, len(tokens)

    vocab = {t: i for i, t in enumerate(tokens)}
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges],
                     fuse_unk=False, byte_fallback=False)
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # control tokens of SmolLM2 (token_type 3 in the GGUF) keep their ids
    control = [tokens[i] for i, t in enumerate(ttypes) if t == 3]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    extra = smolvlm_added_tokens()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in extra])
    for i, t in enumerate(extra):
        assert tok.token_to_id(t) == 49152 + i, (t, tok.token_to_id(t))

    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>", eos_token="<end_of_utterance>", pad_token="<|im_end|>",
        unk_token="<|endoftext|>", add_bos_token=False, add_eos_token=False,
        model_max_length=8192, clean_up_tokenization_spaces=False,
    )
    return hf_tok


def build_processor(tokenizer):
    from transformers import Idefics3ImageProcessor, Idefics3Processor

    ip = Idefics3ImageProcessor(
        do_convert_rgb=True, do_resize=True, size={"longest_edge": 2048}, resample=1,  # 1 = LANCZOS
        do_image_splitting=True, max_image_size={"longest_edge": 512},
        do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], do_pad=True,
    )
    return Idefics3Processor(image_processor=ip, tokenizer=tokenizer, image_seq_len=64,
                             chat_template=CHAT_TEMPLATE)


# ----------------------------------------------------------------------------------------
# llama.cpp conversion
# ----------------------------------------------------------------------------------------
def run_converter(llama_cpp: Path, hf_dir: Path, out: Path, outtype: str, mmproj: bool, log: Path,
                  name: str) -> None:
    cmd = [sys.executable, str(llama_cpp / "convert_hf_to_gguf.py"), str(hf_dir), "--outfile", str(out),
           "--outtype", outtype, "--model-name", name]
    if mmproj:
        cmd.append("--mmproj")
    env = dict(os.environ)
    env.pop("NO_LOCAL_GGUF", None)  # use the gguf-py shipped with that llama.cpp tree
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if rc != 0:
        raise SystemExit(f"converter failed (rc={rc}), see {log}")


# ----------------------------------------------------------------------------------------
# goldens
# ----------------------------------------------------------------------------------------
def save_npy(path: Path, arr: np.ndarray, files: dict) -> None:
    arr = np.ascontiguousarray(arr)
    if arr.dtype.kind == "f":
        arr = arr.astype("<f4")
    elif arr.dtype.kind in "iu" and arr.dtype.itemsize > 1:
        arr = arr.astype("<i8")
    np.save(path, arr)
    files[path.name] = {"shape": list(arr.shape), "dtype": arr.dtype.str}


def pixels_to_u8(pv: np.ndarray) -> np.ndarray | None:
    """Inverse of (u8/255 - 0.5)/0.5; None when the tensor is not exactly of that form."""
    u = np.rint(pv.astype(np.float64) * 127.5 + 127.5)
    if u.min() < 0 or u.max() > 255 or np.abs(u - (pv.astype(np.float64) * 127.5 + 127.5)).max() > 1e-3:
        return None
    return u.astype(np.uint8)


def tile_stats(x: np.ndarray) -> list[dict]:
    out = []
    for t in x:
        t64 = t.astype(np.float64)
        out.append({"mean": float(t64.mean()), "std": float(t64.std()), "abs_sum": float(np.abs(t64).sum()),
                    "min": float(t64.min()), "max": float(t64.max())})
    return out


def write_goldens(model, processor, alt_ip, image_path: Path, gdir: Path, level: str) -> dict:
    """level: "all" (every tile, float32 pixels, all-position logits if <= 256 MiB),
    "compact" (tile 0 + global for encoder/connector, u8 pixels of the global tile only),
    "minimal" (input_ids, connector_out of tile 0 + global, top-64 of the last logits)."""
    compact = level != "all"
    info_level = level
    import torch
    from PIL import Image

    gdir.mkdir(parents=True, exist_ok=True)
    files: dict = {}
    img = Image.open(image_path)
    img.load()
    info = {"level": info_level, "image": image_path.name, "mode": img.mode, "size_wh": list(img.size)}

    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    info["chat_prompt"] = prompt
    inputs = processor(text=[prompt], images=[[img]], return_tensors="pt")
    pv = inputs["pixel_values"]                 # [1, n_tiles, 3, 512, 512]
    pam = inputs["pixel_attention_mask"]        # [1, n_tiles, 512, 512]
    ids = inputs["input_ids"]                   # [1, T]
    n_tiles = pv.shape[1]
    assert bool(pam.all()), "tiles are never padded for a single image with splitting"

    # rows/cols the processor used (return_row_col_info is what the processor asks for)
    rc = processor.image_processor(images=[[img]], return_row_col_info=True)
    rows, cols = int(rc["rows"][0][0]), int(rc["cols"][0][0])
    assert n_tiles == rows * cols + 1 if rows else 1

    # expanded prompt text exactly as the processor built it
    expanded = processor.tokenizer.decode(ids[0].tolist(), skip_special_tokens=False)
    (gdir / "prompt.txt").write_text(expanded)
    files["prompt.txt"] = {"chars": len(expanded)}
    save_npy(gdir / "input_ids.npy", ids[0].numpy().astype(np.int64), files)

    pv_np = pv[0].numpy()
    alt = alt_ip(images=[[img]], return_tensors="np")["pixel_values"][0]
    u8 = pixels_to_u8(pv_np)
    u8_alt = pixels_to_u8(alt)
    keep = list(range(n_tiles)) if not compact else sorted({0, n_tiles - 1})
    info["tiles_saved"] = keep
    if level == "compact":
        assert u8 is not None
        save_npy(gdir / "pixel_values_u8.npy", u8[[n_tiles - 1]], files)
        if u8_alt is not None:
            # the other backend's global tile, as the few bytes where it differs: [k, 2] int64 rows of
            # (flat index into [3, 512, 512], alt u8 value)
            g, ga = u8[-1].reshape(-1), u8_alt[-1].reshape(-1)
            idx = np.nonzero(g != ga)[0]
            save_npy(gdir / "pixel_values_u8_alt_diff.npy",
                     np.stack([idx, ga[idx].astype(np.int64)], axis=1).astype(np.int64), files)
    if compact:
        info["pixel_values_u8_note"] = ("compact: only the global tile (last); pixel = (u8 - 127.5) / 127.5 "
                                        "in float32 for the default processor")
    if level == "all":
        save_npy(gdir / "pixel_values.npy", pv_np, files)
        save_npy(gdir / "pixel_values_alt.npy", alt, files)
    diff = np.abs(pv_np - alt)
    info["default_vs_alt_pixels"] = {
        "max_abs": float(diff.max()), "mean_abs": float(diff.mean()),
        "u8_equal_fraction": float((u8 == u8_alt).mean()) if (u8 is not None and u8_alt is not None) else None,
        "u8_max_abs_diff": int(np.abs(u8.astype(int) - u8_alt.astype(int)).max())
        if (u8 is not None and u8_alt is not None) else None,
    }
    if u8 is not None:
        info["tile_u8_sha256"] = [hashlib.sha256(t.tobytes()).hexdigest() for t in u8]
        info["tile_u8_sha256_note"] = "sha256 of each tile's uint8 CHW bytes (order: row-major tiles, global last)"
    if u8_alt is not None:
        info["alt_tile_u8_sha256"] = [hashlib.sha256(t.tobytes()).hexdigest() for t in u8_alt]
    info["pixel_tile_stats"] = tile_stats(pv_np)

    vm = model.model.vision_model
    with torch.no_grad():
        t0 = pv[0, :1]
        patch_mask = torch.ones((1, 32, 32), dtype=torch.bool)
        pe = vm.embeddings(pixel_values=t0, patch_attention_mask=patch_mask)
        enc = torch.cat([vm(pixel_values=pv[0, i:i + 1]).last_hidden_state for i in range(n_tiles)])
        con = model.model.connector(enc)
        # the model's own path must give the same features
        feats = model.model.get_image_features(pixel_values=pv, pixel_attention_mask=pam).pooler_output[0]
        assert torch.allclose(feats.reshape(con.shape), con, atol=1e-5, rtol=1e-5)
        out = model(input_ids=ids, attention_mask=inputs["attention_mask"], pixel_values=pv,
                    pixel_attention_mask=pam)
        logits = out.logits[0]
        gen = model.generate(input_ids=ids, attention_mask=inputs["attention_mask"], pixel_values=pv,
                             pixel_attention_mask=pam, max_new_tokens=8, do_sample=False,
                             eos_token_id=None, pad_token_id=2)
    if level != "minimal":
        save_npy(gdir / "patch_embeds.npy", pe[0].numpy(), files)
        save_npy(gdir / "encoder_out.npy", enc.numpy()[keep], files)
        save_npy(gdir / "logits_last.npy", logits[-1].numpy(), files)
    else:
        last = logits[-1].double()
        top = torch.topk(last, 64)
        save_npy(gdir / "logits_last_top64_ids.npy", top.indices.numpy().astype(np.int64), files)
        save_npy(gdir / "logits_last_top64.npy", top.values.float().numpy(), files)
        info["logits_last_logsumexp"] = float(torch.logsumexp(last, 0))
        info["logits_last_stats"] = tile_stats(last.numpy()[None])[0]
    save_npy(gdir / "connector_out.npy", con.numpy()[keep], files)
    if not compact and logits.numel() * 4 <= 256 * 2**20:
        save_npy(gdir / "logits.npy", logits.numpy(), files)
    info["encoder_tile_stats"] = tile_stats(enc.numpy())
    info["connector_tile_stats"] = tile_stats(con.numpy())
    info["greedy_next_tokens"] = gen[0, ids.shape[1]:].tolist()
    info["argmax_last"] = int(logits[-1].argmax())

    rc_info = {"rows": rows, "cols": cols, "n_tiles": n_tiles, "global_tile_index": n_tiles - 1,
               "image_size_wh": list(img.size), "tiles_saved": keep}
    (gdir / "rows_cols.json").write_text(json.dumps(rc_info, indent=1) + "\n")
    files["rows_cols.json"] = rc_info
    info["n_tokens"] = int(ids.shape[1])
    info["n_image_tokens"] = int((ids == IMAGE_TOKEN_ID).sum())
    info["files"] = files
    (gdir / "info.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def image_key(path: Path) -> str:
    """golden/ folder name: the stem for .png, stem + '_' + extension otherwise (x.jpg -> x_jpg)."""
    ext = path.suffix.lower().lstrip(".")
    return path.stem if ext == "png" else f"{path.stem}_{ext}"


# ----------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=["full", "tiny"], default="tiny")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--images", type=Path, nargs="*", default=[])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--hf-dir", type=Path, default=None, help="where to write the HF model (default OUT/hf)")
    ap.add_argument("--text-outtype", default="f32", choices=["f32", "f16"],
                    help="text.gguf type; weights are f16-exact so f16 is lossless")
    ap.add_argument("--mmproj-outtype", default="f32", choices=["f32", "f16"])
    ap.add_argument("--compact", action="store_true",
                    help="small goldens for a committed fixture: the first image gets level 'compact' "
                         "(tile 0 + global only, u8 pixels of the global tile only, no all-position "
                         "logits), the others level 'minimal' (see write_goldens)")
    ap.add_argument("--llama-cpp", type=Path, default=DEFAULT_LLAMA_CPP)
    ap.add_argument("--tokenizer-gguf", type=Path, default=DEFAULT_TOKENIZER_GGUF)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-convert", action="store_true")
    args = ap.parse_args()

    import PIL
    import tokenizers
    import torch
    import transformers
    from transformers import AutoImageProcessor, AutoProcessor, Idefics3ForConditionalGeneration

    torch.set_num_threads(args.threads)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    hf_dir: Path = args.hf_dir or out / "hf"
    hf_dir.mkdir(parents=True, exist_ok=True)

    cfg_dict = make_config_dict(args.config)
    config, model = build_model(cfg_dict, args.seed)
    model.save_pretrained(hf_dir)
    tok = build_tokenizer(args.tokenizer_gguf)
    proc = build_processor(tok)
    proc.save_pretrained(hf_dir)

    # Reload everything from disk, as a user would, so the goldens come from the saved model
    # and from whatever processor classes transformers picks by default.
    model = Idefics3ForConditionalGeneration.from_pretrained(hf_dir, dtype=torch.float32).eval()
    processor = AutoProcessor.from_pretrained(hf_dir)
    ip_cls = type(processor.image_processor).__name__
    alt_backend = "pil" if "Pil" not in ip_cls else "torchvision"
    alt_ip = AutoImageProcessor.from_pretrained(hf_dir, backend=alt_backend)
    assert model.lm_head.weight.data_ptr() == model.model.text_model.embed_tokens.weight.data_ptr()

    manifest = {
        "generator": "bench/reference/make_smolvlm_reference.py",
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                 if k not in ("images",)},
        "images": [str(p) for p in args.images],
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                     "numpy": np.__version__, "pillow": PIL.__version__},
        "seed": args.seed,
        "weights": init_weights.__doc__.strip(),
        "dtype": "float32",
        "attn_implementation": model.config._attn_implementation,
        "config": json.loads((hf_dir / "config.json").read_text()),
        "processor": {"class": type(processor).__name__, "image_processor_default": ip_cls,
                      "image_processor_alt": type(alt_ip).__name__,
                      "pixel_values_file": "default processor", "pixel_values_alt_file": "alt processor",
                      "image_seq_len": processor.image_seq_len,
                      "image_processor_config": json.loads(processor.image_processor.to_json_string())},
        "chat_template": CHAT_TEMPLATE,
        "token_ids": {t: tok.convert_tokens_to_ids(t) for t in
                      ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<global-img>", "<row_1_col_1>",
                       "<row_6_col_6>", "<fake_token_around_image>", "<image>", "<end_of_utterance>"]},
    }

    if not args.skip_convert:
        name = f"smolvlm-{args.config}-random-seed{args.seed}"  # general.name, stable across output dirs
        run_converter(args.llama_cpp, hf_dir, out / "text.gguf", args.text_outtype, False, out / "convert_text.log",
                      name)
        run_converter(args.llama_cpp, hf_dir, out / "mmproj.gguf", args.mmproj_outtype, True,
                      out / "convert_mmproj.log", name)
        dump = {"text.gguf": dump_gguf(out / "text.gguf"), "mmproj.gguf": dump_gguf(out / "mmproj.gguf")}
        (out / "gguf_dump.json").write_text(json.dumps(dump, indent=1, default=str) + "\n")
        manifest["gguf"] = {"text.gguf": args.text_outtype, "mmproj.gguf": args.mmproj_outtype,
                            "dump": "gguf_dump.json"}

    manifest["goldens"] = {}
    for i, img in enumerate(args.images):
        level = "all" if not args.compact else ("compact" if i == 0 else "minimal")
        print(f"goldens for {img} ({level})", flush=True)
        key = image_key(img)
        info = write_goldens(model, processor, alt_ip, img, out / "golden" / key, level)
        manifest["goldens"][key] = {k: info[k] for k in
                                         ("level", "image", "mode", "size_wh", "n_tokens", "n_image_tokens", "files",
                                          "argmax_last", "greedy_next_tokens", "default_vs_alt_pixels")}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
