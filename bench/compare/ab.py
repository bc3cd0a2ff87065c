#!/usr/bin/env python3
"""Two tessera builds, `tessera bench` alternated round by round, per-round ratios.

    python3 bench/compare/ab.py BASE_BIN NEW_BIN ROUNDS [tessera bench args...]
    e.g. python3 bench/compare/ab.py /tmp/base/build/tessera build/tessera 6 -t 2 -p 0 -n 64 -d 900 -r 3

On a shared VM whose speed moves by tens of percent between minutes, only ratios taken
within a round mean anything: each round runs both binaries back to back (the order flips
every round), and the summary is the median of the per-round ratios new/base with min..max.
"""
import json
import os
import statistics
import subprocess
import sys


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: ab.py BASE_BIN NEW_BIN ROUNDS [tessera bench args...]", file=sys.stderr)
        return 2
    base, new, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    args = sys.argv[4:]
    if not any(a in ("-m", "--model") for a in args):  # the default model, wherever each binary's tree is
        args = ["-m", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models",
                                   "SmolLM2-135M-Instruct.Q4_1.gguf")] + args
    res: dict = {}
    for r in range(rounds):
        order = (("base", base), ("new", new)) if r % 2 == 0 else (("new", new), ("base", base))
        for name, binary in order:
            p = subprocess.run([binary, "bench", "--json"] + args, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"ab.py: {binary} failed: {p.stderr.strip()}", file=sys.stderr)
                return 1
            for t in json.loads(p.stdout)["results"]:
                res.setdefault(t["test"], {}).setdefault(name, []).append(t["median"])
        print(f"round {r}: " + "  ".join(f"{t}: {v['new'][-1]:.1f}/{v['base'][-1]:.1f} = {v['new'][-1] / v['base'][-1]:.3f}"
                                         for t, v in res.items()), flush=True)
    for t, v in res.items():
        ratios = [a / b for a, b in zip(v["new"], v["base"])]
        print(f"{t}: new {statistics.median(v['new']):.1f}, base {statistics.median(v['base']):.1f}; "
              f"new/base per round {statistics.median(ratios):.3f} ({min(ratios):.3f}..{max(ratios):.3f}), "
              f"new faster in {sum(x > 1 for x in ratios)}/{len(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
