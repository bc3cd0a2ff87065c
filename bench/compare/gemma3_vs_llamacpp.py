#!/usr/bin/env python3
"""tessera vs llama.cpp on the second text family, Gemma 3 270M (Q4_K_M), side by side: the same
file, the same threads, the engines alternated within each round (A, B then B, A). Gemma 3's
local layers attend over a 512-token window and tessera caps its context there, so the tests
stay inside 512 positions: pp256, tg64, pp128 @ d256, tg64 @ d256. Prints a markdown table
(medians, ranges, the per-round ratio's median and range) and writes the raw samples as JSON.

  python3 bench/compare/gemma3_vs_llamacpp.py [--rounds 5] [-t 2] [--out out/compare/gemma3.json]

Needs build/tessera, the llama.cpp build (bench/peers/build_llamacpp.sh) and the model
(scripts/fetch_gemma3.sh).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models/gemma-3-270m-q4_k_m.gguf"
TESSERA = ROOT / "build/tessera"
LLAMA_BENCH = Path(os.environ.get("LLAMA_BIN", ROOT / ".peers/llama.cpp-build/bin")) / "llama-bench"
TESTS = [("pp256", 256, 0, 0), ("tg64", 0, 64, 0), ("pp128 @ d256", 128, 0, 256), ("tg64 @ d256", 0, 64, 256)]


def rate(engine, threads, p, n, d):
    if engine == "tessera":
        cmd = [TESSERA, "bench", "-m", MODEL, "-t", threads, "-r", 1, "--json", "-p", p, "-n", n, "-d", d]
        return json.loads(subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True).stdout)["results"][-1]["median"]
    cmd = [LLAMA_BENCH, "-m", MODEL, "-t", threads, "-r", 1, "-o", "json", "-p", p, "-n", n, "-d", d]
    return json.loads(subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True).stdout)[0]["avg_ts"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "out/compare/gemma3_vs_llamacpp.json"))
    a = ap.parse_args()
    for path, how in [(MODEL, "bash scripts/fetch_gemma3.sh"), (TESSERA, "bash scripts/setup.sh"), (LLAMA_BENCH, "bash bench/peers/build_llamacpp.sh")]:
        if not path.exists():
            sys.exit(f"error: {path} is missing (make it with: {how})")
    res = {}
    for rnd in range(a.rounds):
        for name, p, n, d in TESTS:
            for engine in (["tessera", "llama.cpp"] if rnd % 2 == 0 else ["llama.cpp", "tessera"]):
                res.setdefault(name, {}).setdefault(engine, []).append(rate(engine, a.threads, p, n, d))
    print(f"Gemma 3 270M Q4_K_M, {a.threads} threads, {a.rounds} rounds; t/s median (range)\n")
    print("| test | tessera | llama.cpp | tessera / llama.cpp per round |\n|---|---|---|---|")
    for name, *_ in TESTS:
        t, l = res[name]["tessera"], res[name]["llama.cpp"]
        r = [x / y for x, y in zip(t, l)]
        print(f"| {name} | {statistics.median(t):.1f} ({min(t):.1f}..{max(t):.1f}) | {statistics.median(l):.1f} ({min(l):.1f}..{max(l):.1f}) "
              f"| {statistics.median(r):.2f} ({min(r):.2f}..{max(r):.2f}) |")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    json.dump(res, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
