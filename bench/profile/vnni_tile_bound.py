#!/usr/bin/env python3
"""What a prefill tile's own instructions allow: the bound, per weight type, of `matmul_q8` on
AVX-512 VNNI (src/kernels/x86/matmul_q8_vnni.cpp) against the probe's int8 roof.

The file is compiled to assembly with the build's flags; in each type's `q8_panels` the loop that is the 8-token prefill tile's block step (the shortest loop holding at least 64 of them). On the Xeons here `vpdpbusd` and
the other vector ALU ops (unpacking, int->float conversion, the scale multiplies and FMAs) share
ports 0 and 5, two per cycle (the probe's one-thread VNNI rate, 2.1 `vpdpbusd` per cycle, says
so; llvm-mca's Sapphire Rapids model puts `vpdpbusd` on port 0 alone, which this machine's rate
contradicts). So the tile runs at most at vpdpbusd / (vpdpbusd + other ALU ops) of the roof,
whatever the memory does. Register copies and broadcast loads are not counted (move
elimination, load ports) and neither are broadcasts from memory; `vcvtph2ps` counts twice; a
`vpbroadcastd` from a general register counts once.

  python3 bench/profile/vnni_tile_bound.py [--build build] [--cxx g++]
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TYPES = {2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K"}
FREE = {"vmovdqa64", "vmovdqu64", "vmovaps", "vmovups", "vmovdqa32", "vmovdqu8", "vmovd", "vpbroadcastd (load)",
        "vbroadcastss (load)"}
FLAGS = ["-O3", "-DNDEBUG", "-ffp-contract=off", "-std=c++20", "-DTESSERA_HAVE_AVX512=1", "-mavx512f", "-mavx512bw",
         "-mavx512vl", "-mavx512dq", "-mavx512vnni", "-mfma", "-mf16c", "-mbmi2"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="a configured build folder (its layers/ headers)")
    ap.add_argument("--cxx", default="g++")
    a = ap.parse_args()
    inc = [f"-I{os.path.join(a.build, 'layers', d)}" for d in ("kernels", "core")]
    if not os.path.isdir(os.path.join(a.build, "layers", "kernels")):
        sys.exit(f"vnni_tile_bound: {a.build} is not a configured build folder (no layers/kernels)")
    with tempfile.TemporaryDirectory() as tmp:
        asm = os.path.join(tmp, "vnni.s")
        r = subprocess.run([a.cxx, *FLAGS, *inc, "-S", "-o", asm, os.path.join(ROOT, "src/kernels/x86/matmul_q8_vnni.cpp")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("vnni_tile_bound: compiling failed: " + r.stderr.strip().splitlines()[-1])
        src = open(asm).read().split("\n")
    head = re.compile(r"^_ZN7tessera6avx51212_GLOBAL__N_19q8_panelsILNS_5DTypeE(\d+)EEEv")
    starts = [(i, int(m.group(1))) for i, l in enumerate(src) if (m := head.match(l))]
    if not starts:
        sys.exit("vnni_tile_bound: no q8_panels<T> found in the assembly")
    print("| type | vpdpbusd per block step | other port-0/5 ops | bound (of the VNNI roof) | the other ops |")
    print("|---|---|---|---|---|")
    for k, (a0, t) in enumerate(starts):
        lines = src[a0:starts[k + 1][0] if k + 1 < len(starts) else len(src)]
        labels = {m.group(1): i for i, l in enumerate(lines) if (m := re.match(r"^(\.L\d+):", l))}
        best = None
        for i, l in enumerate(lines):
            m = re.match(r"\s+j\w+\s+(\.L\d+)", l)
            if m and m.group(1) in labels and labels[m.group(1)] < i:
                body = lines[labels[m.group(1)]:i + 1]
                n = sum("vpdpbusd" in x for x in body)
                # the 8-token tile's block step: the shortest loop with at least 64 vpdpbusd
                if n >= 64 and (best is None or len(body) < len(best[1])):
                    best = (n, body)
        if best is None:
            print(f"| {TYPES.get(t, t)} | no loop with 64 vpdpbusd found | | | |")
            continue
        n, body = best
        ops = collections.Counter()
        for x in (y.strip() for y in body):
            if not x.startswith("v"):
                continue
            op = x.split()[0]
            if op in ("vpbroadcastd", "vbroadcastss") and "(" in x:
                op += " (load)"  # a broadcast from memory is a load uop only
            ops[op] += 1
        other = sum(c for o, c in ops.items() if o not in FREE and o != "vpdpbusd") + ops.get("vcvtph2ps", 0)
        rest = ", ".join(f"{o} {c}" for o, c in sorted(ops.items()) if o != "vpdpbusd" and o not in FREE)
        print(f"| {TYPES.get(t, t)} | {n} | {other} | {n / (n + other):.0%} | {rest} |")


if __name__ == "__main__":
    main()
