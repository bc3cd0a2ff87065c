#!/usr/bin/env python3
"""tessera vs llama.cpp, side by side: the same tests on the same GGUF files with the same
threads, interleaved A, B, A, B so both see the same machine conditions. Prints the medians
with their spread and the ratio, writes JSON and a PNG bar chart (matplotlib).

Tests (llama-bench's, plus vision):
  pp512, tg128, pp512 @ d512      tessera bench  vs  llama-bench (same model file): tessera's default
                                  8-bit activations (llama.cpp's own W4A8 numerics); with --f32 also
                                  tessera --f32-activations vs the same llama-bench runs
  vision encode per 512 tile      tessera run    vs  llama-mtmd-cli (SmolVLM chat template) on a 1920x1080
                                  screenshot (13 tiles), once per mmproj file: by default the f16 one
                                  (the type llama.cpp users download) and its Q8_0 conversion. A quantized
                                  mmproj's layers run on 8-bit activations by default where that is the fast
                                  path (AVX-512 VNNI without AMX), as llama.cpp runs them, and an f16 one's
                                  too, quantized to Q8_0 at load, where that beats bf16 (AMD Zen 4); with --q8
                                  also tessera --q8-vision (8-bit layers on any CPU, any mmproj) and
                                  --f32-activations (the float weights and activations: the vision path's
                                  bf16/fp16/fp32); with --fp32-vision also tessera
                                  --fp32-vision where its default is the bf16 vision path (AMX, AMD Zen 4+)
  screenshot question             the same runs, end to end (preprocess, encode, prefill, answer)

  python3 bench/compare/compare.py [--rounds 5] [-t 2] [--f32] [--q8] [--fp32-vision] [--no-vision | --no-text]
      [--mmproj M.gguf ...] [--out out/compare]

Needs build/tessera (scripts/setup.sh) and the llama.cpp build (bench/peers/build_llamacpp.sh). The
vision tests use the full-size SmolVLM-256M-shaped pair in .peers/smolvlm-full/; when it is missing it
is made here (tessera vlm-init: the real SmolLM2 text weights, a seeded random SigLIP-B/16 in f16;
tessera convert --type q8_0 for the Q8_0 mmproj). It prints which tests ran and writes the machine's
fingerprint (CPU, ISA class, both builds) beside the results.
"""
import argparse
import os
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAIR = ROOT / ".peers/smolvlm-full"
TESSERA = ROOT / "build/tessera"
VISION_MODES = set()  # the vision precision tessera ran in ("bf16 (default)", "fp32 (--fp32-vision)", ...)
LLAMA_BIN = Path(os.environ.get("LLAMA_BIN", ROOT / ".peers/llama.cpp-build/bin"))  # NO_AMX build: see build_llamacpp.sh


def run(cmd):
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True)


# ---- text tests: t/s, higher is better -------------------------------------------------
def tessera_text(a, p, n, d, f32=False):
    out = run([TESSERA, "bench", "-m", a.model, "-t", a.threads, "-r", 1, "--json", "-p", p, "-n", n, "-d", d]
              + (["--f32-activations"] if f32 else [])).stdout
    return json.loads(out)["results"][-1]["median"]


def llama_text(a, p, n, d):
    out = run([LLAMA_BIN / "llama-bench", "-m", a.model, "-t", a.threads, "-r", 1, "-o", "json", "-p", p, "-n", n, "-d", d]).stdout
    return json.loads(out)[0]["avg_ts"]


# ---- vision tests: ms, lower is better --------------------------------------------------
def tessera_image(a, image, q8=False, fp32=False, float_act=False):
    flags = (["--q8-vision"] if q8 else []) + (["--fp32-vision"] if fp32 else []) + (["--f32-activations"] if float_act else [])
    e = run([TESSERA, "run", "-m", a.text, "--mmproj", a.mmproj, "--image", image, "-p", a.question, "-n", a.n_answer,
             "-t", a.threads, "--temp", 0] + flags).stderr
    VISION_MODES.add(f"{gguf_type(a.mmproj)}: " + re.search(r"\| ([\w+]+) vision \|", e)[1] + f" ({' '.join(flags) or 'default'})")
    m = re.search(r"-> (\d+) tiles .*vision encode ([\d.]+) ms \(([\d.]+) ms/tile\) \| connector ([\d.]+) ms", e)
    tiles, enc = int(m[1]), float(m[2]) + float(m[4])
    m2 = re.search(r"\[prefill: (\d+) tokens, ([\d.]+) ms, [\d.]+ tok/s \| decode: (\d+) tokens, ([\d.]+) ms", e)
    m3 = re.search(r"preprocess ([\d.]+) ms", e)
    return {"encode_ms": enc, "tile_ms": enc / tiles, "total_ms": float(m3[1]) + enc + float(m2[2]) + float(m2[4])}


def llama_image(a, image):
    t0 = time.monotonic()
    e = run([LLAMA_BIN / "llama-mtmd-cli", "-m", a.text, "--mmproj", a.mmproj, "--image", image, "-p", a.question,
             "--chat-template", "smolvlm",
             "-n", a.n_answer, "-t", a.threads, "--temp", 0, "--seed", 1, "--perf", "-v"]).stderr
    wall = (time.monotonic() - t0) * 1e3
    encs = [float(x) for x in re.findall(r"mtmd batch encoding done in (\d+) ms", e)]
    enc = sum(encs)
    slices = len(re.findall(r"mtmd_batch_encode_impl: encoding batch with (\d+) entries", e)) or len(encs)
    pe = re.search(r"prompt eval time =\s+([\d.]+) ms", e)
    ev = re.search(r"(?<!prompt )eval time =\s+([\d.]+) ms", e)
    # llama.cpp's prompt eval time includes the image encoding
    total = (float(pe[1]) if pe else wall) + (float(ev[1]) if ev else 0)
    return {"encode_ms": enc, "tile_ms": enc / max(1, slices), "total_ms": total}


def summarize(name, unit, a, b):
    higher = unit == "t/s"
    ratios = [(x / y if higher else y / x) for x, y in zip(a, b)]  # > 1: tessera faster
    return {"test": name, "unit": unit, "tessera": a, "llama.cpp": b, "tessera_median": statistics.median(a),
            "llama_median": statistics.median(b), "speedup_median": statistics.median(ratios),
            "speedup_min": min(ratios), "speedup_max": max(ratios)}


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4.5))
    names = [r["test"] for r in rows]
    sp = [r["speedup_median"] for r in rows]
    lo = [r["speedup_median"] - r["speedup_min"] for r in rows]
    hi = [r["speedup_max"] - r["speedup_median"] for r in rows]
    bars = ax.bar(range(len(rows)), sp, yerr=[lo, hi], capsize=4, color=["#3a7" if s >= 1 else "#c54" for s in sp])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(rows)), names, rotation=15, ha="right")
    ax.set_ylabel("tessera speed / llama.cpp speed\n(median of interleaved rounds, bars: min..max)")
    ax.set_title(title, fontsize=10)
    for b, r in zip(bars, rows):
        ax.text(b.get_x() + b.get_width() / 2, b.get_height() + 0.03, f"{r['speedup_median']:.2f}x", ha="center", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def ensure_pair():
    """The default full-size SmolVLM pair: made with tessera vlm-init (f16 mmproj) and convert (Q8_0) when missing."""
    text, f16, q8 = PAIR / "text.gguf", PAIR / "mmproj.gguf", PAIR / "mmproj-q8_0.gguf"
    PAIR.mkdir(parents=True, exist_ok=True)
    if not text.exists() or not f16.exists():
        print(f"making the SmolVLM-256M-shaped pair in {PAIR} (tessera vlm-init)", file=sys.stderr)
        run([TESSERA, "vlm-init", "--out-text", text, "--out-mmproj", f16])
    if not q8.exists():
        print(f"making {q8.name} (tessera convert --type q8_0)", file=sys.stderr)
        run([TESSERA, "convert", "-m", f16, "-o", q8, "--type", "q8_0"])


def gguf_type(path):
    """The mmproj's weight type as the file name says it (vlm-init's is f16)."""
    m = re.search(r"(f16|f32|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k)", Path(path).name.lower())
    return m[1] if m else "f16"


def fingerprint(a):
    """The machine and both builds: tessera's bench fingerprint, the CPU model and ISA class, llama.cpp's build."""
    fp = json.loads(run([TESSERA, "bench", "-p", 1, "-n", 0, "-d", 0, "-r", 1, "--json"]).stdout)["machine"]
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
        flags = next(l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags"))
        fp["cpu_model"] = model
        fam = {k: next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.split(":")[0].strip() == k)
               for k in ("cpu family", "model", "stepping")}
        fp["cpu_family_model_stepping"] = f"{fam['cpu family']}/{fam['model']}/{fam['stepping']}"
        fp["isa_class"] = ("AMX" if "amx_tile" in flags else "AVX-512" if "avx512f" in flags else
                           "AVX2" if "avx2" in flags else "other")
    except (OSError, StopIteration):
        pass
    try:
        lb = json.loads(run([LLAMA_BIN / "llama-bench", "-m", a.model, "-t", a.threads, "-r", 1, "-o", "json", "-p", 8, "-n", 0]).stdout)[0]
        fp["llama.cpp"] = {k: lb.get(k) for k in ("build_commit", "build_number", "cpu_info", "backends")}
    except (subprocess.CalledProcessError, OSError, ValueError, IndexError):
        fp["llama.cpp"] = None
    return fp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--text", default=str(PAIR / "text.gguf"), help="SmolVLM text GGUF (vision tests)")
    ap.add_argument("--mmproj", action="append", help="mmproj GGUF, repeatable (default: the pair's f16 and Q8_0 files, made when missing)")
    ap.add_argument("--screenshot", default=str(ROOT / "tests/fixtures/vision/screens/desktop_1920x1080.png"))
    ap.add_argument("--question", default="What is the user working on?")
    ap.add_argument("--n-answer", type=int, default=16)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-vision", action="store_true")
    ap.add_argument("--fp32-vision", action="store_true",
                    help="also run tessera's vision encoder with --fp32-vision (where bf16 is its default: AMX, AMD Zen 4+)")
    ap.add_argument("--no-text", action="store_true", help="only the vision tests")
    ap.add_argument("--q8", action="store_true", help="also run tessera's vision with --q8-vision and with --f32-activations "
                    "(the mmproj's layers on 8-bit activations, a float one quantized to Q8_0 at load, and on its float "
                    "path: whichever is not the default)")
    ap.add_argument("--f32", action="store_true", help="also run tessera's text tests with --f32-activations")
    ap.add_argument("--out", default=str(ROOT / "out/compare"))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    ran, skipped = [], []
    if not a.no_vision and not a.mmproj:
        if Path(a.text) == PAIR / "text.gguf":
            ensure_pair()
        a.mmproj = [str(PAIR / "mmproj.gguf"), str(PAIR / "mmproj-q8_0.gguf")]
    mmprojs = [] if a.no_vision else [m for m in (a.mmproj or []) if Path(m).exists()]
    if a.no_vision:
        skipped.append("vision (--no-vision)")
    for m in a.mmproj or []:
        if not Path(m).exists():
            skipped.append(f"vision with {m} (no such file)")
    if not Path(a.text).exists():
        skipped.append(f"vision (no text GGUF {a.text})")
        mmprojs = []
    text_tests = [] if a.no_text else [("pp512", 512, 0, 0), ("tg128", 0, 128, 0), ("pp512 @ d512", 512, 0, 512)]
    res = {name: ([], []) for name, *_ in text_tests}
    if a.f32:
        for name, *_ in text_tests:
            res[name + " (f32 act)"] = ([], [])
    def vkeys(mm):
        t = gguf_type(mm)
        return f"vision encode per 512 tile, {t} mmproj", f"screenshot question (total), {t} mmproj"
    for mm in mmprojs:
        for k in vkeys(mm):
            res[k] = ([], [])
            if a.q8:
                res[k + " (q8 vision)"] = ([], [])
                res[k + " (float act)"] = ([], [])
            if a.fp32_vision:
                res[k + " (fp32 vision)"] = ([], [])
    for r in range(a.rounds):
        for name, p, n, d in text_tests:
            res[name][0].append(tessera_text(a, p, n, d))
            res[name][1].append(llama_text(a, p, n, d))
            if a.f32:
                res[name + " (f32 act)"][0].append(tessera_text(a, p, n, d, f32=True))
                res[name + " (f32 act)"][1].append(res[name][1][-1])
        for mm in mmprojs:
            a.mmproj = mm  # tessera_image / llama_image read a.mmproj
            tile, total = vkeys(mm)
            ta, la = tessera_image(a, a.screenshot), llama_image(a, a.screenshot)
            res[tile][0].append(ta["tile_ms"])
            res[tile][1].append(la["tile_ms"])
            res[total][0].append(ta["total_ms"])
            res[total][1].append(la["total_ms"])
            for tag, on, kw in ((" (q8 vision)", a.q8, {"q8": True}), (" (float act)", a.q8, {"float_act": True}),
                                (" (fp32 vision)", a.fp32_vision, {"fp32": True})):
                if on:
                    tv = tessera_image(a, a.screenshot, **kw)
                    res[tile + tag][0].append(tv["tile_ms"])
                    res[tile + tag][1].append(la["tile_ms"])
                    res[total + tag][0].append(tv["total_ms"])
                    res[total + tag][1].append(la["total_ms"])
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    rows = [summarize(k, "t/s" if k.startswith(("pp", "tg")) else "ms", v[0], v[1]) for k, v in res.items()]
    fp = fingerprint(a)
    ran = [r["test"] for r in rows]
    title = (f"tessera vs llama.cpp, {a.threads} threads, {a.rounds} interleaved rounds, {fp.get('cpu_model', fp['cpu'])}"
             f" [{fp.get('isa_class', '?')}] ({fp['commit']})")
    print(f"{title}\nmodel: {Path(a.model).name}; vision: {Path(a.text).name} + {', '.join(Path(m).name for m in mmprojs) or 'none'}")
    print(f"tests run: {', '.join(ran) or 'none'}")
    if VISION_MODES:
        print(f"tessera's vision ran in: {', '.join(sorted(VISION_MODES))}")
    print(f"skipped: {'; '.join(skipped) or 'none'}\n")
    print("| test | unit | tessera median (min..max) | llama.cpp median (min..max) | tessera speed-up: median (min..max) |")
    print("|---|---|---|---|---|")
    for r in rows:
        t, l = r["tessera"], r["llama.cpp"]
        print(f"| {r['test']} | {r['unit']} | {statistics.median(t):.1f} ({min(t):.1f}..{max(t):.1f}) | "
              f"{statistics.median(l):.1f} ({min(l):.1f}..{max(l):.1f}) | {r['speedup_median']:.2f}x "
              f"({r['speedup_min']:.2f}..{r['speedup_max']:.2f}) |")
    (out / "compare.json").write_text(json.dumps({"machine": fp, "threads": a.threads, "rounds": a.rounds, "tests_run": ran,
                                                 "skipped": skipped, "vision_modes": sorted(VISION_MODES), "rows": rows}, indent=1))
    (out / "fingerprint.json").write_text(json.dumps(fp, indent=1))
    try:  # the plot is optional: matplotlib lives in the reference venv, not in every python3
        plot(rows, out / "compare.png", title)
        print(f"\nwrote {out / 'compare.json'} and {out / 'compare.png'}", file=sys.stderr)
    except ImportError:
        print(f"\nwrote {out / 'compare.json'} (no plot: matplotlib is not installed)", file=sys.stderr)


if __name__ == "__main__":
    main()
