#!/usr/bin/env bash
# Quantized matmul side by side: tessera (fp32 activations, and --q8 8-bit activations) and
# llama.cpp's CPU backend on SmolLM2-135M's shapes, 1 and 2 threads, one after the other per
# thread count so all three see the same machine conditions; then the joined table.
#   bash bench/micro/quant_compare.sh [OUTDIR]     (default out/quant)
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
for t in 1 2; do
  "$bin" -t "$t" >>"$out/tessera.jsonl"
  "$bin" -t "$t" --q8 >>"$out/tessera_q8.jsonl"
  THREADS="$t" bash bench/peers/llamacpp_matmul.sh "$out/llamacpp_t$t.jsonl" >/dev/null
  cat "$out/llamacpp_t$t.jsonl" >>"$out/llamacpp.jsonl"
done
python3 bench/micro/quant_table.py "$out/tessera.jsonl" "$out/llamacpp.jsonl" "$out/tessera_q8.jsonl" | tee "$out/table.md"
