#!/usr/bin/env bash
# Sets everything up, then runs every test: unit and model tests (ctest), the CLI bad-input
# checks, the HTTP server against curl and the openai client, the fast suites again under AddressSanitizer + UBSan, the ARM kernels under qemu,
# the instruction-count regression check (callgrind), and a time-bounded libFuzzer run of the
# file parsers.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS=0
bash "$root/scripts/setup.sh"
cd "$root"

# each stage's start is stamped with the seconds since the run began, so a slow CI shows where
stage() { echo "== [${SECONDS}s] $*"; }

# a build step's output is shown only when it fails, and then it stops the run
build() {  # log name, then the cmake --build arguments
  local log="$1"; shift
  cmake --build "$@" >"$log" 2>&1 || { grep -E "error|Error" -A3 "$log" | head -n 60; echo "build failed: $*" >&2; exit 1; }
}

# the openai Python client for the server's tests (tests/serve_api.sh), a test tool only
if [ ! -d build/pylib/openai ]; then
  python3 -m pip install -q --disable-pip-version-check --target build/pylib openai >build/pylib.log 2>&1 ||
    echo "note: could not install the openai package (see build/pylib.log); serve_api skips its client check"
fi

stage "ctest"
(cd build && ctest --output-on-failure -j1)
# The bf16 GEMM and attention again capped below AMX: on an AMX Xeon this runs their AVX512-BF16
# kernels (Zen 4's path), which the uncapped run above does not reach; elsewhere it repeats them.
TESSERA_ISA=avx512vnni build/tests/tessera_tests --gtest_brief=1 \
  --gtest_filter='Bf16Gemm.*:AttentionBf16.*:Vision.Bf16GemmOnAmxStaysCloseToTransformers'

# The fast suites and the CLI's hostile-input checks again under AddressSanitizer + UBSan. Left
# to the plain build above: the end-to-end model, vision, watch, eval and requantize runs that take 10-160 s
# each under the sanitizers (4 to 15 minutes together).
stage "AddressSanitizer + UBSan build and fast suites"
# -g0: the reports name functions, not lines (rebuild with -g1 to see them); debug info was ~15% of
# this build, which took 10 of CI's 32 minutes on a 2-vCPU Zen 3 (2026-12-06)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g0" -DTESSERA_SANITIZE=ON >/dev/null
build build-asan/build.log build-asan -j"$(nproc)" --target tessera-cli tessera_tests
slow="Attention.MatchesFloat64AndEveryIsaBitwise:Model.FiveAndSixBitMixturesMatchFloat64ReferenceAndAreInvariant"
slow+=":Model.TeacherForcedTop1AgreesWithLlamaCpp:Model.Fp32ActivationsAgreeWithLlamaCppDefaultsExceptNearTies"
slow+=":Model.LogitsAreInvariantToChunkingAndThreads:Model.Q8ActivationsTrackLlamaCppRounding"
slow+=":Model.KlDivergenceFromFloat64ReferenceIsSmall:Model.GreedyAnswerIsSensibleAndDeterministic"
slow+=":Vision.PromptAndLogitsMatchTransformers:Vision.PreprocessingIsPixelExactWithTransformers:Vision.HfDirectoryAndGgufLoadersAgree"
slow+=":Watch.ExactReuseIsBitwiseFullRecompute:Watch.CacheOverBudgetEvictsAndStaysExact:Watch.TokenGatingReencodesOnlyChangedPatches"
slow+=":Watch.ApproximationsAreMeasured:Attention.DecodePrefillChunkingAndThreadsGiveTheSameBits"
slow+=":AttentionBf16.WithinBoundAndInvariantOverRowsAndThreads:Model.SavedPrefixRestoresBitwise"
slow+=":Qwen3VL.PreprocessingIsPixelExactWithTransformers:Eval.ModelAgainstItselfAndByHand:Eval.AgreesWithLlamaPerplexity"
slow+=":EvalLayers.ZeroAgainstItselfGrowingWhenQuantized"
# whole-model requantize and KV-cache quality runs: 43-53 s each under the sanitizers (2026-12-06)
slow+=":Requantize.MlxLayoutsAreCloseToReference:Requantize.GgmlRuleEqualsConvertedFile:Model.QuantizedKvCacheStaysCloseToF16"
# float64 sweeps of 17-20 s each under the sanitizers, whose kernels and resampler the fast
# attention, bf16 and vision tests also run there (2026-12-06, CI at 1536-1642 s of its 30 min)
slow+=":AttentionBf16.TwinWithinBoundOfFloat64:Attention.CausalPrefillPastASegmentMatchesFloat64"
slow+=":Vision.IncrementalPreprocessingIsBitwiseTheWholeFrame:Attention.HeadDim256MatchesFloat64AndEveryIsaBitwise"
# the twins' float sweeps of the AVX512-FP16 kernels (14 s each under the sanitizers on Zen 3, which runs only the twins)
# and Qwen3-VL's two watch runs (8 s each), as the Watch ones above (2026-12-06)
slow+=":F16Gemm.TwinWithinChunkBoundsKernelIsTheTwinAndInvariant:AttentionF16.TwinAtEveryLevelInvariantAndCloseToFloat64"
slow+=":Qwen3VL.WatchApproximateReuseStaysClose:Qwen3VL.WatchExactReuseIsBitwiseTheFullRecompute"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
(cd build-asan && ./tests/tessera_tests --gtest_filter="-$slow" --gtest_brief=1)
asan_tmp="$(mktemp -d)"
bash tests/cli_hostile_input.sh build-asan/tessera "$asan_tmp"
PYTHONPATH=build/pylib bash tests/serve_api.sh build-asan/tessera >"$asan_tmp/serve.log" 2>&1 ||
  { cat "$asan_tmp/serve.log"; echo "serve_api under ASan failed" >&2; exit 1; }
bash tests/serve_screen.sh build-asan/tessera >>"$asan_tmp/serve.log" 2>&1 ||
  { cat "$asan_tmp/serve.log"; echo "serve_screen under ASan failed" >&2; exit 1; }
echo "serve under ASan: $(grep -c '^ok' "$asan_tmp/serve.log") checks passed"
rm -rf "$asan_tmp"
unset ASAN_OPTIONS UBSAN_OPTIONS

# ARM NEON kernels (Apple Silicon's instruction set) and the SME GEMM (clang-19): cross-compiled, run under qemu-user
stage "ARM NEON kernels under qemu"
cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DTESSERA_KERNELS_ONLY=ON \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
build build-arm/build.log build-arm -j"$(nproc)"
# each configuration runs once: its last line printed, any failure shown and fatal
arm_check() {  # label, then the qemu -cpu value
  local out
  out="$(qemu-aarch64-static -cpu "$2" -L /usr/aarch64-linux-gnu build-arm/kernel_check)" ||
    { echo "$out" | grep -E "FAIL" | head -n 20; echo "kernel_check failed ($1)" >&2; exit 1; }
  echo "arm64 ($1): $(echo "$out" | tail -n 1)"
}
arm_check "qemu-aarch64 -cpu max, SME at 256 bits" max
# Apple M4's 512-bit streaming vectors for the SME encoder GEMM
arm_check "SME at 512 bits" max,sme512=on,sme1024=off,sme2048=off
# the probe's NEON, SDOT and SMMLA loops run (figures under emulation mean nothing)
qemu-aarch64-static -cpu max -L /usr/aarch64-linux-gnu build-arm/probe_check --quick | tail -n 1

# instruction counts of a fixed workload against the last recorded ones (+3% fails)
stage "callgrind instruction counts"
bash bench/regress/callgrind.sh

# 10 s per parser keeps the whole run within CI's 30 minutes on 2 cores (the whole run took 32 min with 15 s on a 2-vCPU Zen 3, 2026-12-06); TESSERA_FUZZ_SECONDS for longer runs
fuzz_seconds="${TESSERA_FUZZ_SECONDS:-10}"
fuzzers=(fuzz_gguf fuzz_tokenizer fuzz_safetensors fuzz_image fuzz_json)
stage "fuzzers"
# -O1 with line tables only (the reports still name lines): the build took 142 s against
# RelWithDebInfo's 188 on 2 Zen 3 vCPUs (2026-12-06)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" \
  -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_FUZZERS=ON >/dev/null
build build-fuzz/build.log build-fuzz -j"$(nproc)" --target "${fuzzers[@]}" make_fuzz_seeds
seeds="$(mktemp -d)"
trap 'rm -rf "$seeds"' EXIT
build-fuzz/make_fuzz_seeds "$seeds"
for target in "${fuzzers[@]}"; do
  mkdir -p "$seeds/$target-corpus"
  echo "fuzz: $target for ${fuzz_seconds}s"
  build-fuzz/$target -max_total_time="$fuzz_seconds" -max_len=65536 -rss_limit_mb=2048 \
    -print_final_stats=1 "$seeds/$target-corpus" "$seeds/seeds" 2>"$seeds/$target.log" \
    || { tail -n 40 "$seeds/$target.log"; echo "fuzz: $target found a crash" >&2; exit 1; }
  grep -E "stat::number_of_executed_units|Done" "$seeds/$target.log" | tail -2
done
echo "fuzz: no crashes"
stage "done"
