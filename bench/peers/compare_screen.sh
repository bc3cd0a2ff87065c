#!/usr/bin/env bash
# Side-by-side timing of one screen question on tessera and on llama.cpp's llama-mtmd-cli.
#
# Both engines get the same GGUF pair, image, prompt, thread count, and -n, with greedy
# sampling (--temp 0, --repeat-penalty 1). They run interleaved A,B,A,B,... for R rounds; the
# script parses each engine's per-phase timings and prints a markdown table of the medians,
# plus the tiling / image-token counts each engine used and each engine's answer text.
#
# Usage: bench/peers/compare_screen.sh [options]
#   -r ROUNDS     rounds (default 3)
#   -t THREADS    threads for both engines (default 2)
#   -n N          tokens to generate (default 16)
#   -m TEXT.gguf  text model     (default .peers/smolvlm-full/text.gguf)
#   -j MMPROJ     vision mmproj  (default .peers/smolvlm-full/mmproj.gguf)
#   -i IMAGE      image          (default tests/fixtures/vision/screens/desktop_1920x1080.png)
#   -p PROMPT     prompt         (default "What is the user doing?")
#   -o DIR        keep the raw logs here (default .peers/compare_screen/<date-time>)
# Env: TESSERA (default build/tessera), MTMD_CLI (default .peers/llama.cpp-build/bin/llama-mtmd-cli,
#      built by bench/peers/build_llamacpp.sh).
#
# What the llama.cpp numbers are (from tools/mtmd/mtmd-cli.cpp, mtmd-helper.cpp, run with -v --perf):
#   encode      "mtmd batch encoding done in N ms" per image chunk (one chunk = one slice); the
#               CLIP graph includes the idefics3 connector (pixel shuffle + projection), so there
#               is no separate connector number.
#   image decode "image decoded (batch i/n) in N ms": the LM forward over one slice's embeddings.
#   prompt eval llama_perf "prompt eval time" runs from the first llama_decode to the first
#               sampled token, so it also contains the CLIP encodes that mtmd-cli interleaves;
#               "LM prefill" below is prompt eval minus the summed encode times.
#   eval        llama_perf "eval time" (n-1 single-token decodes; the first token comes from prefill).
#   preprocess  derived from log timestamps: from the last line before the image is loaded to
#               "add_media: preproc_out ..." (image file decode + resize + slicing + normalise,
#               and the chat-template formatting, which is tiny).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

ROUNDS=3 THREADS=2 NPRED=16
TEXT=.peers/smolvlm-full/text.gguf
MMPROJ=.peers/smolvlm-full/mmproj.gguf
IMAGE=tests/fixtures/vision/screens/desktop_1920x1080.png
PROMPT="What is the user doing?"
OUTDIR=""
while getopts "r:t:n:m:j:i:p:o:h" opt; do
  case $opt in
    r) ROUNDS=$OPTARG ;; t) THREADS=$OPTARG ;; n) NPRED=$OPTARG ;;
    m) TEXT=$OPTARG ;; j) MMPROJ=$OPTARG ;; i) IMAGE=$OPTARG ;; p) PROMPT=$OPTARG ;;
    o) OUTDIR=$OPTARG ;;
    *) sed -n '2,30p' "${BASH_SOURCE[0]}"; exit 2 ;;
  esac
done
TESSERA="${TESSERA:-build/tessera}"
MTMD_CLI="${MTMD_CLI:-.peers/llama.cpp-build/bin/llama-mtmd-cli}"
OUTDIR="${OUTDIR:-.peers/compare_screen/$(date +%Y%m%d-%H%M%S)}"
for f in "$TESSERA" "$MTMD_CLI"; do [ -x "$f" ] || { echo "missing executable: $f" >&2; exit 1; }; done
for f in "$TEXT" "$MMPROJ" "$IMAGE"; do [ -f "$f" ] || { echo "missing file: $f" >&2; exit 1; }; done
mkdir -p "$OUTDIR"

now_ms() { date +%s%3N; }
run_tessera() {  # $1 round
  local t0 t1; t0=$(now_ms)
  "$TESSERA" run -m "$TEXT" --mmproj "$MMPROJ" --image "$IMAGE" -p "$PROMPT" \
    -n "$NPRED" -t "$THREADS" --temp 0 --repeat-penalty 1 \
    >"$OUTDIR/tessera.$1.out" 2>"$OUTDIR/tessera.$1.err"
  t1=$(now_ms); echo $((t1 - t0)) >"$OUTDIR/tessera.$1.wall_ms"
}
run_llama() {  # $1 round
  local t0 t1; t0=$(now_ms)
  "$MTMD_CLI" -m "$TEXT" --mmproj "$MMPROJ" --image "$IMAGE" -p "$PROMPT" \
    -n "$NPRED" -t "$THREADS" --temp 0 --repeat-penalty 1 --seed 1 --perf -v \
    >"$OUTDIR/llama.$1.out" 2>"$OUTDIR/llama.$1.err" </dev/null
  t1=$(now_ms); echo $((t1 - t0)) >"$OUTDIR/llama.$1.wall_ms"
}

{
  echo "date: $(date -Is)"; echo "host: $(uname -srm), $(nproc) cpus"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "tessera: $TESSERA ($(git rev-parse --short HEAD 2>/dev/null || echo ?))"
  echo "llama-mtmd-cli: $MTMD_CLI"
  echo "text=$TEXT mmproj=$MMPROJ image=$IMAGE threads=$THREADS n=$NPRED rounds=$ROUNDS"
  echo "prompt: $PROMPT"
} | tee "$OUTDIR/meta.txt" >&2

for r in $(seq 1 "$ROUNDS"); do
  echo "[compare_screen] round $r/$ROUNDS: tessera" >&2; run_tessera "$r"
  echo "[compare_screen] round $r/$ROUNDS: llama-mtmd-cli" >&2; run_llama "$r"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUTDIR/meta.txt" >&2
echo "[compare_screen] raw logs in $OUTDIR" >&2

python3 - "$OUTDIR" "$ROUNDS" <<'PY'
import re, sys, statistics as st
out, rounds = sys.argv[1], int(sys.argv[2])

def rd(p):
    try:
        with open(p, errors="replace") as f: return f.read()
    except FileNotFoundError: return ""

def ts(line):  # llama.cpp log timestamp "M.SS.mmm.uuu" -> seconds
    m = re.match(r"(\d+)\.(\d+)\.(\d+)\.(\d+) ", line)
    return None if not m else int(m[1]) * 60 + int(m[2]) + int(m[3]) / 1e3 + int(m[4]) / 1e6

def tessera(r):
    e, d = rd(f"{out}/tessera.{r}.err"), {}
    m = re.search(r"\[image (\d+)x(\d+) -> (\d+) tiles \(([^)]*)\) \| preprocess ([\d.]+) ms \| "
                  r"vision encode ([\d.]+) ms \(([\d.]+) ms/tile\) \| connector ([\d.]+) ms\]", e)
    if m:
        d.update(tiles=int(m[3]), grid=m[4], pre=float(m[5]), enc=float(m[6]),
                 enc_tile=float(m[7]), conn=float(m[8]))
        d["vis_total"] = d["enc"] + d["conn"]
    m = re.search(r"\[prefill: (\d+) tokens, ([\d.]+) ms, ([\d.]+) tok/s \| "
                  r"decode: (\d+) tokens, ([\d.]+) ms, ([\d.]+) tok/s\]", e)
    if m:
        d.update(pf_tok=int(m[1]), pf_ms=float(m[2]), pf_tps=float(m[3]),
                 dec_tok=int(m[4]), dec_ms=float(m[5]), dec_tps=float(m[6]))
        d["dec_mspt"] = d["dec_ms"] / max(1, d["dec_tok"])
    w = rd(f"{out}/tessera.{r}.wall_ms").strip()
    if w: d["wall"] = float(w)
    d["answer"] = rd(f"{out}/tessera.{r}.out").strip()
    return d

def llama(r):
    e, d = rd(f"{out}/llama.{r}.err"), {}
    m = re.search(r"preprocess: grid size: (\d+) x (\d+) \((\d+) tiles\)( \+ overview)?", e)
    if m:
        d["grid"] = f"{m[1]}x{m[2]} (cols x rows) grid" + (" + overview" if m[4] else "")
    enc = [float(x) for x in re.findall(r"mtmd batch encoding done in (\d+) ms", e)]
    toks = [int(x) for x in re.findall(r"decoding image batch \d+/\d+, n_tokens_batch = (\d+)", e)]
    imgdec = [float(x) for x in re.findall(r"image decoded \(batch \d+/\d+\) in (\d+) ms", e)]
    nslices = len(re.findall(r"mtmd_batch_encode_impl: encoding batch with (\d+) entries", e)) or len(enc)
    if enc:
        d.update(tiles=nslices, enc=sum(enc), enc_tile=sum(enc) / nslices, vis_total=sum(enc))
    if toks: d.update(img_tok=sum(toks), tok_per_tile=sorted(set(toks)))
    if imgdec: d["imgdec"] = sum(imgdec)
    m = re.search(r"prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens", e)
    if m:
        d.update(pe_ms=float(m[1]), pf_tok=int(m[2]))
        if enc:
            d["pf_ms"] = d["pe_ms"] - sum(enc)
            d["pf_tps"] = d["pf_tok"] / d["pf_ms"] * 1e3
    m = re.search(r"(?<!prompt )eval time =\s+([\d.]+) ms /\s+(\d+) runs", e)
    if m:
        d.update(dec_ms=float(m[1]), dec_tok=int(m[2]))
        d["dec_mspt"] = d["dec_ms"] / max(1, d["dec_tok"])
        d["dec_tps"] = 1e3 / d["dec_mspt"]
    lines = e.splitlines()
    t_a = t_b = None
    for i, ln in enumerate(lines):
        if "For normal use cases, please use" in ln: t_a = ts(ln)
        if "add_media: preproc_out has" in ln and t_b is None: t_b = ts(ln)
    if t_a is not None and t_b is not None: d["pre"] = (t_b - t_a) * 1e3
    w = rd(f"{out}/llama.{r}.wall_ms").strip()
    if w: d["wall"] = float(w)
    d["answer"] = rd(f"{out}/llama.{r}.out").strip()
    return d

T = [tessera(r) for r in range(1, rounds + 1)]
L = [llama(r) for r in range(1, rounds + 1)]

def med(runs, k):
    v = [x[k] for x in runs if k in x]
    return st.median(v) if v else None

def f(v, unit=" ms", nd=1):
    return "n/a" if v is None else f"{v:,.{nd}f}{unit}"

def ratio(a, b):
    return "" if a is None or b is None or b == 0 else f"{a / b:.2f}x"

def first(runs, k, default="n/a"):
    for x in runs:
        if k in x: return x[k]
    return default

rows = []
def row(name, kt, kl, unit=" ms", nd=1, note_t="", note_l="", cmp=True):
    a, b = med(T, kt) if kt else None, med(L, kl) if kl else None
    rows.append((name, (f(a, unit, nd) + note_t) if kt else (note_t or "-"),
                 (f(b, unit, nd) + note_l) if kl else (note_l or "-"),
                 ratio(a, b) if cmp else ""))

t_tiles, l_tiles = first(T, "tiles"), first(L, "tiles")
tpt = first(L, "tok_per_tile", [])
tok_tile = tpt[0] if len(tpt) == 1 else None
t_img_tok = t_tiles * tok_tile if isinstance(t_tiles, int) and tok_tile else None
rows.append(("tiles / slices", f"{t_tiles} ({first(T, 'grid')})", f"{l_tiles} ({first(L, 'grid')})", ""))
rows.append(("image tokens", (f"{t_img_tok} ({tok_tile}/tile, derived)" if t_img_tok else "n/a"),
             f"{first(L, 'img_tok')} ({'/'.join(map(str, tpt))}/slice)", ""))
rows.append(("prefill tokens (text + image)", str(first(T, "pf_tok")), str(first(L, "pf_tok")), ""))
row("preprocess", "pre", "pre", note_l=" (from log timestamps)")
row("vision encode, total", "enc", "enc", note_l=" (incl. connector)")
row("vision encode, per tile", "enc_tile", "enc_tile")
row("connector", "conn", None, note_l="in encode", cmp=False)
row("vision encode + connector", "vis_total", "vis_total")
row("LM prefill (all prompt tokens)", "pf_ms", "pf_ms", note_l=" (prompt eval - encode)")
row("  LM prefill rate", "pf_tps", "pf_tps", unit=" tok/s", cmp=False)
row("  of which image-chunk decodes", None, "imgdec", cmp=False)
row("llama 'prompt eval time' as printed", None, "pe_ms", cmp=False)
row("decode, per token", "dec_mspt", "dec_mspt", nd=2)
row("  decode rate", "dec_tps", "dec_tps", unit=" tok/s", cmp=False)
rows.append(("  decode tokens timed", str(first(T, "dec_tok")), f"{first(L, 'dec_tok')} (+1 sampled from prefill)", ""))
row("process wall time (incl. load)", "wall", "wall")

print(f"\n### tessera vs llama.cpp (llama-mtmd-cli), median of {rounds} interleaved rounds\n")
print("| phase | tessera | llama.cpp | tessera / llama.cpp |")
print("|---|---:|---:|---:|")
for r in rows: print("| " + " | ".join(r) + " |")
print("\n(ratio = tessera time / llama.cpp time: < 1 means tessera is faster)\n")
for name, runs in (("tessera", T), ("llama.cpp", L)):
    ans = [x["answer"] for x in runs]
    same = "same in all rounds" if len(set(ans)) <= 1 else "DIFFERS between rounds"
    print(f"{name} answer ({same}): {ans[0]!r}" if ans else f"{name}: no answer")
print("\nper-round (tessera enc/prefill/decode ms | llama enc/prefill/eval ms):")
for i in range(rounds):
    t, l = T[i], L[i]
    print(f"  round {i+1}: tessera {f(t.get('enc'),'')}/{f(t.get('pf_ms'),'')}/{f(t.get('dec_ms'),'')}"
          f" | llama {f(l.get('enc'),'')}/{f(l.get('pf_ms'),'')}/{f(l.get('dec_ms'),'')}")
PY
