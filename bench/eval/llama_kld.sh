#!/usr/bin/env bash
# `tessera eval` side by side with llama-perplexity --kl-divergence on the same files: a model
# against its reference over a text, chunks of 512. Prints both programs' figures.
#   bash bench/eval/llama_kld.sh MODEL.gguf REFERENCE.gguf [TEXT] [CHUNKS] [threads]
# Default text: /usr/share/common-licenses/GPL-3 (Debian's base-files). The fixture
# tests/fixtures/eval/llama_kld_gpl3_q4_0_vs_q4_1.json came from
#   build/tessera convert -m models/SmolLM2-135M-Instruct.Q4_1.gguf -o .peers/eval/smollm2-tessera.Q4_0.gguf --type q4_0
#   bash bench/eval/llama_kld.sh .peers/eval/smollm2-tessera.Q4_0.gguf models/SmolLM2-135M-Instruct.Q4_1.gguf   (and CHUNKS=2)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
model="$1"; ref="$2"; text="${3:-/usr/share/common-licenses/GPL-3}"; chunks="${4:-}"; threads="${5:-2}"
bin="${LLAMA_BIN:-$root/.peers/llama.cpp-build/bin}"
[ -x "$bin/llama-perplexity" ] || { echo "no $bin/llama-perplexity (bash bench/peers/build_llamacpp.sh)" >&2; exit 1; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
lc=(); tc=(); [ -n "$chunks" ] && lc=(--chunks "$chunks") && tc=(--chunks "$chunks")
"$bin/llama-perplexity" -m "$ref" -f "$text" -c 512 -t "$threads" "${lc[@]}" --kl-divergence-base "$tmp/base.kld" >"$tmp/base.log" 2>&1
"$bin/llama-perplexity" -m "$model" -c 512 -t "$threads" "${lc[@]}" --kl-divergence-base "$tmp/base.kld" --kl-divergence >"$tmp/kld.log" 2>&1
echo "== llama-perplexity"
grep -E "Mean PPL\(Q\)|Mean PPL\(base\)|Mean    KLD|Median  KLD|99.0%   KLD|Maximum KLD|Same top p" "$tmp/kld.log"
for flags in "--f32-activations" ""; do
  echo "== tessera eval ${flags:-(default: 8-bit activations)}"
  # shellcheck disable=SC2086
  "$root/build/tessera" eval -m "$model" --reference "$ref" -f "$text" -t "$threads" "${tc[@]}" $flags 2>/dev/null
done
