#!/usr/bin/env bash
# Sets everything up, then runs the main job on the default model: a question answered by
# SmolLM2-135M-Instruct (Q4_1 GGUF), streamed, with prompt and generation speed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
prompt="${1:-In two sentences, why do laptops get hot when running AI models?}"
echo
echo "\$ build/tessera run -p \"$prompt\" -n 96"
build/tessera run -p "$prompt" -n 96
