#!/usr/bin/env python3
"""Roofline plot of one profiled request: every op of `tessera profile --json` placed at its
arithmetic intensity (FLOPs per byte moved) and achieved GFLOP/s, under the compute roof and
the DRAM bandwidth roof from the probe. Marker size: share of the request's time.

  build/tessera profile ... --json out/profile.json
  .peers/venv/bin/python bench/compare/roofline.py out/profile.json out/roofline.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main():
    src, dst = sys.argv[1], sys.argv[2]
    p = json.load(open(src))
    peak, bw = p["peaks"]["gflops"], p["peaks"]["dram_gbs"]
    ops = [o for o in p["ops"] if o["ms"] > 0 and o["flops"] > 0 and o["bytes"] > 0]
    total = sum(o["ms"] for o in p["ops"]) or 1
    fig, ax = plt.subplots(figsize=(9, 6))
    ridge = peak / bw
    ax.plot([1e-2, ridge, 1e4], [1e-2 * bw, peak, peak], "k-", lw=1.5, label=f"roof: {peak:.0f} GFLOP/s, {bw:.1f} GB/s (probe)")
    colors = {"compute-bound": "#2a6", "bandwidth-bound": "#26c", "overhead-bound": "#c43"}
    for o in ops:
        ai = o["flops"] / o["bytes"]
        ax.scatter(ai, o["gflops_per_s"], s=20 + 600 * o["ms"] / total, color=colors.get(o["verdict"], "#888"), alpha=0.6,
                   edgecolors="k", linewidths=0.3)
    for o in sorted(ops, key=lambda o: -o["ms"])[:12]:
        ax.annotate(o["op"], (o["flops"] / o["bytes"], o["gflops_per_s"]), fontsize=6, xytext=(4, 2), textcoords="offset points")
    for k, c in colors.items():
        ax.scatter([], [], color=c, label=k)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(f"tessera profile: {p['wall_ms']:.0f} ms wall, {p['peaks']['threads']} threads", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
