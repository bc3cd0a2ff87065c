#!/usr/bin/env bash
# Quality of every weight format tessera converts to, and of the 8- and 4-bit KV caches, against one
# reference file: `tessera convert` from the reference, then `tessera eval` of each against it.
# Writes OUT/*.json and prints a table (bits per weight of the matrices and the whole file, KL
# divergence, same top token, perplexity).
#   bash bench/eval/formats.sh REFERENCE.gguf OUT [TEXT] [CHUNKS] [threads]
# Env: TYPES (default "q8_0 q6_k q5_k q4_k q4_1 q4_0"; empty: none), KV_TYPES (default "q8 q4"), FLAGS (extra eval
# flags, e.g. --q8-activations).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
ref="$1"; out="$2"; text="${3:-/usr/share/common-licenses/GPL-3}"; chunks="${4:-4}"; threads="${5:-2}"
types="${TYPES-q8_0 q6_k q5_k q4_k q4_1 q4_0}"
kv_types="${KV_TYPES-q8 q4}"
flags="${FLAGS:-}"
bin="$root/build/tessera"
mkdir -p "$out"
# shellcheck disable=SC2086
"$bin" eval -m "$ref" --reference "$ref" -f "$text" --chunks "$chunks" -t "$threads" $flags --json "$out/reference.json" >/dev/null 2>&1
for t in $types; do
  echo "[formats] $t" >&2
  "$bin" convert -m "$ref" -o "$out/model.$t.gguf" --type "$t" >/dev/null
  # shellcheck disable=SC2086
  "$bin" eval -m "$out/model.$t.gguf" --reference "$ref" -f "$text" --chunks "$chunks" -t "$threads" $flags --json "$out/$t.json" >/dev/null 2>&1
  stat -c %s "$out/model.$t.gguf" >"$out/$t.bytes"
  rm -f "$out/model.$t.gguf"
done
for kv in $kv_types; do
  echo "[formats] KV cache $kv" >&2
  # shellcheck disable=SC2086
  "$bin" eval -m "$ref" --reference "$ref" --cache-type "$kv" --reference-cache-type f16 -f "$text" --chunks "$chunks" -t "$threads" $flags \
    --json "$out/kv_$kv.json" >/dev/null 2>&1
done
stat -c %s "$ref" >"$out/reference.bytes"
python3 "$root/bench/eval/formats_table.py" "$out" "$ref" $types
