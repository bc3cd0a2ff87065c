#!/usr/bin/env python3
"""Markdown tables of bench_dense medians: bench/micro/table.py out/bench_dense.json"""
import json
import sys
from collections import defaultdict

PREFILL = [("tessera_gemm_f32", "tessera gemm f32"), ("tessera_matmul_f32", "tessera matmul f32"),
           ("tessera_matmul_f16", "tessera matmul f16"), ("tessera_matmul_bf16", "tessera matmul bf16"),
           ("dnnl_f32", "oneDNN f32"), ("dnnl_f32_packed", "oneDNN f32 packed"),
           ("dnnl_bf16_packed", "oneDNN bf16 packed"), ("openblas_f32", "OpenBLAS f32")]
DECODE = [("tessera_matmul_f32", "tessera f32"), ("tessera_matmul_f16", "tessera f16"),
          ("tessera_matmul_bf16", "tessera bf16"), ("tessera_matmul_q8_0", "tessera q8_0"),
          ("tessera_matmul_q4_1", "tessera q4_1"), ("dnnl_f32", "oneDNN f32"), ("openblas_f32", "OpenBLAS f32")]


def load(path):
    with open(path) as f:
        doc = json.load(f)
    med, cv = {}, {}
    for b in doc["benchmarks"]:
        if b.get("run_type") != "aggregate":
            continue
        parts = b["run_name"].split("/")  # kind/kernel/shape/t:N[/real_time]
        key = (parts[0], parts[1], parts[2], int(parts[3].split(":")[1]))
        if b["aggregate_name"] == "median":
            med[key] = b
        elif b["aggregate_name"] == "cv":
            cv[key] = b.get("real_time", 0.0)
    return doc.get("context", {}), med, cv


def fmt(v, digits=1):
    return "–" if v is None else f"{v:.{digits}f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "–"


def shape_key(s):
    return tuple(int(x) for x in s.split("x"))


def table(kind, kernels, counter, med, cv, ratio_base, peer_ratios):
    shapes = sorted({(k[2], k[3]) for k in med if k[0] == kind}, key=lambda st: (shape_key(st[0]), st[1]))
    if not shapes:
        return []
    head = ["shape", "t"] + [label for _, label in kernels] + \
           [f"{ratio_base[1]} / {label}" for _, label in peer_ratios] + [f"{ratio_base[1]} frac_peak", "max cv %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for shape, t in shapes:
        val = {}
        for k, _ in kernels:
            b = med.get((kind, k, shape, t))
            val[k] = b.get(counter) if b else None
        base = med.get((kind, ratio_base[0], shape, t))
        fp = base.get("frac_peak") if base else None
        cvs = [cv.get((kind, k, shape, t), 0.0) for k, _ in kernels]
        row = [shape, str(t)] + [fmt(val[k]) for k, _ in kernels] + \
              [ratio(val[ratio_base[0]], val[k]) for k, _ in peer_ratios] + \
              [fmt(fp, 2), fmt(100 * max(cvs), 0)]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "out/bench_dense.json"
    ctx, med, cv = load(path)
    reps = next((b.get("repetitions") for b in med.values()), "?")
    out = [f"bench_dense medians of {reps} repetitions — {path}", ""]
    for k in ("host_name", "date", "num_cpus", "load_avg", "tessera_isa", "onednn", "openblas_corename",
              "openblas_coretype_env", "peak_t1", "peak_t2", "decode_working_set_mib", "self_check"):
        if k in ctx:
            out.append(f"- {k}: {ctx[k]}")
    out += ["", "Prefill / vision GEMM, GFLOP/s (M×N×K; y = x·Wᵀ, W stored N×K). "
            "frac_peak = tessera gemm f32 / (probe 1-thread fp32_fma × t).", ""]
    out += table("prefill", PREFILL, "GFLOP/s", med, cv, ("tessera_gemm_f32", "tessera gemm"),
                 [("dnnl_f32", "oneDNN f32"), ("dnnl_f32_packed", "oneDNN f32 packed"), ("openblas_f32", "OpenBLAS")])
    out += ["", "Decode (M=1), GB/s of weight bytes (N×K). frac_peak = tessera f32 / probe read_dram at t threads.", ""]
    out += table("decode", DECODE, "GB/s", med, cv, ("tessera_matmul_f32", "tessera f32"),
                 [("dnnl_f32", "oneDNN"), ("openblas_f32", "OpenBLAS")])
    print("\n".join(out))


if __name__ == "__main__":
    main()
