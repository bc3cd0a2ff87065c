#!/usr/bin/env bash
# `tessera quantize` on SmolLM2-135M (real weights; the Q4_1 file is the reference, the only one
# obtainable) at the sizes of llama-quantize's IQ4_NL and Q3_K_S files of it (the ones smaller
# than the reference: bench/peers/make_kquants.sh makes them), each mix and each llama.cpp file
# then measured against the reference by both llama-perplexity --kl-divergence and `tessera eval`
# (bench/eval/llama_kld.sh), first CHUNKS chunks of 512 of GPL-3.
#   bash bench/eval/mix_smollm2.sh [RESULTS_DIR] [MIX_DIR] [CHUNKS]
# Sensitivities: the first chunk of 512, a group per kind of matrix over 3 bands of layers
# (--layer-bands 3), f16 KV cache as llama-perplexity runs; measured by the first mix, reused by
# the second.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/bench/results/mix_smollm2}"; mixdir="${2:-/tmp}"; chunks="${3:-4}"
ref="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
text=/usr/share/common-licenses/GPL-3
sens="$out/smollm2_sensitivity_c512_bands3_f16kv.json"
mkdir -p "$out"
for recipe in IQ4_NL Q3_K_S; do
  lc="$root/models/kquants/SmolLM2-135M-Instruct.$recipe.gguf"
  [ -f "$lc" ] || { echo "no $lc (bash bench/peers/make_kquants.sh)" >&2; exit 1; }
  mix="$mixdir/smollm2-mix-$recipe-size.gguf"
  reuse=(--save-sensitivity "$sens"); [ -f "$sens" ] && reuse=(--sensitivity "$sens")
  # a mix already in MIX_DIR is kept (delete it to search again)
  [ -f "$mix" ] || "$root/build/tessera" quantize -m "$ref" -o "$mix" --layer-bands 3 --types q4_0,q4_k,q5_k,q6_k,q8_0 \
    --max-size "$(stat -c %s "$lc")" "${reuse[@]}" -t 2 >"$out/quantize_${recipe}_size.log" 2>&1
  for m in "$lc" "$mix"; do
    echo "##### $(basename "$m") ($(stat -c %s "$m") bytes) against $(basename "$ref")"
    bash "$root/bench/eval/llama_kld.sh" "$m" "$ref" "$text" "$chunks" 2
  done
done | tee "$out/kld_at_llamacpp_sizes.txt"
