#!/usr/bin/env python3
"""Per-workload table of a bench/watch/run.sh output directory. The first frame of a session
has nothing to reuse (a cold start); the steady-state columns are over the frames after it."""
import json
import statistics
import sys
from pathlib import Path


def load(path):
    frames, summary = [], None
    for line in Path(path).read_text().splitlines():
        d = json.loads(line)
        if "summary" in d:
            summary = d["summary"]
        elif "skipped" not in d:
            frames.append(d)
    return frames, summary


def main():
    out, sessions = Path(sys.argv[1]), sys.argv[2:]
    print("| workload | mode | frames | encoder work / full (steady) | time-to-answer / full (steady, median) | bitwise = full | "
          "same greedy answer | next-token KL max | busy s per frame (steady) | CPU share at 1 fps |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in sessions:
        for mode in ("exact", "approx"):
            p = out / f"{s}.{mode}.jsonl"
            if not p.exists():
                continue
            fr, sm = load(p)
            steady = fr[1:] or fr
            enc = statistics.mean(f["savings"]["encoder_work"] for f in steady)
            ratio = statistics.median(f["savings"]["time_vs_full"] for f in steady)
            val = [f["validate"] for f in fr if "validate" in f]
            bit = sum(v["bitwise_equal"] for v in val)
            same = sum(v["same_answer"] for v in val)
            kl = max((v["next_token_kl"] for v in val), default=0)
            # busy seconds per frame in steady state = cores busy if a frame arrives every second
            share = statistics.mean(f["ms"]["total"] for f in steady) / 1000.0
            print(f"| {s} | {mode} | {len(fr)} | {enc:.2f} | {ratio:.2f} | {bit}/{len(val)} | {same}/{len(val)} | {kl:.2g} | "
                  f"{share:.2f} | {min(share, 1.0) * 100:.0f}%{' (saturated: frames queue)' if share > 1 else ''} |")


if __name__ == "__main__":
    main()
