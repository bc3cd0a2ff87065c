#!/usr/bin/env python3
"""Quantized matmul, tessera vs llama.cpp on the same shapes and threads: joins the JSON lines
of build/bench_quant and bench/peers/llamacpp_matmul.sh (for llama.cpp, the faster of its plain
and CPU_REPACK buffers, as llama-bench would load the weights) and prints the ratio; with a
third file (bench_quant --q8: 8-bit activations, llama.cpp's own numerics) adds that ratio.
  python3 bench/micro/quant_table.py TESSERA.jsonl LLAMACPP.jsonl [TESSERA_Q8.jsonl]"""
import json
import sys


def load(path):
    rows = {}
    for line in open(path):
        d = json.loads(line)
        if "median_ms" not in d:
            continue
        key = (d["type"].lower(), d["M"], d["N"], d["K"], d["threads"])
        if key not in rows or d["median_ms"] < rows[key]["median_ms"]:
            rows[key] = d
    return rows


def main():
    t, l = load(sys.argv[1]), load(sys.argv[2])
    q = load(sys.argv[3]) if len(sys.argv) > 3 else None
    extra_h, extra_s = (" tessera q8-act GFLOP/s | GB/s | q8-act / llama.cpp |", "---|---|---|") if q else ("", "")
    print("| type | M | N | K | threads | tessera GFLOP/s | GB/s | llama.cpp GFLOP/s | GB/s | tessera / llama.cpp |" + extra_h)
    print("|---|---|---|---|---|---|---|---|---|---|" + extra_s)
    for key in sorted(t, key=lambda k: (k[0], k[4], k[1], k[2], k[3])):
        a = t[key]
        b = l.get(key)
        ratio = f"{b['median_ms'] / a['median_ms']:.2f}" if b else "-"
        lb = f"{b['gflops']:.1f} | {b['weight_gbs']:.1f}" if b else "- | -"
        extra = ""
        if q:
            c = q.get(key)
            extra = (f" {c['gflops']:.1f} | {c['weight_gbs']:.1f} | " + (f"{b['median_ms'] / c['median_ms']:.2f} |" if b else "- |")
                     if c else " - | - | - |")
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {a['gflops']:.1f} | {a['weight_gbs']:.1f} | {lb} | {ratio} |" + extra)


if __name__ == "__main__":
    main()
