#!/usr/bin/env python3
"""Generate tests/fixtures/tokenizer_corpus.json from the peer llama.cpp build.

Each case is {"text": str, "parse_special": bool, "ids": [int, ...]} where ids
come from llama.cpp's tokenizer for the model with add_special=false.

The ids are produced by the stock `llama-tokenize` tool reading the text
verbatim from a file (-f, which this version does not trim), with --ids
--no-bos --no-escape, plus --no-parse-special when parse_special is false
(llama-tokenize parses special tokens by default and has no --parse-special). Each case is
cross-checked against our own bench/peers llamacpp_logits --tokenize-only
(direct llama_tokenize call) and, when gguf-py + numpy are importable, against
a byte-level decode of the ids that must reproduce the input text.

Usage: gen_tokenizer_fixture.py [--model M] [--bin DIR] [--out FILE]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# (text, parse_special)
CASES = [
    # plain English
    ("Hello world", False),
    ("The quick brown fox jumps over the lazy dog.", False),
    (" Hello", False),
    ("Hello, World! How are you doing today?", False),
    ("antidisestablishmentarianism supercalifragilisticexpialidocious", False),
    # Unicode
    ("Café naïve résumé façade déjà vu", False),
    ("ÜNÏCÖDÉ ÀÉÎÕÜ Straße", False),
    ("你好，世界！今天天气很好。", False),
    ("こんにちは、世界。カタカナとひらがな", False),
    ("안녕하세요 세계", False),
    ("I love pizza 🍕🍕 and 👍🏽 👨‍👩‍👧‍👦 🇺🇸🇯🇵", False),
    ("Привет, мир! Как дела?", False),
    ("مرحبا بالعالم، كيف حالك؟", False),
    ("e\u0301 a\u0308 n\u0303o Z\u0351\u0308a\u0336l\u0327go", False),
    ("नमस्ते दुनिया और สวัสดีครับ", False),
    ("Ελληνικά: αβγ ΔΕΖ", False),
    ("𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∑∫√∞ ≠ ≤ ½ ①②", False),
    ("a\u200bb\u200dc\ufeffd", False),
    ("non\u00a0breaking\u2009thin\u3000ideographic", False),
    # source code
    (
        "#include <vector>\n\nint main() {\n    std::vector<int> v{1, 2, 3};\n"
        "    for (auto& x : v) x *= 2;  // double\n    return v.size() > 2 ? 0 : 1;\n}\n",
        False,
    ),
    (
        "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n\n"
        "class Foo:\n\tdef __init__(self):\n\t\tself.x = [i**2 for i in range(10)]\n",
        False,
    ),
    ('{"key": "value", "list": [1, 2.5, null], "nested": {"a": true}}', False),
    ("https://example.com/path/to?query=1&x=y#frag user@example.com", False),
    # whitespace
    ("a  b   c    d     e", False),
    ("\tindented\twith\ttabs\t\t", False),
    ("line1\nline2\r\nline3\rline4", False),
    ("trailing spaces   ", False),
    ("   leading spaces", False),
    ("\n\n\n", False),
    (" \t \n", False),
    ("  \n  \n    x", False),
    ("word\n\n\nword  \n", False),
    # digits
    ("1234567890", False),
    ("3.14159 2.718 -0.5 1e-10 100%", False),
    ("2024-01-15 12:30:45, 15/01/2024, Jan 1st 1999", False),
    ("Phone: +1 (555) 123-4567, $1,000,000.00 and ٣٤٥ ４５６", False),
    # contractions
    ("don't can't won't it's I'm you're they've we'll he'd", False),
    ("I'VE DON'T IT'S WE'LL THEY'RE", False),
    ("'s 't 're 've 'm 'll 'd 'x", False),
    # punctuation runs
    ("...!!!???---***", False),
    ("Hello!!! What?! (really) [yes] {no} <tag> #hash @user ~/path ;-) :)", False),
    # special-token text
    ("<|im_start|>user\nhi<|im_end|>", True),
    ("<|im_start|>user\nhi<|im_end|>", False),
    ("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n", True),
    ("say <|im_end|> now", True),
    ("x<|im_start|>y<|endoftext|>", True),
    ("<|endoftext|>", True),
    ("<|endoftext|>", False),
    ("Plain text with parse_special on.", True),
    # edge cases
    ("", False),
    (" ", False),
    ("naïve café 123 日本 🚀 don't\n", False),
]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stderr.decode(errors="replace"))
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}")
    return r.stdout.decode()


def parse_ids(stdout):
    lines = [l for l in stdout.splitlines() if l.startswith("[")]
    if len(lines) != 1:
        raise SystemExit(f"unexpected tokenizer output: {stdout!r}")
    return json.loads(lines[0])


def make_decoder(model):
    """Byte-level BPE decoder from the GGUF vocab, or None if gguf-py is unavailable."""
    sys.path.insert(0, os.path.join(ROOT, ".peers", "llama_cpp_python-0.3.36", "vendor", "llama.cpp", "gguf-py"))
    try:
        import gguf  # noqa: F401
    except Exception as e:  # pragma: no cover
        print(f"[gen_tokenizer_fixture] gguf-py unavailable ({e}); skipping decode check", file=sys.stderr)
        return None
    r = gguf.GGUFReader(model)
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    ttype = r.fields["tokenizer.ggml.token_type"].contents()
    sys.path.insert(0, os.path.join(ROOT, "bench", "reference"))
    from ref_common import bytes_to_unicode
    u2b = {c: b for b, c in bytes_to_unicode().items()}  # GPT-2 bytes_to_unicode inverse

    def decode(ids):
        out = bytearray()
        for i in ids:
            if ttype[i] == 3:  # CONTROL: rendered as its text
                out += toks[i].encode()
            else:
                out += bytes(u2b[ch] for ch in toks[i])
        return out.decode("utf-8")

    return decode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=os.path.join(ROOT, ".peers", "llama.cpp-build", "bin"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "tokenizer_corpus.json"))
    args = ap.parse_args()

    tok_bin = os.path.join(args.bin, "llama-tokenize")
    our_bin = os.path.join(args.bin, "llamacpp_logits")
    decode = make_decoder(args.model)

    out = []
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "case.txt")
        for text, ps in CASES:
            with open(path, "wb") as f:
                f.write(text.encode("utf-8"))
            ids = parse_ids(run([
                tok_bin, "-m", args.model, "-f", path, "--ids", "--no-bos", "--no-escape",
                "--log-disable",
            ] + ([] if ps else ["--no-parse-special"])))  # parse_special defaults to true in llama-tokenize
            ids2 = parse_ids(run([our_bin, "-m", args.model, "-f", path, "--tokenize-only"]
                                 + (["--parse-special"] if ps else [])))
            if ids != ids2:
                raise SystemExit(f"llama-tokenize vs llama_tokenize mismatch for {text!r}: {ids} vs {ids2}")
            if decode is not None and decode(ids) != text:
                raise SystemExit(f"decode mismatch for {text!r}: {decode(ids)!r}")
            out.append({"text": text, "parse_special": ps, "ids": ids})

    with open(args.out, "w", encoding="utf-8") as f:
        f.write("[\n")
        for i, c in enumerate(out):
            f.write("  " + json.dumps(c, ensure_ascii=False) + ("," if i + 1 < len(out) else "") + "\n")
        f.write("]\n")
    print(f"[gen_tokenizer_fixture] wrote {len(out)} cases to {args.out}")


if __name__ == "__main__":
    main()
