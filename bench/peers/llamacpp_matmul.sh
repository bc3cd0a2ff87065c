#!/usr/bin/env bash
# Peer numbers for a single quantized MUL_MAT in llama.cpp's CPU backend
# (ggml from .peers/llama.cpp-build, built by bench/peers/build_llamacpp.sh).
#
# Compiles bench/peers/llamacpp_matmul.cpp into .peers/llamacpp_matmul and runs
# it with 1 and 2 threads, plain weights and CPU_REPACK weights, writing JSON
# lines (one per case) to OUT.
#
# Usage: bench/peers/llamacpp_matmul.sh [OUT.jsonl]
#        (default OUT: .peers/llamacpp_matmul.jsonl)
# Env:   THREADS    thread counts to run          (default "1 2")
#        REPACK     0, 1 or both                   (default both)
#        FLUSH_MB   >0: evict caches before each timed run (default 0, hot)
#        EXTRA_ARGS passed to the program (e.g. "--types q4_0 -r 100")
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PEERS="$ROOT/.peers"
SRC="$PEERS/llama_cpp_python-0.3.36/vendor/llama.cpp"
BIN="$PEERS/llama.cpp-build/bin"
PROG_SRC="$ROOT/bench/peers/llamacpp_matmul.cpp"
PROG="$PEERS/llamacpp_matmul"
OUT=${1:-$PEERS/llamacpp_matmul.jsonl}
THREADS=${THREADS:-"1 2"}
REPACK=${REPACK:-both}
FLUSH_MB=${FLUSH_MB:-0}
EXTRA_ARGS=${EXTRA_ARGS:-}

for lib in libggml.so libggml-base.so libggml-cpu.so; do
    [[ -e "$BIN/$lib" ]] || {
        echo "[llamacpp_matmul] missing $BIN/$lib: run bench/peers/build_llamacpp.sh first" >&2
        exit 1
    }
done

if [[ ! -x "$PROG" || "$PROG_SRC" -nt "$PROG" || "$BIN/libggml-cpu.so" -nt "$PROG" ]]; then
    echo "[llamacpp_matmul] compiling $PROG" >&2
    g++ -std=c++17 -O3 -march=native -Wall -Wextra \
        -I"$SRC/ggml/include" \
        "$PROG_SRC" -o "$PROG" \
        -L"$BIN" -lggml -lggml-base -lggml-cpu -Wl,-rpath,"$BIN"
fi

mkdir -p "$(dirname "$OUT")"
: > "$OUT"
for t in $THREADS; do
    echo "[llamacpp_matmul] threads=$t repack=$REPACK flush_mb=$FLUSH_MB -> $OUT" >&2
    # shellcheck disable=SC2086
    "$PROG" -t "$t" --repack "$REPACK" --flush-mb "$FLUSH_MB" $EXTRA_ARGS >> "$OUT"
done
echo "[llamacpp_matmul] wrote $(wc -l < "$OUT") lines to $OUT" >&2
