#!/usr/bin/env python3
"""tessera plan's predictions for the built-in models on Apple chips (modelled, not measured: this
machine's calibrated efficiencies carried to each chip's published bandwidth and compute).

  python3 bench/plan/apple_table.py DEVICE.json > table.md
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESSERA = os.path.join(ROOT, "build", "tessera")

CASES = [  # model, --weights, resolution flag
    ("smolvlm-256m", "q8_0", ["--longest-edge", "1024"]),
    ("smolvlm-500m", "q8_0", ["--longest-edge", "1024"]),
    ("qwen3-vl-2b", "q4_k", ["--max-pixels", "262144"]),
    ("qwen3-vl-4b", "q4_k", ["--max-pixels", "262144"]),
    ("qwen3-vl-8b", "q4_k", ["--max-pixels", "262144"]),
]
DEVICES = [("this", 0), ("m1", 8), ("m2-pro", 16), ("m3", 16), ("m4", 16), ("m4-max", 36)]


def main():
    calib = sys.argv[1]
    print("| model | weights | resolution | device | reserve MiB | vision ms | prefill ms | decode tok/s | TTFT new screen s | TTFT watched s | watching CPU (2 s cadence) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for model, w, res in CASES:
            for dev, mem in DEVICES:
                out = os.path.join(tmp, "p.json")
                cmd = [TESSERA, "plan", "-m", model, "--weights", w, "--calibration", calib, "--json", out, "--device", dev] + res
                if mem:
                    cmd += ["--memory-gb", str(mem)]
                subprocess.run(cmd, check=True, capture_output=True)
                p = json.load(open(out))
                ms = p["ms"]
                print(f"| {model} | {w} | {res[1]} | {p['device']} | {p['memory']['reserved'] / 2**20:.0f} | {ms['vision']:.0f} | "
                      f"{ms['prefill']:.0f} | {1e3 / ms['decode_per_token']:.1f} | {ms['ttft_cold'] / 1e3:.2f} | {ms['ttft_watched'] / 1e3:.2f} | "
                      f"{100 * p['watch_cpu_share']:.0f}% |")


if __name__ == "__main__":
    main()
