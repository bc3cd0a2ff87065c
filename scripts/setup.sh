#!/usr/bin/env bash
# Installs what tessera needs (Debian packages), fetches the default model and builds.
# Safe to run again: it installs only what is missing and rebuilds incrementally.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

packages=(cmake g++ make pkg-config python3 python3-pip libgtest-dev libbenchmark-dev
          nlohmann-json3-dev libcli11-dev libcpp-httplib-dev curl libxcb-shm0-dev libxcb-damage0-dev libxcb-xfixes0-dev
          xvfb xdotool xterm clang libclang-rt-14-dev libpng-dev libjpeg-dev
          g++-aarch64-linux-gnu clang-19 qemu-user-static valgrind xz-utils)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

bash scripts/fetch_model.sh

# test fixtures stored xz-compressed (tracked files stay under 4 MiB): unpack when missing or stale
for xzf in tests/fixtures/vision/tiny/*.gguf.xz tests/fixtures/vocab/*.gguf.xz; do
  out="${xzf%.xz}"
  if [ ! -f "$out" ] || [ "$xzf" -nt "$out" ]; then xz -dkf "$xzf"; fi
done

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
if ! cmake --build build -j"$(nproc)" >build/build.log 2>&1; then
  grep -E "error" -A3 build/build.log | head -n 60
  echo "setup: build failed (the whole log: build/build.log)" >&2
  exit 1
fi
echo "setup: built build/tessera"
