#!/usr/bin/env bash
# Decode speed at a long context per KV cache type: `tessera bench -p 0 -n GEN -d DEPTH` (tg@d:
# GEN greedy decodes after DEPTH cached tokens), the types interleaved round by round so that
# drift in the machine's load spreads over all of them; per (type, depth) the median of every
# round's samples. Writes OUT/round<R>_<type>_d<DEPTH>.json and OUT/summary.json, prints a table.
#   bash bench/eval/kv_speed.sh MODEL.gguf OUT [ROUNDS] [threads]
# Env: TYPES (default "f16 q8 q4"), DEPTHS (default "2048 4096"), GEN (default 32), REPS (per run, default 2).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
model="$1"; out="$2"; rounds="${3:-3}"; threads="${4:-2}"
types="${TYPES:-f16 q8 q4}"; depths="${DEPTHS:-2048 4096}"; gen="${GEN:-32}"; reps="${REPS:-2}"
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for d in $depths; do
    for t in $types; do
      echo "[kv_speed] round $r depth $d $t" >&2
      "$root/build/tessera" bench -m "$model" -t "$threads" -p 0 -n "$gen" -d "$d" -r "$reps" --cache-type "$t" --json \
        -o "$out/round${r}_${t}_d${d}.json" 2>/dev/null
    done
  done
done
python3 - "$out" "$model" "$threads" "$types" "$depths" <<'PY'
import json, statistics, sys
from pathlib import Path
out, model, threads, types, depths = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
summary = {"model": model, "threads": int(threads), "rows": []}
print(f"| KV cache | " + " | ".join(f"tg @ d{d} (t/s, median)" for d in depths) + " |")
print("|---|" + "---|" * len(depths))
for t in types:
    cells = []
    for d in depths:
        samples, tg0 = [], []
        for f in sorted(out.glob(f"round*_{t}_d{d}.json")):
            j = json.loads(f.read_text())
            summary.setdefault("machine", j["machine"])
            for row in j["results"]:
                if "@" in row["test"]:
                    samples += row["samples"]
        med = statistics.median(samples)
        summary["rows"].append({"kv_cache": t, "depth": int(d), "tg_median": med, "samples": samples})
        cells.append(f"{med:.2f} ({min(samples):.2f}–{max(samples):.2f}, n={len(samples)})")
    print(f"| {t} | " + " | ".join(cells) + " |")
(out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
PY
