#!/usr/bin/env python3
"""Side-by-side prompt (pp) and generation (tg) speed of tessera and llama.cpp on the same GGUF
file and thread count, interleaved A, B, A, B so both see the same machine conditions.
Prints a markdown table of medians (min..max) and the tessera/llama.cpp ratio.

  python3 bench/peers/compare_llamacpp.py [-m MODEL] [-t 2] [-p 512] [-n 128] [--rounds 5]

Needs build/tessera (scripts/setup.sh) and the llama.cpp build (bench/peers/build_llamacpp.sh).
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tessera(args, test, n):
    cmd = [str(ROOT / "build/tessera"), "bench", "-m", args.model, "-t", str(args.threads), "-r", "1", "--json"]
    cmd += ["-p", str(n), "-n", "0"] if test == "pp" else ["-p", "0", "-n", str(n)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)[0]["samples_tps"][0]


def llama(args, test, n):
    cmd = [str(ROOT / ".peers/llama.cpp-build/bin/llama-bench"), "-m", args.model, "-t", str(args.threads),
           "-r", "1", "-o", "json"]
    cmd += ["-p", str(n), "-n", "0"] if test == "pp" else ["-p", "0", "-n", str(n)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)[0]["avg_ts"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tests = [("pp", args.n_prompt), ("tg", args.n_gen)]
    res = {(e, t): [] for e in ("tessera", "llama.cpp") for t, _ in tests}
    for r in range(args.rounds):
        for t, n in tests:
            res[("tessera", t)].append(tessera(args, t, n))
            res[("llama.cpp", t)].append(llama(args, t, n))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(f"model: {Path(args.model).name}, threads: {args.threads}, rounds: {args.rounds} (interleaved)\n")
    print("| test | tessera t/s median (min..max) | llama.cpp t/s median (min..max) | ratio of medians | per-round ratios median (min..max) |")
    print("|---|---|---|---|---|")
    for t, n in tests:
        a, b = res[("tessera", t)], res[("llama.cpp", t)]
        ratios = [x / y for x, y in zip(a, b)]
        print(f"| {t}{n} | {statistics.median(a):.1f} ({min(a):.1f}..{max(a):.1f}) | "
              f"{statistics.median(b):.1f} ({min(b):.1f}..{max(b):.1f}) | {statistics.median(a) / statistics.median(b):.2f} | "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f}) |")


if __name__ == "__main__":
    main()
