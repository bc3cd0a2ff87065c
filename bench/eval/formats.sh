#!/usr/bin/env bash
# Quality of every weight format tessera converts to, and of the 8- and 4-bit KV caches, against one
# reference file: `tessera convert` from the reference, then `tessera eval` of each against it.
# Writes OUT/*.json and prints a table (bits per weight of the matrices and the whole file, KL
# divergence, same top token, perplexity).
#   bash bench/eval/formats.sh REFERENCE.gguf OUT [TEXT] [CHUNKS] [threads]
# Env: TYPES (default "q8_0 q6_k q5_k q4_k q4_1 q4_0"; empty: none), REQUANT (default "a4g64 a4g32": layouts
# `tessera convert` cannot write, MLX's affine 4-bit, measured by `tessera eval --requantize` from the reference
# at load; their size is the reference's with each requantized tensor in the layout's bytes per weight, A4G64 36
# per 64, A4G32 20 per 32, from eval's JSON), KV_TYPES (default "q8 q4"), FLAGS (extra eval flags, e.g.
# --f32-activations: the tables committed up to 2026-12-05 were measured so, the default then; the
# default since is 8-bit activations).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
ref="$1"; out="$2"; text="${3:-/usr/share/common-licenses/GPL-3}"; chunks="${4:-4}"; threads="${5:-2}"
types="${TYPES-q8_0 q6_k q5_k q4_k q4_1 q4_0}"
requant="${REQUANT-a4g64 a4g32}"
kv_types="${KV_TYPES-q8 q4}"
flags="${FLAGS:-}"
bin="$root/build/tessera"
mkdir -p "$out"
# the reference's own figures (PPL, text, chunks), kept when OUT has them from an earlier run with the same settings
if [ ! -f "$out/reference.json" ] || [ "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["chunks"])' "$out/reference.json")" != "$chunks" ]; then
  # shellcheck disable=SC2086
  "$bin" eval -m "$ref" --reference "$ref" -f "$text" --chunks "$chunks" -t "$threads" $flags --json "$out/reference.json" >/dev/null 2>&1
fi
for t in $types; do
  echo "[formats] $t" >&2
  "$bin" convert -m "$ref" -o "$out/model.$t.gguf" --type "$t" >/dev/null
  # shellcheck disable=SC2086
  "$bin" eval -m "$out/model.$t.gguf" --reference "$ref" -f "$text" --chunks "$chunks" -t "$threads" $flags --json "$out/$t.json" >/dev/null 2>&1
  stat -c %s "$out/model.$t.gguf" >"$out/$t.bytes"
  rm -f "$out/model.$t.gguf"
done
for t in $requant; do
  echo "[formats] $t (requantized at load)" >&2
  # shellcheck disable=SC2086
  "$bin" eval -m "$ref" --requantize "$t" --reference "$ref" -f "$text" --chunks "$chunks" -t "$threads" $flags --json "$out/$t.json" >/dev/null 2>&1
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["bytes"])' "$out/$t.json" >"$out/$t.bytes"
done
for kv in $kv_types; do
  echo "[formats] KV cache $kv" >&2
  # shellcheck disable=SC2086
  "$bin" eval -m "$ref" --reference "$ref" --cache-type "$kv" --reference-cache-type f16 -f "$text" --chunks "$chunks" -t "$threads" $flags \
    --json "$out/kv_$kv.json" >/dev/null 2>&1
done
stat -c %s "$ref" >"$out/reference.bytes"
# shellcheck disable=SC2086
python3 "$root/bench/eval/formats_table.py" "$out" "$ref" $types $requant
