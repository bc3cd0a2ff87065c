#!/usr/bin/env python3
"""Golden reference outputs for tessera's Qwen3-VL pipeline.

Builds a Qwen3VLForConditionalGeneration with the published Qwen3-VL-2B-Instruct shapes
(`--config 2b`) or a narrow variant of the same architecture (`--config tiny`) and seeded random
weights, entirely offline; saves it in Hugging Face format with a tokenizer rebuilt from
llama.cpp's ggml-vocab-qwen2.gguf and the published Qwen3-VL processor / chat-template files;
converts it with llama.cpp's own convert_hf_to_gguf.py (run from its source tree) into
text.gguf + mmproj.gguf; and writes goldens (.npy, little endian) computed with transformers in
float32 on CPU. Optionally (default on) it also runs the llama.cpp binaries on the converted
files and records whether they agree (llamacpp_check.json).

Run inside the venv made by bench/reference/setup_env.sh:

  S=tests/fixtures/vision/screens
  .peers/venv/bin/python bench/reference/make_qwen3vl_reference.py --config tiny --trim \\
      --out tests/fixtures/qwen3vl/tiny --images $S/xterm_700x450.png $S/xterm_1280x720.png
  nice .peers/venv/bin/python bench/reference/make_qwen3vl_reference.py --config 2b \\
      --out .peers/qwen3vl-2b --images $S/xterm_700x450.png $S/xterm_1280x720.png

(bench/reference/README.md, section "Qwen3-VL", has the results and the implementation notes.)

Layout of OUT:
  hf/                      the HF dir (default; --hf-dir puts it elsewhere)
  hf_config/               the HF dir without model.safetensors (configs, tokenizer, processor files)
                           (only when --hf-dir puts the HF dir elsewhere; else OUT/hf is the full dir)
  text.gguf, mmproj.gguf   llama.cpp converter output; convert_text.log, convert_mmproj.log
  gguf_dump.json           keys and tensors (name, type, ggml shape) of both GGUFs
  manifest.json            versions, configs, seed, processor classes, files and shapes, sha256s
  golden/text_<i>/         text-only goldens (see write_text_goldens)
  golden/<image-stem>/     image goldens (see write_image_goldens)
  llamacpp_check.json      llama.cpp greedy decode vs transformers, mtmd-cli image run (if run)

Integer .npy files are int32 (tests/npy.h widens them); `--npy-int int64` writes int64.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ref_common import bytes_to_unicode, dump_gguf

REPO = Path(__file__).resolve().parents[2]
DEFAULT_LLAMA_CPP = REPO / ".peers/llama_cpp_python-0.3.36/vendor/llama.cpp"
DEFAULT_LLAMA_BIN = REPO / ".peers/llama.cpp-build/bin"
DEFAULT_VOCAB_GGUF = REPO / "tests/fixtures/vocab/ggml-vocab-qwen2.gguf"
CHAT_TEMPLATE_FILE = Path(__file__).resolve().parent / "qwen3vl_chat_template.jinja"

QUESTION = "What is the user doing?"
TEXT_PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are a helpful assistant."},
     {"role": "user", "content": "Write a haiku about the sea."}],
    [{"role": "user", "content": [{"type": "text", "text": "Count from 1 to 5, then say 'done'."}]}],
]
N_GREEDY_TEXT = 16
N_GREEDY_IMAGE = 8

# ----------------------------------------------------------------------------------------
# Qwen3-VL added tokens (ids 151643.. right after Qwen2's 151643 BPE tokens).
# Source: the published Qwen/Qwen3-VL-*-Instruct tokenizer_config.json "added_tokens_decoder"
# (Qwen2/Qwen2.5-VL list up to <|file_sep|> 151664; Qwen3 adds <tool_response> .. </think>).
# special=True for 151643..151656, False for 151657..151668. Confirmed against public copies
# of the Qwen2.5-VL / Qwen3 tokenizer_config.json files (see bench/reference/README.md).
# ggml-vocab-qwen2.gguf only has the first three (type CONTROL), the rest are [PADn].
# ----------------------------------------------------------------------------------------
ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
    ("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False),
]
N_QWEN2_BASE = 151643
QWEN2_PRETOKENIZE_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                           r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


# ----------------------------------------------------------------------------------------
# configs
# ----------------------------------------------------------------------------------------
def published_2b_config() -> dict:
    """Qwen/Qwen3-VL-2B-Instruct config.json as published (transformers 4.57 layout:
    rope_scaling + rope_theta inside text_config; transformers 5 converts it to rope_parameters).

    Where the numbers come from (no Hub access here; public copies found with code search):
      - text: hidden 2048, 28 layers, 16 heads, 8 KV heads, head_dim 128, FFN 6144, rope_theta 5e6,
        max_position_embeddings 262144, tie_word_embeddings true, mrope_section [24, 20, 20]
        interleaved -- several independent copies of the 2B config.json (Rust/Zig/C++ loader tests
        "Qwen3-VL-2B", an InfiniCore Qwen3VLMeta dump: nlayer 28, d 2048, nh 16, nkvh 8, dh 128,
        theta 5e6, dvoc 151936), consistent with the verbatim 4B/8B configs (same keys, same rope,
        same token ids) copied into tensorrt_llm / diffusers-style tests.
      - vision: depth 24, hidden 1024, 16 heads, FFN 4096, patch 16, temporal 2, merge 2,
        num_position_embeddings 2304, deepstack_visual_indexes [5, 11, 17], out_hidden_size 2048
        (= text hidden), hidden_act gelu_pytorch_tanh -- same copies; the 4B config has the same
        vision tower with out_hidden_size 2560, the 8B one the 27-layer 1152-wide tower.
      - token ids 151643 (bos), 151645 (eos), 151652/151653 vision start/end, 151655 image,
        151656 video -- every Qwen3-VL config.json.
    """
    return {
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "image_token_id": 151655,
        "model_type": "qwen3_vl",
        "text_config": {
            "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643, "dtype": "bfloat16",
            "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
            "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 262144,
            "model_type": "qwen3_vl_text", "num_attention_heads": 16, "num_hidden_layers": 28,
            "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
            "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
            "rope_theta": 5000000, "tie_word_embeddings": True, "use_cache": True, "vocab_size": 151936,
        },
        "tie_word_embeddings": True,
        "transformers_version": "4.57.0.dev0",
        "video_token_id": 151656,
        "vision_config": {
            "deepstack_visual_indexes": [5, 11, 17], "depth": 24, "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": 1024, "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4096,
            "model_type": "qwen3_vl", "num_heads": 16, "num_position_embeddings": 2304, "out_hidden_size": 2048,
            "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
        },
        "vision_end_token_id": 151653,
        "vision_start_token_id": 151652,
    }


def tiny_config(n_base: int) -> dict:
    """Same architecture, narrow. Text: hidden 64, 4 layers (DeepStack feeds layers 0..2, layer 3
    has none), 4 heads x head_dim 32 (q width 128 != hidden, like Qwen3's explicit head_dim), 2 KV
    heads, FFN 96; mrope_section [6, 5, 5] sums to head_dim/2 = 16 and keeps the published
    T > H = W shape ([24, 20, 20] for 64). Vision: hidden 32, 2 heads (head_dim 16), FFN 64, depth 4
    with deepstack_visual_indexes [0, 2, 3] (non-contiguous, one equal to the last block),
    16x16 learned position grid (256 entries, upsampled for every test image), patch 16,
    temporal 2, merge 2, out_hidden_size 64. Vocabulary: the first n_base Qwen2 BPE tokens + the 26
    added tokens re-numbered right after them."""
    cfg = published_2b_config()
    ids = {t: n_base + i for i, (t, _) in enumerate(ADDED_TOKENS)}
    cfg["image_token_id"] = ids["<|image_pad|>"]
    cfg["video_token_id"] = ids["<|video_pad|>"]
    cfg["vision_start_token_id"] = ids["<|vision_start|>"]
    cfg["vision_end_token_id"] = ids["<|vision_end|>"]
    t = cfg["text_config"]
    t.update(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
             intermediate_size=96, vocab_size=n_base + len(ADDED_TOKENS), bos_token_id=ids["<|endoftext|>"],
             eos_token_id=ids["<|im_end|>"], max_position_embeddings=4096)
    t["rope_scaling"] = {"mrope_interleaved": True, "mrope_section": [6, 5, 5], "rope_type": "default"}
    v = cfg["vision_config"]
    v.update(depth=4, hidden_size=32, num_heads=2, intermediate_size=64, deepstack_visual_indexes=[0, 2, 3],
             num_position_embeddings=256, out_hidden_size=64)
    return cfg


# ----------------------------------------------------------------------------------------
# tokenizer (rebuilt from ggml-vocab-qwen2.gguf) and the published-layout HF files
# ----------------------------------------------------------------------------------------
def load_qwen2_vocab(gguf_path: Path, n_base: int | None) -> dict:
    """Base BPE tokens + merges from the GGUF, truncated to the first n_base tokens (None = all)."""
    from gguf import GGUFReader

    r = GGUFReader(str(gguf_path))
    assert r.fields["tokenizer.ggml.model"].contents() == "gpt2"
    assert r.fields["tokenizer.ggml.pre"].contents() == "qwen2"
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    ttypes = r.fields["tokenizer.ggml.token_type"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()
    assert all(t == 1 for t in ttypes[:N_QWEN2_BASE]), "expected NORMAL tokens below 151643"
    assert tokens[N_QWEN2_BASE] == "<|endoftext|>"
    n = N_QWEN2_BASE if n_base is None else n_base
    kept = tokens[:n]
    kept_set = set(kept)
    byte_chars = set(bytes_to_unicode().values())
    missing = byte_chars - kept_set
    assert not missing, f"byte-level tokens missing from the first {n}: {sorted(missing)[:8]}"
    kept_merges = []
    for m in merges:
        a, b = m.split(" ", 1)
        if a in kept_set and b in kept_set and (a + b) in kept_set:
            kept_merges.append((a, b))
    return {"tokens": kept, "merges": kept_merges, "n_base": n, "n_merges_total": len(merges),
            "gguf_sha256": sha256_file(gguf_path)}


def build_tokenizer_object(vocab: dict):
    """tokenizers.Tokenizer with Qwen2's pipeline: NFC, Split(Qwen2 regex, isolated) + ByteLevel(no regex),
    BPE (no byte fallback, no unk), ByteLevel decoder/post-processor, the 26 added tokens."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    v = {t: i for i, t in enumerate(vocab["tokens"])}
    bpe = models.BPE(vocab=v, merges=vocab["merges"], dropout=None, unk_token=None, continuing_subword_prefix="",
                     end_of_word_suffix="", fuse_unk=False, byte_fallback=False, ignore_merges=False)
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    for content, special in ADDED_TOKENS:
        at = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special)
        if special:
            tok.add_special_tokens([at])
        else:
            tok.add_tokens([at])
    for i, (content, _) in enumerate(ADDED_TOKENS):
        assert tok.token_to_id(content) == vocab["n_base"] + i, content
    return tok


def write_tokenizer_files(tok, vocab: dict, hf_dir: Path, chat_template: str) -> None:
    """tokenizer.json, vocab.json, merges.txt, tokenizer_config.json in the published layout."""
    tok.save(str(hf_dir / "tokenizer.json"))
    (hf_dir / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab["tokens"])}, ensure_ascii=False))
    with open(hf_dir / "merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in vocab["merges"]:
            f.write(f"{a} {b}\n")
    n = vocab["n_base"]
    added = {str(n + i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                          "special": s} for i, (c, s) in enumerate(ADDED_TOKENS)}
    cfg = {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": added,
        "additional_special_tokens": [c for c, s in ADDED_TOKENS[1:14]],
        "bos_token": None, "chat_template": chat_template, "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 262144, "pad_token": "<|endoftext|>",
        "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    (hf_dir / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


# Published Qwen3-VL processor files (same for 2B/4B/8B/...; see bench/reference/README.md for sources).
# size.longest_edge / shortest_edge are max / min pixels (H*W) of the resized image: 16384 / 64 merged
# tokens at 32x32 pixels per token (QwenLM/Qwen3-VL README, "Pixel Control via Official Processor").
PREPROCESSOR_CONFIG = {
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast",
}
VIDEO_PREPROCESSOR_CONFIG = {
    "size": {"longest_edge": 25165824, "shortest_edge": 4096},
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor", "video_processor_type": "Qwen3VLVideoProcessor",
}


def generation_config(ids: dict) -> dict:
    # Qwen3-VL-*-Instruct generation_config.json (recommended sampling of the model card:
    # top_p 0.8, top_k 20, temperature 0.7); the goldens always decode greedily.
    return {"bos_token_id": ids["<|endoftext|>"], "pad_token_id": ids["<|endoftext|>"], "do_sample": True,
            "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]], "top_k": 20, "top_p": 0.8,
            "repetition_penalty": 1.0, "temperature": 0.7, "transformers_version": "4.56.0"}


def write_processor_files(hf_dir: Path, chat_template: str, ids: dict) -> None:
    (hf_dir / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=2) + "\n")
    (hf_dir / "video_preprocessor_config.json").write_text(json.dumps(VIDEO_PREPROCESSOR_CONFIG, indent=2) + "\n")
    (hf_dir / "chat_template.json").write_text(json.dumps({"chat_template": chat_template}, indent=2) + "\n")
    (hf_dir / "generation_config.json").write_text(json.dumps(generation_config(ids), indent=2) + "\n")


def check_tokenizer(hf_dir: Path, raw_tok, vocab: dict, full: bool) -> dict:
    """The tokenizer transformers loads from hf_dir must agree with the tokenizers object; for the
    full vocabulary, also with llama.cpp's own expected ids for ggml-vocab-qwen2 (the .inp/.out test
    files next to the GGUF)."""
    from transformers import AutoTokenizer

    hf_tok = AutoTokenizer.from_pretrained(hf_dir)
    samples = ["Hello world", "  leading spaces\n\n\ttabs", "What is the capital of France?", "3.14159 x 2026",
               "naïve café — ünïcödé 你好 🦙", "<|im_start|>user\nhi<|im_end|>\n<think></think><tool_call>"]
    res = {"class": type(hf_tok).__name__, "samples": {}}
    for s in samples:
        a = raw_tok.encode(s, add_special_tokens=False).ids
        b = hf_tok(s, add_special_tokens=False)["input_ids"]
        assert a == b, (s, a, b)
        res["samples"][s] = a
    if full:
        inp = DEFAULT_VOCAB_GGUF.with_suffix(".gguf.inp")
        out = DEFAULT_VOCAB_GGUF.with_suffix(".gguf.out")
        if inp.exists() and out.exists():
            texts = inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
            expected = out.read_text(encoding="utf-8").strip("\n").split("\n")
            texts = [t for t in texts]
            if texts and texts[-1].endswith("\n__ggml_vocab_test__"):
                texts[-1] = texts[-1][: -len("\n__ggml_vocab_test__")]
            n_ok = 0
            mismatches = []
            for t, e in zip(texts, expected):
                got = hf_tok(t, add_special_tokens=False)["input_ids"]
                want = [int(x) for x in e.split()]
                if got == want:
                    n_ok += 1
                else:
                    mismatches.append({"text": t, "got": got, "want": want})
            res["ggml_vocab_test"] = {"cases": len(expected), "ok": n_ok, "mismatches": mismatches[:5]}
    return res


# ----------------------------------------------------------------------------------------
# model
# ----------------------------------------------------------------------------------------
def init_weights(model, seed: int) -> None:
    """Seeded, well-scaled random weights; every value is exactly representable in f16 (so an f16
    GGUF is lossless):
    - Linear / conv weights: N(0, 1/fan_in); token embedding (tied LM head): N(0, 1/hidden)
    - vision learned position embedding: N(0, 0.5^2)
    - LayerNorm / RMSNorm weights (incl. q_norm/k_norm): 1 + N(0, 0.1^2); all biases: N(0, 0.05^2)
    Activations and logits come out O(1) over all layers."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied lm_head is the same Parameter: listed once
            if name.endswith("bias"):
                v = torch.randn(p.shape, generator=gen) * 0.05
            elif "norm" in name and p.dim() == 1:
                v = 1.0 + torch.randn(p.shape, generator=gen) * 0.1
            elif "embed_tokens" in name:
                v = torch.randn(p.shape, generator=gen) / (p.shape[1] ** 0.5)
            elif name.endswith("pos_embed.weight"):
                v = torch.randn(p.shape, generator=gen) * 0.5
            elif p.dim() >= 2:
                fan_in = int(np.prod(p.shape[1:]))
                v = torch.randn(p.shape, generator=gen) / (fan_in ** 0.5)
            else:
                raise RuntimeError(f"unhandled parameter {name} {tuple(p.shape)}")
            p.copy_(v.to(torch.float16).to(torch.float32))


def build_and_save_model(cfg_dict: dict, seed: int, hf_dir: Path, save_dtype: str) -> dict:
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    config = Qwen3VLConfig(**copy.deepcopy(cfg_dict))
    config.architectures = ["Qwen3VLForConditionalGeneration"]
    torch.manual_seed(seed)
    t0 = time.time()
    with torch.device("cpu"):
        model = Qwen3VLForConditionalGeneration(config).to(torch.float32).eval()
    init_weights(model, seed)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model built + initialised in {time.time() - t0:.0f}s, {n_params / 1e6:.1f}M params", flush=True)
    assert model.lm_head.weight.data_ptr() == model.model.language_model.embed_tokens.weight.data_ptr()
    if save_dtype == "f16":
        model = model.to(torch.float16)  # lossless: every weight is f16-exact
    model.save_pretrained(hf_dir, safe_serialization=True)
    del model
    return {"n_params": n_params}


# ----------------------------------------------------------------------------------------
# llama.cpp conversion
# ----------------------------------------------------------------------------------------
# The converter is run in a child Python from llama.cpp's source tree with its own gguf-py.
# For a truncated vocabulary the converter's pre-tokenizer detection (sha256 of the token ids of a
# fixed test string, get_vocab_base_pre) cannot match any known hash, so for --config tiny we patch
# TextModel.get_vocab_base_pre to return "qwen2": the tokenizer *is* Qwen2's (same regex / NFC /
# byte-level pipeline), only shorter. With the full vocabulary the hash is left to match by itself.
CONVERTER_BOOT = r"""
import runpy, sys
llama, force_pre = sys.argv[1], sys.argv[2]
sys.path.insert(0, llama + "/gguf-py")
sys.path.insert(0, llama)
script = llama + "/convert_hf_to_gguf.py"
sys.argv = [script] + sys.argv[3:]
if force_pre:
    import conversion.base as base
    def get_vocab_base_pre(self, tokenizer):
        print(f"[make_qwen3vl_reference] get_vocab_base_pre patched: tokenizer.ggml.pre = {force_pre!r}")
        return force_pre
    base.TextModel.get_vocab_base_pre = get_vocab_base_pre
runpy.run_path(script, run_name="__main__")
"""


def run_converter(llama_cpp: Path, hf_dir: Path, out: Path, outtype: str, mmproj: bool, log: Path, name: str,
                  force_pre: str) -> None:
    args = [str(hf_dir.resolve()), "--outfile", str(out.resolve()), "--outtype", outtype, "--model-name", name]
    if mmproj:
        args.append("--mmproj")
    cmd = [sys.executable, "-c", CONVERTER_BOOT, str(llama_cpp.resolve()), force_pre] + args
    env = dict(os.environ)
    env.pop("NO_LOCAL_GGUF", None)
    with open(log, "w") as f:
        f.write("# cwd: " + str(llama_cpp) + "\n# python -c CONVERTER_BOOT (make_qwen3vl_reference.py) "
                + str(llama_cpp) + f" {force_pre!r} " + " ".join(args) + "\n")
        f.flush()
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=llama_cpp).returncode
    if rc != 0:
        raise SystemExit(f"converter failed (rc={rc}), see {log}")
    # keep logs machine-independent
    txt = log.read_text()
    for p, r in ((str(hf_dir.resolve()), "HF_DIR"), (str(out.resolve().parent), "OUT"), (str(llama_cpp.resolve()), "LLAMA_CPP"),
                 (str(REPO), "REPO")):
        txt = txt.replace(p, r)
    txt = re.sub(r"\[\d\d:\d\d<\d\d:\d\d, [^\]]*\]", "[time]", txt)  # progress bars: keep logs reproducible
    log.write_text(txt)


# ----------------------------------------------------------------------------------------
# goldens
# ----------------------------------------------------------------------------------------
def rel(p: Path) -> str:
    """p relative to the repository when inside it (for manifests), else as given."""
    rp = p.resolve()
    return str(rp.relative_to(REPO)) if rp.is_relative_to(REPO) else str(p)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Saver:
    def __init__(self, int_dtype: str):
        self.int_dtype = "<i4" if int_dtype == "int32" else "<i8"

    def __call__(self, path: Path, arr, files: dict) -> None:
        arr = np.ascontiguousarray(np.asarray(arr))
        if arr.dtype.kind == "f":
            arr = arr.astype("<f4")
        elif arr.dtype == np.uint8:
            pass
        elif arr.dtype.kind in "iub":
            arr = arr.astype(self.int_dtype)
        np.save(path, arr)
        files[path.name] = {"shape": list(arr.shape), "dtype": arr.dtype.str}


def stats(x) -> dict:
    x = np.asarray(x, dtype=np.float64)
    return {"mean": float(x.mean()), "std": float(x.std()), "min": float(x.min()), "max": float(x.max()),
            "abs_sum": float(np.abs(x).sum())}


def greedy(model, n_new: int, pad_id: int, **inputs):
    """Plain argmax decoding of n_new tokens (no EOS stop, no suppression) via generate()."""
    import torch
    from transformers import GenerationConfig

    gc = GenerationConfig(do_sample=False, max_new_tokens=n_new, min_new_tokens=0, eos_token_id=None,
                          pad_token_id=pad_id, bos_token_id=None, top_k=None, top_p=None, temperature=None)
    model.model.rope_deltas = None
    with torch.no_grad():
        out = model.generate(**inputs, generation_config=gc)
    model.model.rope_deltas = None
    new = out[0, inputs["input_ids"].shape[1]:].tolist()
    assert len(new) == n_new, (len(new), n_new)
    return new


def teacher_check(model, ids, new, **extra) -> dict:
    """Re-run the full sequence (prompt + greedy tokens) without cache: each greedy token must be the
    argmax there too; returns the top1-top2 logit margin of every step."""
    import torch

    full = torch.cat([ids, torch.tensor([new], dtype=ids.dtype)], dim=1)
    model.model.rope_deltas = None
    extra = dict(extra)
    if "mm_token_type_ids" in extra:
        mt = extra["mm_token_type_ids"]
        extra["mm_token_type_ids"] = torch.cat([mt, torch.zeros((1, len(new)), dtype=mt.dtype)], dim=1)
    with torch.no_grad():
        lg = model(input_ids=full, attention_mask=torch.ones_like(full), **extra).logits[0]
    model.model.rope_deltas = None
    T = ids.shape[1]
    steps = lg[T - 1: T - 1 + len(new)].double()
    top2 = torch.topk(steps, 2, dim=-1)
    argmax_ok = [int(a) == int(b) for a, b in zip(top2.indices[:, 0].tolist(), new)]
    return {"argmax_matches_full_forward": argmax_ok,
            "margins_top1_top2": [float(x) for x in (top2.values[:, 0] - top2.values[:, 1]).tolist()]}


def byte_level_decode(tok, ids: list[int]) -> bytes:
    """Raw bytes of the tokens (special tokens verbatim), like llama.cpp prints them with --special."""
    inv = {c: b for b, c in bytes_to_unicode().items()}
    out = bytearray()
    for i in ids:
        t = tok.convert_ids_to_tokens(i)
        if i >= tok.convert_tokens_to_ids("<|endoftext|>"):
            out += t.encode("utf-8")
        else:
            out += bytes(inv[c] for c in t)
    return bytes(out)


def write_text_goldens(model, processor, tok, gdir: Path, messages, save: Saver, logits_last_n: int | None) -> dict:
    """golden/text_<i>/: prompt.txt (chat-templated), input_ids.npy/.json, logits.npy [T, V] (tiny) or
    logits_last8.npy [8, V] (2b) teacher-forced from input_ids only (text path: the M-RoPE positions
    degenerate to t = h = w = position), greedy.json (16 argmax tokens, with a no-cache re-check)."""
    import torch

    gdir.mkdir(parents=True, exist_ok=True)
    files: dict = {}
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    (gdir / "prompt.txt").write_text(prompt)
    ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    save(gdir / "input_ids.npy", ids[0].numpy(), files)
    (gdir / "input_ids.json").write_text(json.dumps(ids[0].tolist()) + "\n")
    model.model.rope_deltas = None
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0]
    if logits_last_n is None:
        save(gdir / "logits.npy", logits.numpy(), files)
    else:
        save(gdir / f"logits_last{logits_last_n}.npy", logits[-logits_last_n:].numpy(), files)
    new = greedy(model, N_GREEDY_TEXT, tok.convert_tokens_to_ids("<|endoftext|>"), input_ids=ids,
                 attention_mask=torch.ones_like(ids))
    chk = teacher_check(model, ids, new)
    g = {"greedy_ids": new, "greedy_text": tok.decode(new, skip_special_tokens=False),
         "greedy_bytes_hex": byte_level_decode(tok, new).hex(), **chk,
         "argmax_last": int(logits[-1].argmax()), "first_greedy_equals_argmax_last": new[0] == int(logits[-1].argmax())}
    (gdir / "greedy.json").write_text(json.dumps(g, indent=1, ensure_ascii=False) + "\n")
    info = {"messages": messages, "n_tokens": int(ids.shape[1]), "files": files, "logits_stats": stats(logits.numpy()),
            **{k: g[k] for k in ("greedy_ids", "greedy_text")}, "margins_top1_top2": chk["margins_top1_top2"]}
    (gdir / "info.json").write_text(json.dumps(info, indent=1, ensure_ascii=False) + "\n")
    return info


def unpatchify_u8(pv: np.ndarray, grid_thw, patch: int, merge: int, temporal: int, tol: float = 0.0) -> np.ndarray | None:
    """pixel_values rows (merge-block order, each row C x T x P x P) -> the resized uint8 image [3, H, W],
    or None when |pixel - (u8 - 127.5) / 127.5| > tol for every uint8 (tol 0: bit-exact)."""
    t, gh, gw = (int(x) for x in grid_thw)
    assert t == 1
    x = pv.reshape(gh // merge, gw // merge, merge, merge, 3, temporal, patch, patch)
    assert np.array_equal(x[..., 0, :, :], x[..., temporal - 1, :, :]), "temporal copies differ"
    x = x[..., 0, :, :]                                    # [bh, bw, m, m, C, P, P]
    img = x.transpose(4, 0, 2, 5, 1, 3, 6).reshape(3, gh * patch, gw * patch)
    u = np.rint(img.astype(np.float64) * 127.5 + 127.5)
    if u.min() < 0 or u.max() > 255:
        return None
    u8 = u.astype(np.uint8)
    back = (u8.astype(np.float32) - np.float32(127.5)) / np.float32(127.5)
    if np.abs(back - img).max() > tol:
        return None
    return u8


def write_image_goldens(model, processor, alt_ip, image_path: Path, gdir: Path, level: str, save: Saver) -> dict:
    """level "all": everything incl. float pixel_values; "compact" (tiny, first image): resized uint8
    image instead of float pixels, plus per-stage vision outputs and per-layer decoder outputs;
    "minimal" (tiny, other images): ids, grid, positions, merger + DeepStack outputs, last logits."""
    import torch
    from PIL import Image
    from transformers import vision_utils

    gdir.mkdir(parents=True, exist_ok=True)
    files: dict = {}
    img = Image.open(image_path)
    img.load()
    info = {"level": level, "image": image_path.name, "mode": img.mode, "size_wh": list(img.size)}

    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    info["chat_prompt"] = prompt
    inputs = processor(text=[prompt], images=[img], return_tensors="pt")
    ids = inputs["input_ids"]
    pv = inputs["pixel_values"]
    thw = inputs["image_grid_thw"]
    mm = inputs["mm_token_type_ids"]
    cfgv = model.config.vision_config
    image_token_id = model.config.image_token_id
    n_img_tok = int((ids == image_token_id).sum())
    info.update(n_tokens=int(ids.shape[1]), n_image_tokens=n_img_tok, image_grid_thw=thw[0].tolist(),
                resized_hw=[int(thw[0, 1]) * cfgv.patch_size, int(thw[0, 2]) * cfgv.patch_size],
                n_patches=int(pv.shape[0]), pixel_row_len=int(pv.shape[1]))
    assert n_img_tok == int(thw[0].prod()) // cfgv.spatial_merge_size ** 2

    expanded = processor.tokenizer.decode(ids[0].tolist(), skip_special_tokens=False)
    (gdir / "prompt.txt").write_text(expanded)
    save(gdir / "input_ids.npy", ids[0].numpy(), files)
    (gdir / "input_ids.json").write_text(json.dumps(ids[0].tolist()) + "\n")
    save(gdir / "image_grid_thw.npy", thw.numpy(), files)
    save(gdir / "mm_token_type_ids.npy", mm[0].numpy(), files)

    # pixels: default processor vs the other backend
    pv_np = pv.numpy()
    alt = alt_ip(images=[img], return_tensors="pt")
    alt_np = alt["pixel_values"].numpy()
    assert alt["image_grid_thw"].tolist() == thw.tolist()
    u8 = unpatchify_u8(pv_np, thw[0].tolist(), cfgv.patch_size, cfgv.spatial_merge_size, cfgv.temporal_patch_size)
    # the PIL backend rescales and normalises in two steps, so its floats are only within 1e-6 of the form
    u8_alt = unpatchify_u8(alt_np, thw[0].tolist(), cfgv.patch_size, cfgv.spatial_merge_size,
                           cfgv.temporal_patch_size, tol=1e-6)
    info["pixels"] = {
        "formula": "pixel = (u8 - 127.5) / 127.5 in float32 (fused rescale 1/255 + normalize mean=std=0.5)"
        if u8 is not None else "not of the (u8 - 127.5) / 127.5 form",
        "sha256_f32": hashlib.sha256(pv_np.astype("<f4").tobytes()).hexdigest(),
        "sha256_u8_chw": hashlib.sha256(u8.tobytes()).hexdigest() if u8 is not None else None,
        "alt_vs_default_max_abs": float(np.abs(pv_np - alt_np).max()),
        "alt_vs_default_mean_abs": float(np.abs(pv_np - alt_np).mean()),
        "alt_u8_equal_fraction": float((u8 == u8_alt).mean()) if (u8 is not None and u8_alt is not None) else None,
        "alt_u8_max_abs_diff": int(np.abs(u8.astype(int) - u8_alt.astype(int)).max())
        if (u8 is not None and u8_alt is not None) else None,
        "stats": stats(pv_np),
    }
    if level == "all":
        save(gdir / "pixel_values.npy", pv_np, files)
        save(gdir / "pixel_values_alt.npy", alt_np, files)
    if level in ("all", "compact") and u8 is not None:
        save(gdir / "pixel_values_u8.npy", u8, files)

    # vision tower, with hooks for the per-stage outputs
    vis = model.model.visual
    cap: dict = {}
    hooks = [
        vis.patch_embed.register_forward_hook(lambda m, a, o: cap.__setitem__("patch_embed", o.detach().clone())),
        vis.blocks[0].register_forward_pre_hook(lambda m, a: cap.__setitem__("block0_in", a[0].detach().clone())),
        vis.blocks[0].register_forward_hook(lambda m, a, o: cap.__setitem__("block0_out", o.detach().clone())),
    ]
    model.model.rope_deltas = None
    with torch.no_grad():
        vo = model.model.get_image_features(pv, thw, return_dict=True)
        # the learned position embedding resampled to this grid (exactly the model's own computation)
        idx, w = vision_utils.get_vision_interpolation_indices_and_weights(
            thw, num_grid_per_side=vis.num_grid_per_side, mode=vis.interpolation_mode,
            align_corners=vis.interpolation_align_corners, spatial_merge_size=cfgv.spatial_merge_size)
        pos = (vis.pos_embed(idx) * w[:, :, None]).sum(1)
        vpos = vision_utils.get_vision_position_ids(thw, cfgv.spatial_merge_size)
    for h in hooks:
        h.remove()
    merged = vo.pooler_output[0]
    ds = [f[0] for f in vo.deepstack_features]
    info["vision"] = {"merger_out_stats": stats(merged.numpy()),
                      "deepstack_stats": [stats(d.numpy()) for d in ds],
                      "last_hidden_stats": stats(vo.last_hidden_state.numpy()),
                      "deepstack_visual_indexes": list(cfgv.deepstack_visual_indexes)}
    save(gdir / "merger_out.npy", merged.numpy(), files)
    for k, d in enumerate(ds):
        save(gdir / f"deepstack_{k}.npy", d.numpy(), files)
    if level in ("all", "compact"):
        save(gdir / "vision_patch_embed.npy", cap["patch_embed"].numpy(), files)
        save(gdir / "vision_pos_embed.npy", pos.numpy(), files)
        save(gdir / "vision_block0_in.npy", cap["block0_in"].numpy(), files)
        save(gdir / "vision_block0_out.npy", cap["block0_out"].numpy(), files)
        save(gdir / "vision_last_hidden.npy", vo.last_hidden_state.numpy(), files)
        save(gdir / "vision_rope_pos_hw.npy", vpos.numpy(), files)
        info["vision"]["block0_in_equals_patch_embed_plus_pos"] = bool(
            torch.equal(cap["block0_in"], cap["patch_embed"] + pos))

    # 3-D rope index
    with torch.no_grad():
        pos_ids, deltas = model.model.get_rope_index(ids, mm_token_type_ids=mm, image_grid_thw=thw,
                                                     attention_mask=inputs["attention_mask"])
    save(gdir / "position_ids.npy", pos_ids[:, 0, :].numpy(), files)
    info["rope_delta"] = int(deltas[0, 0])

    # full forward: last-position logits (+ per-layer decoder outputs for "compact")
    layer_out: list = []
    lm = model.model.language_model
    hooks = []
    n_ds = len(cfgv.deepstack_visual_indexes)
    keep_layers = list(range(min(len(lm.layers), n_ds + 1)))  # the DeepStack layers and the first one after
    if level in ("all", "compact"):
        hooks = [lm.layers[i].register_forward_hook(lambda m, a, o: layer_out.append(o.detach()[0].clone()))
                 for i in keep_layers]
    model.model.rope_deltas = None
    with torch.no_grad():
        out = model(**inputs)
    for h in hooks:
        h.remove()
    logits = out.logits[0]
    save(gdir / "logits_last.npy", logits[-1].numpy(), files)
    if layer_out:
        save(gdir / "decoder_layer_out.npy", torch.stack(layer_out).numpy(), files)
        info["decoder_layer_out_layers"] = keep_layers
        info["decoder_layer_out_note"] = (
            "decoder_layer_out[i] = output of text decoder layer i (i in decoder_layer_out_layers) BEFORE the "
            "DeepStack add; the residual stream entering layer i+1 is decoder_layer_out[i] + deepstack_i at the "
            "image-token rows for i < n_deepstack")
    if level == "all" and logits.numel() * 4 <= 64 * 2**20:
        save(gdir / "logits.npy", logits.numpy(), files)
    info["logits_last_stats"] = stats(logits[-1].numpy())
    info["argmax_last"] = int(logits[-1].argmax())

    extra = {"pixel_values": pv, "image_grid_thw": thw, "mm_token_type_ids": mm}
    new = greedy(model, N_GREEDY_IMAGE, processor.tokenizer.convert_tokens_to_ids("<|endoftext|>"),
                 input_ids=ids, attention_mask=inputs["attention_mask"], **extra)
    info["greedy_ids"] = new
    info["greedy_text"] = processor.tokenizer.decode(new, skip_special_tokens=False)
    info["greedy_bytes_hex"] = byte_level_decode(processor.tokenizer, new).hex()
    info.update(teacher_check(model, ids, new, **extra))
    info["files"] = files
    (gdir / "info.json").write_text(json.dumps(info, indent=1, ensure_ascii=False) + "\n")
    info["_u8_resized"] = u8  # for the llama.cpp check (not serialised)
    return info


# --trim: the subset of image goldens committed in tests/fixtures/qwen3vl/tiny (commit 5e6ea0c);
# text goldens are kept whole.
TRIM_KEEP_FIRST = {"deepstack_0.npy", "deepstack_1.npy", "deepstack_2.npy", "image_grid_thw.npy", "info.json",
                   "input_ids.json", "input_ids.npy", "logits_last.npy", "merger_out.npy", "position_ids.npy",
                   "prompt.txt", "vision_block0_in.npy", "vision_block0_out.npy"}
TRIM_KEEP_OTHER = {"image_grid_thw.npy", "info.json", "input_ids.json", "input_ids.npy", "logits_last.npy",
                   "merger_out.npy", "position_ids.npy", "prompt.txt"}


def trim_image_goldens(gdir: Path, keep: set) -> dict:
    info = json.loads((gdir / "info.json").read_text())
    for f in sorted(gdir.iterdir()):
        if f.name not in keep:
            f.unlink()
    info["files"] = {k: v for k, v in info["files"].items() if k in keep}
    info["trimmed"] = "--trim: other goldens of this image were written and removed (regenerate without --trim)"
    (gdir / "info.json").write_text(json.dumps(info, indent=1, ensure_ascii=False) + "\n")
    return info["files"]


def image_key(path: Path) -> str:
    ext = path.suffix.lower().lstrip(".")
    return path.stem if ext == "png" else f"{path.stem}_{ext}"


# ----------------------------------------------------------------------------------------
# llama.cpp agreement check
# ----------------------------------------------------------------------------------------
def run_llamacpp_checks(bin_dir: Path, out: Path, text_infos: list, image_infos: dict, images: list,
                        threads: int, mtmd: bool) -> dict:
    """llama-tokenize (prompt ids, special tokens parsed) and llama-simple (pure greedy, printf output;
    llama-completion's async logger sometimes drops the generated text) on text.gguf for each text prompt;
    llama-mtmd-cli -v on the text.gguf + mmproj.gguf pair for each image."""
    def short(cmd):
        import shlex
        return " ".join(Path(c).name if c.startswith(str(bin_dir)) else
                        shlex.quote(c.replace(str(out), "OUT").replace(str(REPO) + "/", "")) for c in cmd)

    res: dict = {"bin_dir": "LLAMA_BIN", "text": [], "mtmd": []}
    for i, ti in enumerate(text_infos):
        gdir = out / "golden" / f"text_{i}"
        want_ids = json.loads((gdir / "input_ids.json").read_text())
        g = json.loads((gdir / "greedy.json").read_text())
        prompt = (gdir / "prompt.txt").read_text()
        tcmd = [str(bin_dir / "llama-tokenize"), "-m", str(out / "text.gguf"), "-f", str(gdir / "prompt.txt"), "--ids",
                "--log-disable"]
        p = subprocess.run(tcmd, capture_output=True, timeout=600)
        lines = [ln for ln in p.stdout.decode().splitlines() if ln.startswith("[")]
        got_ids = json.loads(lines[-1]) if lines else None
        scmd = [str(bin_dir / "llama-simple"), "-m", str(out / "text.gguf"), "-n", str(N_GREEDY_TEXT), prompt]
        p = subprocess.run(scmd, capture_output=True, timeout=3600)
        want = bytes.fromhex(g["greedy_bytes_hex"])
        got = p.stdout
        pb = prompt.encode()
        echo_ok = got.startswith(pb)
        gen = got[len(pb):] if echo_ok else got
        if gen.endswith(b"\n"):
            gen = gen[:-1]
        n_common = 0
        while n_common < min(len(gen), len(want)) and gen[n_common] == want[n_common]:
            n_common += 1
        res["text"].append({
            "prompt": f"text_{i}", "tokenize_cmd": short(tcmd), "simple_cmd": short(scmd[:-1]) + " \"$(cat OUT/golden/text_%d/prompt.txt)\"" % i,
            "simple_rc": p.returncode, "prompt_ids_match": got_ids == want_ids, "llamacpp_prompt_ids": got_ids,
            "prompt_echo_ok": echo_ok, "greedy_bytes_equal": gen == want, "common_prefix_bytes": n_common,
            "llamacpp_out": gen.decode("utf-8", "replace"), "transformers_out": want.decode("utf-8", "replace"),
            "transformers_margins": g["margins_top1_top2"],
        })
        print(f"llama.cpp text_{i}: prompt ids match={got_ids == want_ids} greedy equal={gen == want}", flush=True)
    if mtmd and (bin_dir / "llama-mtmd-cli").exists():
        import tempfile

        from PIL import Image

        tmp = Path(tempfile.mkdtemp(prefix="qwen3vl_mtmd_"))
        for img in images:
            key = image_key(img)
            ii = image_infos.get(key, {})
            runs = [("original", img)]
            if ii.get("_u8_resized") is not None:
                # the image transformers' processor resized (uint8), so that llama.cpp's own resize is a no-op
                # and the greedy comparison tests the model, not the two resamplers
                pre = tmp / f"{key}_hf_resized.png"
                Image.fromarray(np.ascontiguousarray(ii["_u8_resized"].transpose(1, 2, 0))).save(pre)
                runs.append(("hf_resized", pre))
            for variant, path in runs:
                cmd = [str(bin_dir / "llama-mtmd-cli"), "-m", str(out / "text.gguf"), "--mmproj", str(out / "mmproj.gguf"),
                       "--image", str(path), "-p", QUESTION, "-n", str(N_GREEDY_IMAGE), "--temp", "0", "--top-k", "1",
                       "--ignore-eos", "-s", "0", "-t", str(threads), "-c", "8192", "--no-warmup", "-v"]
                # llama.cpp's async logger now and then drops the tail of the generated text at exit:
                # run up to 3 times and keep the longest stdout (the runs are otherwise deterministic)
                best = None
                for _ in range(3):
                    p = subprocess.run(cmd, capture_output=True, timeout=3600)
                    if best is None or len(p.stdout) > len(best.stdout):
                        best = p
                    if p.stdout.endswith(b"\n\n"):
                        break
                p = best
                err = p.stderr.decode("utf-8", "replace")

                def find(pat, conv=int):
                    m = re.search(pat, err)
                    return [conv(x) for x in m.groups()] if m else None
                want = bytes.fromhex(ii["greedy_bytes_hex"]) if ii else b""
                got = p.stdout.strip(b"\n")
                fp = re.search(r"formatted_chat.prompt: (.*?)\n\S+ D ", err, re.S)
                res["mtmd"].append({
                    "image": img.name, "variant": variant,
                    "cmd": short(cmd).replace(str(tmp) + "/", "TMP/"), "rc": p.returncode,
                    "stdout": p.stdout.decode("utf-8", "replace"),
                    "resized_wh": find(r"copying image \S+ to input buffer \(nx=(\d+), ny=(\d+)\)"),
                    "image_tokens_xy": (find(r"image_tokens->nx = (\d+)") or []) + (find(r"image_tokens->ny = (\d+)") or []),
                    "n_image_tokens": find(r"total (\d+) tokens"),
                    "output_embedding_shape": find(r"output embedding shape \[(\d+), (\d+)"),
                    "image_min_max_pixels": (find(r"image_min_pixels:\s+(\d+)") or []) + (find(r"image_max_pixels:\s+(\d+)") or []),
                    "formatted_prompt": fp.group(1) if fp else None,
                    "transformers_n_image_tokens": ii.get("n_image_tokens"), "transformers_n_tokens": ii.get("n_tokens"),
                    "transformers_resized_hw": ii.get("resized_hw"),
                    "transformers_greedy": want.decode("utf-8", "replace"),
                    "transformers_margins": ii.get("margins_top1_top2"),
                    "greedy_equal": bool(want) and got == want.strip(b"\n"),
                    "common_prefix_bytes": next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
                                                min(len(got), len(want))),
                })
                r = res["mtmd"][-1]
                print(f"llama-mtmd-cli {img.name} ({variant}): rc={p.returncode} tokens={r['n_image_tokens']} "
                      f"resized={r['resized_wh']} greedy equal={r['greedy_equal']}", flush=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def checks_only(args) -> None:
    out: Path = args.out
    text_infos = []
    i = 0
    while (out / "golden" / f"text_{i}" / "info.json").exists():
        text_infos.append(json.loads((out / "golden" / f"text_{i}" / "info.json").read_text()))
        i += 1
    image_infos = {}
    for img in args.images:
        key = image_key(img)
        ii = json.loads((out / "golden" / key / "info.json").read_text())
        u8 = out / "golden" / key / "pixel_values_u8.npy"
        ii["_u8_resized"] = np.load(u8) if u8.exists() else None
        image_infos[key] = ii
    chk = run_llamacpp_checks(args.llama_bin, out, text_infos, image_infos, args.images, args.threads,
                              mtmd=not args.no_mtmd)
    (out / "llamacpp_check.json").write_text(json.dumps(chk, indent=1, ensure_ascii=False) + "\n")
    mf = out / "manifest.json"
    manifest = json.loads(mf.read_text())
    manifest["llamacpp_check"] = llamacpp_summary(chk)
    mf.write_text(json.dumps(manifest, indent=1, default=str, ensure_ascii=False) + "\n")


def llamacpp_summary(chk: dict) -> dict:
    return {"file": "llamacpp_check.json",
            "text_prompt_ids_match": [t["prompt_ids_match"] for t in chk["text"]],
            "text_greedy_equal": [t["greedy_bytes_equal"] for t in chk["text"]],
            "mtmd": [{k: m[k] for k in ("image", "variant", "n_image_tokens", "resized_wh", "greedy_equal")}
                     for m in chk["mtmd"]]}


# ----------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=["2b", "tiny"], default="tiny")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--images", type=Path, nargs="*", default=[])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--hf-dir", type=Path, default=None, help="where to write the HF model (default OUT/hf)")
    ap.add_argument("--tiny-vocab", type=int, default=2500, help="base BPE tokens kept for --config tiny")
    ap.add_argument("--text-outtype", default=None, choices=["f32", "f16"], help="default f16 (2b), f32 (tiny)")
    ap.add_argument("--mmproj-outtype", default=None, choices=["f32", "f16"], help="default f16 (2b), f32 (tiny)")
    ap.add_argument("--npy-int", default="int32", choices=["int32", "int64"])
    ap.add_argument("--llama-cpp", type=Path, default=DEFAULT_LLAMA_CPP)
    ap.add_argument("--llama-bin", type=Path, default=DEFAULT_LLAMA_BIN)
    ap.add_argument("--vocab-gguf", type=Path, default=DEFAULT_VOCAB_GGUF)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-build", action="store_true", help="reuse the HF dir already in place")
    ap.add_argument("--skip-convert", action="store_true")
    ap.add_argument("--skip-text", action="store_true")
    ap.add_argument("--skip-llamacpp", action="store_true")
    ap.add_argument("--no-mtmd", action="store_true", help="skip the llama-mtmd-cli image runs")
    ap.add_argument("--trim", action="store_true",
                    help="after the checks, keep only the image goldens committed in tests/fixtures/qwen3vl/tiny")
    ap.add_argument("--checks-only", action="store_true",
                    help="only (re)run the llama.cpp checks on an existing OUT (goldens read back from OUT/golden)")
    args = ap.parse_args()
    if args.checks_only:
        checks_only(args)
        return

    import PIL
    import tokenizers
    import torch
    import transformers
    from transformers import AutoImageProcessor, AutoProcessor, Qwen3VLForConditionalGeneration

    torch.set_num_threads(args.threads)
    t_start = time.time()
    tiny = args.config == "tiny"
    text_outtype = args.text_outtype or ("f32" if tiny else "f16")
    mmproj_outtype = args.mmproj_outtype or ("f32" if tiny else "f16")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    hf_dir: Path = args.hf_dir or out / "hf"
    hf_dir.mkdir(parents=True, exist_ok=True)
    save = Saver(args.npy_int)
    chat_template = CHAT_TEMPLATE_FILE.read_text()

    vocab = load_qwen2_vocab(args.vocab_gguf, args.tiny_vocab if tiny else None)
    cfg_dict = tiny_config(vocab["n_base"]) if tiny else published_2b_config()
    raw_tok = build_tokenizer_object(vocab)
    ids_map = {c: vocab["n_base"] + i for i, (c, _) in enumerate(ADDED_TOKENS)}
    build_info = {}
    if not args.skip_build:
        build_info = build_and_save_model(cfg_dict, args.seed, hf_dir, "f16")
        write_tokenizer_files(raw_tok, vocab, hf_dir, chat_template)
        write_processor_files(hf_dir, chat_template, ids_map)
    tok_check = check_tokenizer(hf_dir, raw_tok, vocab, full=not tiny)
    print("tokenizer check:", {k: v for k, v in tok_check.items() if k != "samples"}, flush=True)

    # Reload from disk as a user would: the goldens come from the saved model and from whatever
    # processor classes transformers picks by default.
    model = Qwen3VLForConditionalGeneration.from_pretrained(hf_dir, dtype=torch.float32).eval()
    processor = AutoProcessor.from_pretrained(hf_dir)
    tok = processor.tokenizer
    ip_cls = type(processor.image_processor).__name__
    alt_backend = "pil" if "Pil" not in ip_cls else "torchvision"
    alt_ip = AutoImageProcessor.from_pretrained(hf_dir, backend=alt_backend)
    assert model.lm_head.weight.data_ptr() == model.model.language_model.embed_tokens.weight.data_ptr()
    for c, i in ids_map.items():
        assert tok.convert_tokens_to_ids(c) == i, c

    manifest = {
        "generator": "bench/reference/make_qwen3vl_reference.py",
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "images"},
        "images": [str(p) for p in args.images],
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                     "numpy": np.__version__, "pillow": PIL.__version__},
        "seed": args.seed,
        "weights": init_weights.__doc__.strip(),
        "hf_safetensors_dtype": "float16 (every weight f16-exact; loaded as float32)",
        "dtype": "float32", "device": "cpu",
        "attn_implementation": model.config._attn_implementation,
        "config_as_written": cfg_dict,
        "config": json.loads((hf_dir / "config.json").read_text()),
        "n_params": sum(p.numel() for p in model.parameters()),
        "tokenizer": {"source": rel(args.vocab_gguf), "source_sha256": vocab["gguf_sha256"],
                      "n_base_tokens": vocab["n_base"], "n_merges": len(vocab["merges"]),
                      "n_merges_in_source": vocab["n_merges_total"], "vocab_size": cfg_dict["text_config"]["vocab_size"],
                      "added_tokens": {c: {"id": ids_map[c], "special": s} for c, s in ADDED_TOKENS},
                      "pretokenizer_regex": QWEN2_PRETOKENIZE_REGEX, "check": tok_check,
                      "hf_class": type(tok).__name__},
        "processor": {"class": type(processor).__name__, "image_processor_default": ip_cls,
                      "image_processor_alt": type(alt_ip).__name__,
                      "video_processor": type(processor.video_processor).__name__,
                      "image_processor_config": json.loads(processor.image_processor.to_json_string()),
                      "preprocessor_config_json": PREPROCESSOR_CONFIG},
        "chat_template_sha256": hashlib.sha256(chat_template.encode()).hexdigest(),
    }

    if not args.skip_convert:
        name = f"qwen3vl-{args.config}-random-seed{args.seed}"
        force_pre = "qwen2" if tiny else ""
        t0 = time.time()
        run_converter(args.llama_cpp, hf_dir, out / "text.gguf", text_outtype, False, out / "convert_text.log", name,
                      force_pre)
        run_converter(args.llama_cpp, hf_dir, out / "mmproj.gguf", mmproj_outtype, True, out / "convert_mmproj.log",
                      name, "")
        print(f"converted in {time.time() - t0:.0f}s", flush=True)
        dump = {f: dump_gguf(out / f, max_array=32, hash_long_strings=True) for f in ("text.gguf", "mmproj.gguf")}
        (out / "gguf_dump.json").write_text(json.dumps(dump, indent=1, default=str, ensure_ascii=False) + "\n")
        pre = dump["text.gguf"]["keys"].get("tokenizer.ggml.pre")
        assert pre == "qwen2", f"tokenizer.ggml.pre = {pre!r}"
    if (out / "text.gguf").exists():
        manifest["gguf"] = {"text.gguf": {"outtype": text_outtype, "sha256": sha256_file(out / "text.gguf"),
                                          "bytes": (out / "text.gguf").stat().st_size},
                            "mmproj.gguf": {"outtype": mmproj_outtype, "sha256": sha256_file(out / "mmproj.gguf"),
                                            "bytes": (out / "mmproj.gguf").stat().st_size},
                            "dump": "gguf_dump.json", "tokenizer.ggml.pre_forced": "qwen2" if tiny else None,
                            "converter": rel(args.llama_cpp)}

    if hf_dir.resolve() != (out / "hf").resolve():
        meta = out / "hf_config"
        meta.mkdir(exist_ok=True)
        for f in sorted(hf_dir.iterdir()):
            if f.is_file() and not f.name.endswith(".safetensors") and f.stat().st_size <= 1_500_000:
                shutil.copy2(f, meta / f.name)
        manifest["hf_config"] = {"dir": "hf_config", "note": "the HF dir minus model.safetensors; the full dir was at " + rel(hf_dir),
                                 "model.safetensors_sha256": sha256_file(hf_dir / "model.safetensors")}

    manifest["goldens"] = {"text": [], "images": {}}
    text_infos = []
    if not args.skip_text:
        for i, msgs in enumerate(TEXT_PROMPTS):
            t0 = time.time()
            ti = write_text_goldens(model, processor, tok, out / "golden" / f"text_{i}", msgs, save,
                                    None if tiny else 8)
            text_infos.append(ti)
            manifest["goldens"]["text"].append({"dir": f"golden/text_{i}", **ti})
            print(f"text_{i}: {ti['n_tokens']} tokens, greedy {ti['greedy_text']!r} ({time.time() - t0:.0f}s)", flush=True)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str, ensure_ascii=False) + "\n")

    image_infos = {}
    for i, img in enumerate(args.images):
        level = "all" if not tiny else ("compact" if i == 0 else "minimal")
        t0 = time.time()
        key = image_key(img)
        info = write_image_goldens(model, processor, alt_ip, img, out / "golden" / key, level, save)
        image_infos[key] = info
        manifest["goldens"]["images"][key] = {k: info[k] for k in (
            "level", "image", "mode", "size_wh", "resized_hw", "image_grid_thw", "n_patches", "n_tokens", "n_image_tokens",
            "rope_delta", "argmax_last", "greedy_ids", "greedy_text", "margins_top1_top2", "files", "pixels")}
        print(f"{key}: grid {info['image_grid_thw']}, {info['n_image_tokens']} image tokens / {info['n_tokens']} "
              f"tokens, greedy {info['greedy_text']!r} ({time.time() - t0:.0f}s)", flush=True)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str, ensure_ascii=False) + "\n")

    if not args.skip_llamacpp and (out / "text.gguf").exists() and text_infos:
        chk = run_llamacpp_checks(args.llama_bin, out, text_infos, image_infos, args.images, args.threads,
                                  mtmd=not args.no_mtmd)
        (out / "llamacpp_check.json").write_text(json.dumps(chk, indent=1, ensure_ascii=False) + "\n")
        manifest["llamacpp_check"] = llamacpp_summary(chk)
    if args.trim:
        for i, img in enumerate(args.images):
            key = image_key(img)
            manifest["goldens"]["images"][key]["files"] = trim_image_goldens(
                out / "golden" / key, TRIM_KEEP_FIRST if i == 0 else TRIM_KEEP_OTHER)
    manifest["wall_seconds"] = round(time.time() - t_start)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str, ensure_ascii=False) + "\n")
    print(f"wrote {out} in {time.time() - t_start:.0f}s")


if __name__ == "__main__":
    main()
