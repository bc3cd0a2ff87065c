#!/usr/bin/env bash
# Regenerate the llama.cpp golden fixtures from scratch:
#   tests/fixtures/tokenizer_corpus.json       (bench/peers/gen_tokenizer_fixture.py)
#   tests/fixtures/teacher_forced_llamacpp.json (llamacpp_logits on tests/fixtures/english_text.txt)
# Builds the peer llama.cpp first (bench/peers/build_llamacpp.sh, idempotent).
# Env: MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf), THREADS (default 2).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
MODEL=${MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}
BIN="$ROOT/.peers/llama.cpp-build/bin"
LLAMA_COMMIT=0c1e57098   # keep in sync with build_llamacpp.sh

[[ -f "$MODEL" ]] || { echo "model not found: $MODEL" >&2; exit 1; }

bench/peers/build_llamacpp.sh

python3 bench/peers/gen_tokenizer_fixture.py --model "$MODEL" --bin "$BIN" \
    --out tests/fixtures/tokenizer_corpus.json

MODEL_SHA=$(sha256sum "$MODEL" | cut -d' ' -f1)
"$BIN/llamacpp_logits" -m "$MODEL" -f tests/fixtures/english_text.txt \
    -o tests/fixtures/teacher_forced_llamacpp.json -t "$THREADS" \
    --model-sha256 "$(basename "$MODEL"):sha256=$MODEL_SHA" --llama-commit "$LLAMA_COMMIT"

python3 - <<'PY'
import json, os
d = json.load(open("tests/fixtures/teacher_forced_llamacpp.json"))
n = len(d["tokens"])
assert n >= 600, n
assert len(d["positions"]) == n == len(d["logsumexp"])
size = os.path.getsize("tests/fixtures/teacher_forced_llamacpp.json")
assert size < 1_000_000, size
print(f"[gen_fixtures] teacher_forced_llamacpp.json: {n} tokens, {size} bytes")
PY
