#!/usr/bin/env bash
# Creates the Python reference environment for tessera's golden outputs
# (Hugging Face transformers + llama.cpp's converter) at .peers/venv (git-ignored).
# Idempotent: re-running only installs what is missing or differs from the pins.
#
# Usage: bash bench/reference/setup_env.sh [VENV_DIR]
#
# Notes:
#  - PyPI's Linux x86_64 torch wheel is the CUDA build and pulls the nvidia-* wheels
#    (~3 GB). PyPI has no CPU-only torch for Linux; we accept the download since only
#    PyPI is reachable here. Set TESSERA_TORCH_INDEX to a CPU wheel index to use instead.
#  - llama.cpp's convert_hf_to_gguf.py is run from its source tree and uses the gguf-py
#    folder shipped there; the pinned `gguf` package is used to read GGUF files.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$ROOT/.peers/venv}"
PY="${PYTHON:-python3}"

PINS=(
  "torch==2.14.1"
  "torchvision==0.29.2"
  "transformers==5.24.0"
  "tokenizers==0.23.2"
  "safetensors==0.8.0"
  "huggingface_hub==1.33.0"
  "numpy==2.2.6"
  "pillow==12.3.0"
  "matplotlib==3.11.2"
  "sentencepiece==0.2.2"
  "protobuf==4.25.9"
  "gguf==0.19.0"
  "jinja2==3.1.6"
)

if [ ! -x "$VENV/bin/python" ]; then
  echo "creating venv at $VENV"
  "$PY" -m venv "$VENV"
fi

# Fast path: everything already installed at the pinned versions.
if "$VENV/bin/python" - "${PINS[@]}" <<'PYEOF'
import sys
from importlib.metadata import version, PackageNotFoundError
ok = True
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have is None or have.split("+")[0] != want:
        ok = False
sys.exit(0 if ok else 1)
PYEOF
then
  echo "venv up to date: $VENV"
  exit 0
fi

EXTRA=()
if [ -n "${TESSERA_TORCH_INDEX:-}" ]; then
  EXTRA=(--extra-index-url "$TESSERA_TORCH_INDEX")
fi
nice "$VENV/bin/python" -m pip install --disable-pip-version-check -q "${EXTRA[@]}" "${PINS[@]}"
echo "venv ready: $VENV"
