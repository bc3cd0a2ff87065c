#!/usr/bin/env bash
# Instruction-count regression check that needs no quiet machine: valgrind's callgrind counts
# the instructions of a fixed small workload (the default model, a fixed raw prompt, 2 greedy
# tokens, 1 thread, the AVX2 kernels -- valgrind has no AVX-512), which is the same for the same
# binary whatever else the machine does. Counts are kept per commit in bench/regress/instructions.tsv.
#
#   bash bench/regress/callgrind.sh            # measure, compare with the last recorded count
#   bash bench/regress/callgrind.sh --record   # measure and append a row for this commit
#
# Fails (exit 1) when the count grew by more than 3% (REGRESS_TOLERANCE, in percent).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
tsv=bench/regress/instructions.tsv
tol="${REGRESS_TOLERANCE:-3}"
bin="${TESSERA:-build/tessera}"
[ -x "$bin" ] || { echo "callgrind: $bin not built (scripts/setup.sh)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "callgrind: valgrind not installed" >&2; exit 1; }
workload=(run --raw -p "A screen assistant helps" -n 2 --temp 0 -t 1 --isa avx2 -c 64)
out="$(mktemp)"; trap 'rm -f "$out" "$out".log' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" --log-file="$out.log" "$bin" "${workload[@]}" >/dev/null 2>&1 ||
  { cat "$out.log" >&2; echo "callgrind: the workload failed under valgrind" >&2; exit 1; }
ir=$(grep -m1 '^summary:' "$out" | awk '{print $2}')
[ -n "$ir" ] || { echo "callgrind: no instruction count in the output" >&2; exit 1; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- src tools CMakeLists.txt 2>/dev/null || commit="$commit-dirty"
echo "callgrind: $ir instructions (workload: tessera ${workload[*]}) at $commit"
last=$( [ -f "$tsv" ] && grep -v '^#' "$tsv" | tail -n 1 | cut -f3 || true)
if [ "${1:-}" = "--record" ]; then
  [ -f "$tsv" ] || printf '# date\tcommit\tinstructions\tworkload\n' >"$tsv"
  printf '%s\t%s\t%s\t%s\n' "$(date -u +%F)" "$commit" "$ir" "tessera ${workload[*]}" >>"$tsv"
  echo "callgrind: recorded in $tsv"
fi
if [ -n "$last" ]; then
  awk -v a="$ir" -v b="$last" -v t="$tol" 'BEGIN {
    g = 100 * (a - b) / b
    printf "callgrind: %+.2f%% against the last recorded count (%s); tolerance +%s%%\n", g, b, t
    exit (g > t) ? 1 : 0 }'
fi
