#!/usr/bin/env bash
# Build the peer llama.cpp (vendored in the llama-cpp-python sdist) for
# benchmarks and golden fixtures. CPU only, Release, -march=native.
#
# Idempotent: re-running only re-does work that is missing or stale.
#   .peers/llama_cpp_python-<ver>.tar.gz      pinned sdist (sha256 checked)
#   .peers/llama_cpp_python-<ver>/             extracted sdist
#   .peers/llama.cpp-build/bin/                llama-tokenize, llama-bench, llama-quantize, ...,
#                                               llama-mtmd-cli (multimodal CLI, + libmtmd.so)
#   .peers/llama.cpp-build/bin/llamacpp_logits our own program (bench/peers/llamacpp_logits.cpp)
#
# Env: JOBS (default 2); NO_AMX=1 builds into .peers/llama.cpp-build-noamx with the AVX-512
# (VNNI, BF16, VBMI) kernels but without ggml's AMX backend, whose matmul segfaults on the
# 2026-12-01 AMX Xeon VM (llama-bench pp512 with repacking on; ggml-org/llama.cpp#20824).
# AVX2_ONLY=1 builds into .peers/llama.cpp-build-avx2 with AVX2/FMA/F16C only (no AVX-512), so
# an AVX-512 machine can run the AVX2 class's pair side by side (tessera with TESSERA_ISA=avx2).
set -euo pipefail

VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
# llama.cpp commit vendored in this sdist (from the sdist's CHANGELOG.md:
# "update llama.cpp to ggml-org/llama.cpp@0c1e57098"). The sdist has no git
# metadata, so we pass it to CMake explicitly for the build-info string.
LLAMA_COMMIT=0c1e57098
JOBS=${JOBS:-2}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PEERS="$ROOT/.peers"
TARBALL="$PEERS/llama_cpp_python-$VERSION.tar.gz"
SRCROOT="$PEERS/llama_cpp_python-$VERSION"
SRC="$SRCROOT/vendor/llama.cpp"
BUILD="$PEERS/llama.cpp-build${NO_AMX:+-noamx}${AVX2_ONLY:+-avx2}"
ISA_FLAGS=(-DGGML_NATIVE=ON)
if [[ -n "${AVX2_ONLY:-}" ]]; then  # the AVX2 class's build, made on any x86 machine (a proxy run)
    ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
elif [[ -n "${NO_AMX:-}" ]]; then
    ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
               -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON)
fi

mkdir -p "$PEERS"

# 1. download the pinned sdist
if [[ ! -f "$TARBALL" ]] || ! echo "$SHA256  $TARBALL" | sha256sum -c --status; then
    rm -f "$TARBALL"
    echo "[build_llamacpp] downloading llama-cpp-python==$VERSION sdist"
    python3 -m pip download --quiet --no-deps --no-binary :all: \
        "llama-cpp-python==$VERSION" -d "$PEERS"
fi
echo "$SHA256  $TARBALL" | sha256sum -c --status || {
    echo "[build_llamacpp] sha256 mismatch for $TARBALL" >&2
    exit 1
}

# 2. extract (marker file makes this idempotent and detects partial extraction)
if [[ ! -f "$SRCROOT/.extracted-$SHA256" ]]; then
    echo "[build_llamacpp] extracting"
    rm -rf "$SRCROOT"
    tar -xzf "$TARBALL" -C "$PEERS"
    touch "$SRCROOT/.extracted-$SHA256"
fi
[[ -f "$SRC/CMakeLists.txt" ]] || { echo "no vendor/llama.cpp in sdist" >&2; exit 1; }

# 3. configure + build llama.cpp
# LLAMA_CURL is deprecated/ignored in this version but passed as requested.
# LLAMA_OPENSSL=OFF / LLAMA_BUILD_SERVER=OFF: no network code needed (llama-cli
# now depends on the server library, so we build llama-simple/llama-completion).
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    echo "[build_llamacpp] configuring"
    cmake -S "$SRC" -B "$BUILD" \
        -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=ON \
        "${ISA_FLAGS[@]}" \
        -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_BLAS=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON \
        -DLLAMA_BUILD_COMMIT="$LLAMA_COMMIT" -DLLAMA_BUILD_NUMBER=0
fi
echo "[build_llamacpp] building (-j$JOBS)"
cmake --build "$BUILD" --config Release -j"$JOBS" \
    --target llama-tokenize llama-bench llama-simple llama-completion llama-mtmd-cli llama-quantize llama-perplexity

# 4. our own program, compiled directly against the built libllama
BIN="$BUILD/bin"
LOGITS_SRC="$ROOT/bench/peers/llamacpp_logits.cpp"
LOGITS_BIN="$BIN/llamacpp_logits"
if [[ ! -x "$LOGITS_BIN" || "$LOGITS_SRC" -nt "$LOGITS_BIN" || "$BIN/libllama.so" -nt "$LOGITS_BIN" ]]; then
    echo "[build_llamacpp] compiling llamacpp_logits"
    g++ -std=c++17 -O2 -Wall -Wextra \
        -I"$SRC/include" -I"$SRC/ggml/include" \
        "$LOGITS_SRC" -o "$LOGITS_BIN" \
        -L"$BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$BIN"
fi

echo "[build_llamacpp] llama.cpp $LLAMA_COMMIT (llama-cpp-python $VERSION) binaries:"
for b in llama-tokenize llama-bench llama-simple llama-completion llama-mtmd-cli llama-quantize llama-perplexity llamacpp_logits; do
    echo "  $BIN/$b"
done
