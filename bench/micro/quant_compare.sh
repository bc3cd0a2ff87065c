#!/usr/bin/env bash
# Quantized matmul side by side: tessera (fp32 activations on decode panels, as the Session repacks
# its quantized types on AVX-512; and --q8 8-bit activations) and
# llama.cpp's CPU backend on SmolLM2-135M's shapes, 1 and 2 threads, one after the other per
# thread count so all three see the same machine conditions; then the joined table.
#   [ROUNDS=n] bash bench/micro/quant_compare.sh [OUTDIR]     (default out/quant, 1 round)
# With ROUNDS=n every case runs n times, both engines in each round; the table gives median rates
# and the median (min..max) of the per-round ratios.
# KQUANT=1: the 5- and 6-bit types of llama.cpp's K-quant mixtures instead (on decode panels, as
# the Session runs them with fp32 activations; and --q8).
# Needs build-bench (bench/micro/run.sh or: cmake -B build-bench -DTESSERA_BUILD_BENCH=ON) and
# the llama.cpp build (bench/peers/build_llamacpp.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${1:-out/quant}"
mkdir -p "$out"
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_BENCH=ON -DTESSERA_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench --target bench_quant -j"$(nproc)" 2>&1 | grep -E "error" || true
bin=build-bench/bench/micro/bench_quant
: >"$out/tessera.jsonl"; : >"$out/tessera_q8.jsonl"; : >"$out/llamacpp.jsonl"
if [[ "${KQUANT:-0}" == 1 ]]; then
  for ((r = 0; r < ${ROUNDS:-1}; r++)); do
    for t in 1 2; do
      for ty in Q5_0 Q5_1 Q5_K Q6_K; do "$bin" -t "$t" --panels --type "$ty" >>"$out/tessera.jsonl"; done
      for ty in Q5_0 Q5_1 Q5_K Q6_K; do "$bin" -t "$t" --q8 --type "$ty" >>"$out/tessera_q8.jsonl"; done
      THREADS="$t" EXTRA_ARGS="--types q5_0,q5_1,q5_K,q6_K" bash bench/peers/llamacpp_matmul.sh "$out/llamacpp_t$t.jsonl" >/dev/null 2>&1
      cat "$out/llamacpp_t$t.jsonl" >>"$out/llamacpp.jsonl"
    done
  done
  python3 bench/micro/quant_table.py "$out/tessera.jsonl" "$out/llamacpp.jsonl" "$out/tessera_q8.jsonl" | tee "$out/table.md"
  exit 0
fi
for ((r = 0; r < ${ROUNDS:-1}; r++)); do
  for t in 1 2; do
    "$bin" -t "$t" --panels >>"$out/tessera.jsonl"
    "$bin" -t "$t" --q8 >>"$out/tessera_q8.jsonl"
    THREADS="$t" bash bench/peers/llamacpp_matmul.sh "$out/llamacpp_t$t.jsonl" >/dev/null 2>&1
    cat "$out/llamacpp_t$t.jsonl" >>"$out/llamacpp.jsonl"
  done
done
python3 bench/micro/quant_table.py "$out/tessera.jsonl" "$out/llamacpp.jsonl" "$out/tessera_q8.jsonl" | tee "$out/table.md"
