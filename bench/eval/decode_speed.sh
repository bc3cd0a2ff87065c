#!/usr/bin/env bash
# Decode speed per model file, tessera and llama.cpp, in interleaved rounds: every round runs every
# file once (the order rotated by one each round, so that no file always runs first or after the
# same neighbour), then the next round. tessera: `tessera bench -p 0 -n GEN -d 0 -r 1 --f32-activations`
# (engine "tessera": fp32 activations, the default until 2026-12-05; with Q8=1 also engine
# "tessera-q8", `--q8-activations`, the 8-bit activations that are the default since) (one warm-up
# pass, then GEN greedy single-token decodes from an empty context, starting from a fixed seeded
# token: one sample per round); llama.cpp: `llama-bench -p 0 -n GEN -r 1` (its warm-up, then GEN
# decodes from an empty context).
# The other processes' CPU use goes to OUT/cpu_log.txt for every measurement: top's busiest
# processes over the half second before it, and the machine's busy CPU time during it less the
# measured command's own. Writes OUT/raw/round<R>_<NAME>_<engine>.json, OUT/decode_speed.json (per
# file and engine: the samples with their rounds and the others' CPU use, median, min, max) and
# prints a table.
#   nice -n -15 bash bench/eval/decode_speed.sh OUT NAME=FILE.gguf [NAME=FILE.gguf ...]
# Env: ROUNDS (default 5: the last round's number), FIRST (default 1; FIRST=6 ROUNDS=8 adds rounds
# 6-8 to an earlier run's raw files in OUT; ROUNDS=0 measures nothing and only summarizes them),
# GEN (default 64), THREADS (default 2), LLAMA (1: also llama-bench, the default; 0: tessera only),
# Q8 (1: also tessera --q8-activations, the default numerics; default 0), TESSERA (default build/tessera), LLAMA_BIN
# (default .peers/llama.cpp-build/bin).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$1"; shift
first="${FIRST:-1}"; rounds="${ROUNDS:-5}"; gen="${GEN:-64}"; threads="${THREADS:-2}"; with_llama="${LLAMA:-1}"; with_q8="${Q8:-0}"
tessera="${TESSERA:-$root/build/tessera}"; lbin="${LLAMA_BIN:-$root/.peers/llama.cpp-build/bin}"
[ "$#" -gt 0 ] || { echo "usage: decode_speed.sh OUT NAME=FILE.gguf [...]" >&2; exit 2; }
names=(); files=()
for a in "$@"; do
  names+=("${a%%=*}"); files+=("${a#*=}")
  [ -f "${a#*=}" ] || { echo "decode_speed.sh: no file ${a#*=}" >&2; exit 1; }
done
mkdir -p "$out/raw"
log="$out/cpu_log.txt"
header() { echo "# decode_speed.sh $(date -u +%FT%TZ): rounds $first..$rounds, tg$gen, $threads threads, nice $(nice)"
  lscpu | grep -E 'Model name|^CPU\(s\)'; grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo; }
if [ "$first" = 1 ] && [ "$rounds" != 0 ]; then header >"$log"; elif [ "$rounds" != 0 ]; then header >>"$log"; fi
# top's second frame: CPU use over the half second before the measurement (the first is since boot)
snap() { { echo "== $(date -u +%T) round $1: $2 ($3)"; top -bn2 -d 0.5 | awk '/^top -/ { n++ } n == 2 && k++ < 15'; } >>"$log"; }
# the machine's busy CPU time (jiffies: user nice system irq softirq steal) around each measurement,
# less the measured command's own (/usr/bin/time): the other processes' CPU use during it
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
hz=$(getconf CLK_TCK)
measure() {
  local b0 b1 e u s; b0=$(busy)
  /usr/bin/time -f "%e %U %S" -o "$out/.time" "$@"
  b1=$(busy); read -r e u s <"$out/.time"; rm -f "$out/.time"
  awk -v b="$((b1 - b0))" -v e="$e" -v u="$u" -v s="$s" -v hz="$hz" \
    'BEGIN { printf "during: %.1f s, own CPU %.1f s, others %.0f%% of one core\n", e, u + s, 100 * (b / hz - u - s) / e }' >>"$log"
}
n=${#names[@]}
for r in $(seq "$first" "$rounds"); do
  for k in $(seq 0 $((n - 1))); do
    i=$(( (k + r - 1) % n )); name="${names[$i]}"; f="${files[$i]}"
    echo "[decode_speed] round $r/$rounds $name" >&2
    snap "$r" "$name" tessera
    measure "$tessera" bench -m "$f" -t "$threads" -p 0 -n "$gen" -d 0 -r 1 --f32-activations --json \
      -o "$out/raw/round${r}_${name}_tessera.json" 2>/dev/null
    if [ "$with_q8" = 1 ]; then
      snap "$r" "$name" "tessera --q8-activations"
      measure "$tessera" bench -m "$f" -t "$threads" -p 0 -n "$gen" -d 0 -r 1 --q8-activations --json \
        -o "$out/raw/round${r}_${name}_tessera-q8.json" 2>/dev/null
    fi
    if [ "$with_llama" = 1 ]; then
      snap "$r" "$name" llama.cpp
      measure env LD_LIBRARY_PATH="$lbin" "$lbin/llama-bench" -m "$f" -t "$threads" -p 0 -n "$gen" -r 1 -o json \
        >"$out/raw/round${r}_${name}_llama.json" 2>/dev/null
    fi
  done
done
python3 - "$out" "$gen" "$threads" "$rounds" "$(nice)" "$@" <<'PY'
import json, re, statistics, sys
from pathlib import Path
out, gen, threads, rounds, niceness = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
pairs = [a.split("=", 1) for a in sys.argv[6:]]
rounds = max(int(p.name[5:].split("_")[0]) for p in out.glob("raw/round*.json"))
head = (out / "cpu_log.txt").read_text().split("\n", 1)[0]
if " nice " in head:  # the measuring run's, where this is a ROUNDS=0 summary
    niceness = int(head.rsplit(" nice ", 1)[1])
summary = {"test": f"tg{gen} (greedy decodes from an empty context)", "threads": threads, "rounds": rounds, "nice": niceness,
           "engines": {}, "rows": []}
# the other processes' CPU use before each measurement (% of one core, summed over top's snapshot) and
# during it (from /proc/stat; logged by measure(), absent in logs from before it was added)
others = {}
for block in (out / "cpu_log.txt").read_text().split("\n== ")[1:]:
    hdr, _, body = block.partition("\n")
    m = re.match(r"\S+ round (\d+): (\S+) \((.*)\)$", hdr)
    if not m:
        continue
    eng = {"tessera": "tessera", "tessera --q8-activations": "tessera-q8", "llama.cpp": "llama"}[m.group(3)]
    cpu = sum(float(f[8]) for f in (ln.split() for ln in body.split("\n")) if len(f) >= 12 and f[0].isdigit())
    d = re.search(r"^during: .* others (-?\d+)% of one core$", body, re.M)
    others[(int(m.group(1)), m.group(2), eng)] = (round(cpu, 1), int(d.group(1)) if d else None)
def stats(s, rs, name, eng):
    return {"median": statistics.median(s), "min": min(s), "max": max(s), "samples": s, "rounds": rs,
            "others_cpu_before": [others.get((r, name, eng), (None, None))[0] for r in rs],
            "others_cpu_during": [others.get((r, name, eng), (None, None))[1] for r in rs]}
print(f"| file | MiB | tessera --f32-activations tg{gen} t/s (median, min–max) | tessera --q8-activations (default) | llama.cpp tg{gen} t/s |")
print("|---|---|---|---|---|")
for name, path in pairs:
    row = {"format": name, "file": path, "file_bytes": Path(path).stat().st_size}
    for eng in ("tessera", "tessera-q8", "llama"):
        s, rs = [], []
        for r in range(1, rounds + 1):
            f = out / "raw" / f"round{r}_{name}_{eng}.json"
            if not f.exists():
                continue
            try:
                j = json.loads(f.read_text())
            except json.JSONDecodeError:  # a run cut short
                continue
            if eng == "llama":
                for t in j:
                    if t["n_gen"] == gen and t["n_prompt"] == 0:
                        s += t["samples_ts"]
                        rs += [r] * len(t["samples_ts"])
                        summary["engines"].setdefault("llama", {"build_commit": t["build_commit"], "cpu_info": t["cpu_info"]})
            else:
                summary["engines"].setdefault("tessera", j["machine"])
                x = [x for row_ in j["results"] if row_["test"] == f"tg{gen}" for x in row_["samples"]]
                s += x
                rs += [r] * len(x)
        if s:
            row[eng.replace("-", "_")] = stats(s, rs, name, eng)
    summary["rows"].append(row)
    cell = lambda k: (f"{row[k]['median']:.2f} ({row[k]['min']:.2f}–{row[k]['max']:.2f}, n={len(row[k]['samples'])})" if k in row else "–")
    print(f"| {name} | {row['file_bytes'] / 2**20:.1f} | {cell('tessera')} | {cell('tessera_q8')} | {cell('llama')} |")
(out / "decode_speed.json").write_text(json.dumps(summary, indent=1) + "\n")
PY
