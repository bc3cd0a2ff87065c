#!/usr/bin/env python3
"""Quality against size for the weight formats of a bench/eval/formats.sh folder: bits per
parameter of the whole file (x; the parameter count taken as the f16 reference's size / 2) against
the mean KL divergence from the reference (y, log scale), with the KL's standard error as bars.
Writes the data as CSV and the plot as SVG (matplotlib).
  python3 bench/eval/frontier_plot.py FORMATS_DIR OUT.csv OUT.svg [TITLE]
FORMATS_DIR holds REF's reference.bytes and, per type, T.json (tessera eval --json) and T.bytes.
Decode speed per format is not measured here (yet): the plot has no speed panel."""
import csv
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    d, out_csv, out_svg = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    title = sys.argv[4] if len(sys.argv) > 4 else str(d)
    ref_bytes = int((d / "reference.bytes").read_text())
    params = ref_bytes / 2  # f16 reference
    rows = []
    for b in sorted(d.glob("*.bytes")):
        t = b.stem
        if t == "reference" or not (d / f"{t}.json").exists():
            continue
        j = json.loads((d / f"{t}.json").read_text())
        size = int(b.read_text())
        rows.append({"format": t.upper(), "file_bytes": size, "bits_per_param": 8 * size / params,
                     "kld_mean": j["kld_mean"], "kld_err": j["kld_err"], "same_top": j["same_top"], "chunks": j["chunks"]})
    rows.sort(key=lambda r: r["bits_per_param"])
    with out_csv.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    xs, ys = [r["bits_per_param"] for r in rows], [r["kld_mean"] for r in rows]
    ax.errorbar(xs, ys, yerr=[r["kld_err"] for r in rows], fmt="o", capsize=3)
    for r in rows:
        ax.annotate(r["format"], (r["bits_per_param"], r["kld_mean"]), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("file bits per parameter")
    ax.set_ylabel("mean KL divergence from the reference (nats)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_svg)


if __name__ == "__main__":
    main()
