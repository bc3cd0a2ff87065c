#!/usr/bin/env bash
# llama.cpp's own K-quant mixtures of the default model, for checking tessera on the files users
# download (Q4_K_M, Q5_K_M, Q6_K: Q5_0/Q5_1/Q8_0 where a row is not a multiple of 256, Q4_K/
# Q5_K/Q6_K elsewhere; Q3_K_S: Q3_K in ffn_down, Q4_0 elsewhere, as llama-quantize's Q2_K mix of
# this model too; IQ4_NL; IQ4_XS: IQ4_XS in 27 ffn_down, IQ4_NL elsewhere; Q2_K_ffn_down: Q4_0 with
# Q2_K forced into ffn_down by --tensor-type, the only way to get Q2_K blocks on this 576-wide
# model), and the golden fixtures made from them:
#   models/kquants/SmolLM2-135M-Instruct.<MIX>.gguf       (git-ignored; llama-quantize --allow-requantize
#                                                          from the Q4_1 file, the only weights we have)
#   tests/fixtures/kquants/<TYPE>.{bytes,values}.npy      real blocks and gguf-py's dequantization
#   tests/fixtures/teacher_forced_llamacpp_<mix>.json     llama.cpp's logits on english_text.txt
#   tests/fixtures/teacher_forced_llamacpp_q4_k_m_f32weights.json
#                                                         ... on the exact f32 conversion of the Q4_K_M
#                                                         file (needs build/tessera): no 8-bit activations
#   tests/fixtures/teacher_forced_llamacpp_{q3_k_s,iq4_nl,iq4_xs,q2_k_ffn_down}_f32weights.json
#                                                         ... on llama-quantize's own F32 conversion of
#                                                         those files (ggml's dequantization)
# Builds the peer (build_llamacpp.sh; NO_AMX=1 as for the benchmarks) and a small numpy venv
# (.peers/npvenv) for gguf-py. Env: MODEL, THREADS (default 2), FIXTURES=0 to only make the files,
# LLAMA_BIN=<folder with llama-quantize and llamacpp_logits> to use a peer already built (on a CPU
# without AMX the NO_AMX build is the same code).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
MODEL=${MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${THREADS:-2}
LLAMA_COMMIT=0c1e57098   # keep in sync with build_llamacpp.sh
[[ -f "$MODEL" ]] || { echo "model not found: $MODEL (bash scripts/setup.sh fetches it)" >&2; exit 1; }

if [[ -n "${LLAMA_BIN:-}" ]]; then
  BIN="$LLAMA_BIN"
else
  NO_AMX=1 bash bench/peers/build_llamacpp.sh >/dev/null
  BIN="$ROOT/.peers/llama.cpp-build-noamx/bin"
fi
OUT="$ROOT/models/kquants"
mkdir -p "$OUT"
for mix in Q4_K_M Q5_K_M Q6_K Q3_K_S IQ4_NL IQ4_XS; do
  f="$OUT/SmolLM2-135M-Instruct.$mix.gguf"
  if [[ ! -f "$f" ]]; then
    "$BIN/llama-quantize" --allow-requantize "$MODEL" "$f.tmp" "$mix" "$THREADS" >/dev/null 2>&1
    mv "$f.tmp" "$f"
  fi
  echo "[make_kquants] $f"
done
f="$OUT/SmolLM2-135M-Instruct.Q2_K_ffn_down.gguf"
if [[ ! -f "$f" ]]; then
  "$BIN/llama-quantize" --allow-requantize --tensor-type ffn_down=q2_k "$MODEL" "$f.tmp" Q4_0 "$THREADS" >/dev/null 2>&1
  mv "$f.tmp" "$f"
fi
echo "[make_kquants] $f"
[[ "${FIXTURES:-1}" == 0 ]] && exit 0

if [[ ! -x .peers/npvenv/bin/python ]]; then
  python3 -m venv .peers/npvenv
  .peers/npvenv/bin/pip install -q numpy==2.2.6 pyyaml==6.0.2
fi
PYTHONPATH="$ROOT/.peers/llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py" \
  .peers/npvenv/bin/python bench/peers/gen_kquant_fixture.py --models "$OUT" --out tests/fixtures/kquants

for mix in Q4_K_M Q5_K_M Q3_K_S IQ4_NL IQ4_XS Q2_K_ffn_down; do
  f="$OUT/SmolLM2-135M-Instruct.$mix.gguf"
  lower=$(echo "$mix" | tr 'A-Z' 'a-z')
  "$BIN/llamacpp_logits" -m "$f" -f tests/fixtures/english_text.txt -o "tests/fixtures/teacher_forced_llamacpp_$lower.json" \
    -t "$THREADS" --model-sha256 "$(basename "$f"):sha256=$(sha256sum "$f" | cut -d' ' -f1)" --llama-commit "$LLAMA_COMMIT"
  echo "[make_kquants] tests/fixtures/teacher_forced_llamacpp_$lower.json"
done
[[ -x build/tessera ]] || { echo "build tessera first (bash scripts/setup.sh)" >&2; exit 1; }
F32="$ROOT/.peers/SmolLM2-135M-Instruct.Q4_K_M.F32.gguf"
build/tessera convert -m "$OUT/SmolLM2-135M-Instruct.Q4_K_M.gguf" -o "$F32" --type f32
"$BIN/llamacpp_logits" -m "$F32" -f tests/fixtures/english_text.txt -o tests/fixtures/teacher_forced_llamacpp_q4_k_m_f32weights.json \
  -t "$THREADS" --model-sha256 "$(basename "$F32"):sha256=$(sha256sum "$F32" | cut -d' ' -f1)" --llama-commit "$LLAMA_COMMIT"
echo "[make_kquants] tests/fixtures/teacher_forced_llamacpp_q4_k_m_f32weights.json"
for mix in Q3_K_S IQ4_NL IQ4_XS Q2_K_ffn_down; do
  lower=$(echo "$mix" | tr 'A-Z' 'a-z')
  F32="$ROOT/.peers/SmolLM2-135M-Instruct.$mix.F32.gguf"
  "$BIN/llama-quantize" --allow-requantize "$OUT/SmolLM2-135M-Instruct.$mix.gguf" "$F32" F32 "$THREADS" >/dev/null 2>&1
  "$BIN/llamacpp_logits" -m "$F32" -f tests/fixtures/english_text.txt -o "tests/fixtures/teacher_forced_llamacpp_${lower}_f32weights.json" \
    -t "$THREADS" --model-sha256 "$(basename "$F32"):sha256=$(sha256sum "$F32" | cut -d' ' -f1)" --llama-commit "$LLAMA_COMMIT"
  echo "[make_kquants] tests/fixtures/teacher_forced_llamacpp_${lower}_f32weights.json"
done
