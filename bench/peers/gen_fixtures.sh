#!/usr/bin/env bash
# Regenerate the llama.cpp golden fixtures from scratch:
#   tests/fixtures/tokenizer_corpus.json       (bench/peers/gen_tokenizer_fixture.py)
#   tests/fixtures/teacher_forced_llamacpp.json (llamacpp_logits on tests/fixtures/english_text.txt)
#   tests/fixtures/teacher_forced_llamacpp_gemma3_270m.json (when models/gemma-3-270m-q4_k_m.gguf is there)
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

logits() {  # model, output, extra flags...
  local model="$1" out="$2"; shift 2
  "$BIN/llamacpp_logits" -m "$model" -f tests/fixtures/english_text.txt -o "$out" -t "$THREADS" \
      --model-sha256 "$(basename "$model"):sha256=$(sha256sum "$model" | cut -d' ' -f1)" \
      --llama-commit "$LLAMA_COMMIT" "$@"
}
# 1. llama.cpp's defaults (f16 KV cache, flash attention auto) on the Q4_1 file
logits "$MODEL" tests/fixtures/teacher_forced_llamacpp.json
# 2. f32 KV cache, flash attention off: only llama.cpp's 8-bit activations remain
logits "$MODEL" tests/fixtures/teacher_forced_llamacpp_kvf32_nofa.json --kv-f32 --fa off
# 3. defaults on the exact f32 conversion of the same weights (needs tessera built)
[[ -x build/tessera ]] || { echo "build tessera first (bash scripts/setup.sh)" >&2; exit 1; }
F32="$ROOT/.peers/$(basename "${MODEL%.gguf}").F32.gguf"
build/tessera convert -m "$MODEL" -o "$F32" --type f32
logits "$F32" tests/fixtures/teacher_forced_llamacpp_f32weights.json

# 4. Gemma 3 270M (bash scripts/fetch_gemma3.sh), when present: BOS + 500 tokens, within its
#    512-token sliding window (tests/test_gemma3.cpp)
GEMMA="$ROOT/models/gemma-3-270m-q4_k_m.gguf"
if [[ -f "$GEMMA" ]]; then
  "$BIN/llamacpp_logits" -m "$GEMMA" -f tests/fixtures/english_text_2390.txt \
      -o tests/fixtures/teacher_forced_llamacpp_gemma3_270m.json -t "$THREADS" --add-special \
      --model-sha256 "$(basename "$GEMMA"):sha256=$(sha256sum "$GEMMA" | cut -d' ' -f1)" --llama-commit "$LLAMA_COMMIT"
fi

python3 - <<'PY'
import json, os
for name in ["teacher_forced_llamacpp", "teacher_forced_llamacpp_kvf32_nofa", "teacher_forced_llamacpp_f32weights"]:
    path = f"tests/fixtures/{name}.json"
    d = json.load(open(path))
    n = len(d["tokens"])
    assert n >= 600, n
    assert len(d["positions"]) == n == len(d["logsumexp"])
    size = os.path.getsize(path)
    assert size < 1_000_000, size
    print(f"[gen_fixtures] {name}.json: {n} tokens, {size} bytes")
PY
