#!/usr/bin/env bash
# `tessera quantize` on the 2B Qwen3-VL text shape at the sizes of llama-quantize's Q4_K_M and
# Q5_K_M, each mix and each recipe then measured by `tessera eval` against the f16 file (first
# 2 chunks of 512 of GPL-3, as docs/eval.md's tables), and the Q4_K_M pair by llama-perplexity.
#   bash bench/eval/mix_2b.sh [RESULTS_DIR] [MIX_DIR]
# Sensitivities: one chunk of 128 tokens, a group per kind of matrix and half of the layers
# (--layer-bands 2: 15 groups, 60 variants), measured by the first run and reused by the second.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/bench/results/mix_2026-12-04_zen4}"; mixdir="${2:-/tmp}"
peer="$root/.peers/qwen3vl-2b"; ref="$peer/text.gguf"
bin="${LLAMA_BIN:-$root/.peers/llama.cpp-build/bin}"
text=/usr/share/common-licenses/GPL-3
sens="$out/qwen2b_sensitivity_c128_bands2.json"
mkdir -p "$out"
for recipe in Q4_K_M Q5_K_M; do
  lc="$peer/text-$recipe.gguf"
  [ -f "$lc" ] || LD_LIBRARY_PATH="$bin" "$bin/llama-quantize" "$ref" "$lc" "$recipe" 2
  mix="$mixdir/qwen2b-mix-$recipe-size.gguf"
  reuse=(--save-sensitivity "$sens"); [ -f "$sens" ] && reuse=(--sensitivity "$sens")
  r=$(echo "$recipe" | tr 'A-Z' 'a-z' | tr -d _)
  # a mix already in MIX_DIR is kept (delete it to search again)
  [ -f "$mix" ] || "$root/build/tessera" quantize -m "$ref" -o "$mix" -c 128 --layer-bands 2 --max-size "$(stat -c %s "$lc")" \
    "${reuse[@]}" -t 2 >"$out/qwen2b_quantize_${r}_size.log" 2>&1
  for m in "$lc" "$mix"; do
    "$root/build/tessera" eval -m "$m" --reference "$ref" -f "$text" --chunks 2 -t 2 --json "$out/eval_$(basename "$m" .gguf).json" 2>/dev/null
  done
done
# llama.cpp's own measure of the Q4_K_M pair (bench/eval/llama_kld.sh's method, base computed once)
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
LD_LIBRARY_PATH="$bin" "$bin/llama-perplexity" -m "$ref" -f "$text" -c 512 -t 2 --chunks 2 --kl-divergence-base "$tmp/base.kld" >"$tmp/base.log" 2>&1
for m in "$peer/text-Q4_K_M.gguf" "$mixdir/qwen2b-mix-Q4_K_M-size.gguf"; do
  echo "== llama-perplexity --kl-divergence $(basename "$m")"
  LD_LIBRARY_PATH="$bin" "$bin/llama-perplexity" -m "$m" -c 512 -t 2 --chunks 2 --kl-divergence-base "$tmp/base.kld" --kl-divergence 2>&1 |
    grep -E "Mean    KLD|Median  KLD|99.0%   KLD|Same top p"
done | tee "$out/llama_perplexity_q4km.txt"
