#!/usr/bin/env bash
# Builds bench_dense in build-bench and runs it: tessera's dense kernels vs oneDNN and OpenBLAS.
#   bench/micro/run.sh [out.json] [extra Google Benchmark flags...]
# Writes the JSON (default out/bench_dense.json), the oneDNN implementations chosen
# (<out>.dnnl_verbose.txt) and a markdown table of medians (<out>.md, also printed).
# Env: TESSERA_PROBE (probe JSON for frac_peak; default models/probe.json),
#      TESSERA_BENCH_DECODE_MIB (decode weight working set, default 512),
#      BENCH_QUIET_WAIT (seconds to wait for an idle machine before starting, default 600).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${1:-out/bench_dense.json}"
shift || true
mkdir -p "$(dirname "$out")"

# The peers are Debian packages the engine itself never needs: installed here, not by setup.sh.
missing=()
for p in libdnnl-dev libopenblas-dev libopenblas-pthread-dev libbenchmark-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_BENCH=ON -DTESSERA_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench --target bench_dense -j"$(nproc)" 2>&1 | grep -E "error|bench/micro" || true
bin=build-bench/bench/micro/bench_dense
[ -x "$bin" ] || { echo "run.sh: $bin not built (see the cmake message above: dependency missing?)" >&2; exit 1; }

# OpenBLAS picks its kernels when it loads; bench_dense also re-execs itself with this if unset.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Cooperlake}"
# oneDNN (Debian build) runs on OpenMP (libgomp): bench_dense calls omp_set_num_threads(t) before
# creating each primitive; OMP_WAIT_POLICY is left at libgomp's default (brief spin, then sleep).

# Two noisy vCPUs: wait (bounded) until the machine is mostly idle.
busy() {  # percent of CPU time not idle over one second
  read -r _ a1 a2 a3 a4 a5 a6 a7 a8 _ < /proc/stat; sleep 1
  read -r _ b1 b2 b3 b4 b5 b6 b7 b8 _ < /proc/stat
  local tot=$(( (b1+b2+b3+b4+b5+b6+b7+b8) - (a1+a2+a3+a4+a5+a6+a7+a8) ))
  local idle=$(( (b4+b5) - (a4+a5) ))
  echo $(( tot > 0 ? 100 * (tot - idle) / tot : 0 ))
}
deadline=$(( SECONDS + ${BENCH_QUIET_WAIT:-600} ))
while :; do
  b=$(busy)
  [ "$b" -le 10 ] && break
  if [ $SECONDS -ge $deadline ]; then echo "run.sh: machine still ${b}% busy, running anyway" >&2; break; fi
  echo "run.sh: machine ${b}% busy, waiting" >&2; sleep 10
done

# Which oneDNN implementations run (one short verbose pass; names end in /real_time). The
# decode path is dnnl_sgemm, which oneDNN 2.6 does not log: no line for it.
verbose="${out%.json}.dnnl_verbose.txt"
ONEDNN_VERBOSE=1 "$bin" --benchmark_filter='prefill/dnnl_.*/1024x768x768/t:(1|2)/|decode/dnnl_f32/1536x576/t:1/' \
  --benchmark_min_time=0.01 2>/dev/null | grep '^onednn_verbose' \
  | grep -v ',exec,.*,reorder,' | sed -E 's/,[0-9.]+$//' | sort | uniq -c > "$verbose" || true
echo "run.sh: oneDNN implementations -> $verbose"
cat "$verbose"

"$bin" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out" --benchmark_out_format=json "$@"
python3 bench/micro/table.py "$out" | tee "${out%.json}.md"
