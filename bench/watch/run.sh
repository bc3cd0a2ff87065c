#!/usr/bin/env bash
# The screen-watching benchmark: every recorded session (tests/fixtures/watch/*, made by
# bench/watch/record_sessions.sh) through `tessera watch`, exact reuse and with the
# approximations on, each frame side by side with a full recompute in the same run
# (--validate 1), on the full-size SmolVLM-shaped model (SmolLM2-135M text + a random SigLIP
# tower, `tessera vlm-init`). Writes JSON lines per run and prints the per-workload table.
#   bash bench/watch/run.sh [OUTDIR] [threads]
# Env: TEXT, MMPROJ (model pair), SESSIONS (space-separated names), APPROX (flags for the
# approximate runs, default "--approx-global 2 --approx-kv 0.1 --approx-gate"), MODES ("exact approx"),
# WATCH_ARGS (flags for every run). Qwen3-VL (docs/qwen3vl.md):
#   TEXT=.peers/qwen3vl-2b/text-Q4_K_M.gguf MMPROJ=.peers/qwen3vl-2b/mmproj.gguf SESSIONS=typing \
#   APPROX="--approx-gate --approx-kv 0" WATCH_ARGS="--vision-max-pixels 258048" bash bench/watch/run.sh out/qwatch
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${1:-out/watch}"; threads="${2:-2}"
text="${TEXT:-.peers/smolvlm-full/text.gguf}"; mmproj="${MMPROJ:-.peers/smolvlm-full/mmproj.gguf}"
approx="${APPROX:---approx-global 2 --approx-kv 0.1 --approx-gate}"
modes="${MODES:-exact approx}"
extra="${WATCH_ARGS:-}"
sessions="${SESSIONS:-typing scroll switch browse idle}"
mkdir -p "$out"
for f in "$text" "$mmproj"; do [ -f "$f" ] || { echo "missing $f (see docs/vision.md: tessera vlm-init)" >&2; exit 1; }; done
for s in $sessions; do
  for m in $modes; do
    flags=""; [ "$m" = approx ] && flags="$approx"
    echo "[watch bench] $s: $m $flags" >&2
    # shellcheck disable=SC2086
    build/tessera watch -m "$text" --mmproj "$mmproj" --frames "tests/fixtures/watch/$s" -n 16 -t "$threads" --validate 1 $flags $extra \
      >"$out/$s.$m.jsonl" || echo "[watch bench] $s $m: exit $?" >&2
  done
done
python3 bench/watch/table.py "$out" $sessions
