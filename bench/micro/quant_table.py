#!/usr/bin/env python3
"""Quantized matmul, tessera vs llama.cpp on the same shapes and threads: joins the JSON lines
of build/bench_quant and bench/peers/llamacpp_matmul.sh (for llama.cpp, the faster of its plain
and CPU_REPACK buffers, as llama-bench would load the weights) and prints the ratio; with a
third file (bench_quant --q8: 8-bit activations, llama.cpp's own numerics) adds that ratio.
Files may hold several rounds (quant_compare.sh ROUNDS=n: every case once per round, both engines
one after the other); a case's n-th line is its n-th round. Rates are medians over rounds, ratios
the median (min..max) of the per-round ratios, so a slow minute on this shared machine weighs
on both engines of that round alike.
  python3 bench/micro/quant_table.py TESSERA.jsonl LLAMACPP.jsonl [TESSERA_Q8.jsonl]"""
import json
import statistics
import sys


def load(path):
    """key -> list of per-round records; llama.cpp's plain and repacked lines of a round merged
    into the faster one."""
    rows = {}
    for line in open(path):
        d = json.loads(line)
        if "median_ms" not in d:
            continue
        key = (d["type"].lower(), d["M"], d["N"], d["K"], d["threads"])
        variant = str(d.get("repack", ""))
        rows.setdefault(key, {}).setdefault(variant, []).append(d)
    out = {}
    for key, variants in rows.items():
        n = min(len(v) for v in variants.values())
        out[key] = [min((v[r] for v in variants.values()), key=lambda d: d["median_ms"]) for r in range(n)]
    return out


def rate(recs):
    return statistics.median(r["gflops"] for r in recs), statistics.median(r["weight_gbs"] for r in recs)


def ratio(peer, ours):
    """median (min..max) over rounds of peer time / our time"""
    rs = [p["median_ms"] / o["median_ms"] for p, o in zip(peer, ours)]
    if not rs:
        return "-"
    med = f"{statistics.median(rs):.2f}"
    return med if len(rs) == 1 else f"{med} ({min(rs):.2f}..{max(rs):.2f})"


def main():
    t, l = load(sys.argv[1]), load(sys.argv[2])
    q = load(sys.argv[3]) if len(sys.argv) > 3 else None
    extra_h, extra_s = (" tessera q8-act GFLOP/s | GB/s | q8-act / llama.cpp |", "---|---|---|") if q else ("", "")
    print("| type | M | N | K | threads | tessera GFLOP/s | GB/s | llama.cpp GFLOP/s | GB/s | tessera / llama.cpp |" + extra_h)
    print("|---|---|---|---|---|---|---|---|---|---|" + extra_s)
    for key in sorted(t, key=lambda k: (k[0], k[4], k[1], k[2], k[3])):
        a, b = t[key], l.get(key)
        ga, wa = rate(a)
        lb = "- | -"
        if b:
            gb, wb = rate(b)
            lb = f"{gb:.1f} | {wb:.1f}"
        extra = ""
        if q:
            c = q.get(key)
            if c:
                gc, wc = rate(c)
                extra = f" {gc:.1f} | {wc:.1f} | " + (f"{ratio(b, c)} |" if b else "- |")
            else:
                extra = " - | - | - |"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {ga:.1f} | {wa:.1f} | {lb} | "
              f"{ratio(b, a) if b else '-'} |" + extra)


if __name__ == "__main__":
    main()
