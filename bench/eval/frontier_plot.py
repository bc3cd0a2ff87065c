#!/usr/bin/env python3
"""Quality and speed against size for the weight formats of a bench/eval/formats.sh folder.
Left panel: bits per parameter of the whole file (x; the parameter count taken as the f16
reference's size / 2) against the mean KL divergence from the reference (y, log scale), with the
KL's standard error as bars. With --speed (a bench/eval/decode_speed.sh decode_speed.json), a right
panel: the same x against decode tokens/s, the median of the rounds with their min–max as bars,
one series per engine measured (tessera; tessera --q8-activations; llama.cpp).
Writes the data as CSV (one row per format, KL and speed columns; a cell is empty where that
format has no KL row or no speed row) and the plot as SVG (matplotlib).
  python3 bench/eval/frontier_plot.py FORMATS_DIR OUT.csv OUT.svg [TITLE] [--speed decode_speed.json] [--params N]
FORMATS_DIR holds the reference's reference.bytes and, per type, T.json (tessera eval --json) and
T.bytes; a format is matched to its speed row by name, case-insensitively (T.json's stem against
the speed row's "format"); --params N gives the parameter count where the reference is not f16.
Formats with KL but no speed appear only on the left, formats with speed but no KL (the f16
reference, llama.cpp's recipes) only on the right. Where a format has both, x is from T.bytes (the
speed row's file size is kept in the CSV as speed_file_bytes)."""
import argparse
import csv
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "frontier"  # fixed element ids: the same data gives the same SVG
import matplotlib.pyplot as plt  # noqa: E402

# speed series: decode_speed.json key, CSV prefix, legend label, marker
ENGINES = [("tessera", "tessera_tg", "tessera (fp32 activations, the default)", "o"),
           ("tessera_q8", "tessera_q8_tg", "tessera --q8-activations", "^"),
           ("llama", "llama_tg", "llama.cpp (llama-bench)", "s")]


def load_rows(d, speed_file, params=None):
    if not params:
        params = int((d / "reference.bytes").read_text()) / 2  # an f16 reference
    rows = {}
    for b in sorted(d.glob("*.bytes")):
        t = b.stem
        if t == "reference" or not (d / f"{t}.json").exists():
            continue
        j = json.loads((d / f"{t}.json").read_text())
        rows[t.upper()] = {"format": t.upper(), "file_bytes": int(b.read_text()), "kld_mean": j["kld_mean"], "kld_err": j["kld_err"],
                           "same_top": j["same_top"], "chunks": j["chunks"]}
    speed = json.loads(speed_file.read_text()) if speed_file else None
    if speed:
        for s in speed["rows"]:
            key = s["format"].upper()
            r = rows.setdefault(key, {"format": key, "file_bytes": s["file_bytes"]})
            r["speed_file"] = Path(s["file"]).name
            r["speed_file_bytes"] = s["file_bytes"]
            for eng, prefix, _, _ in ENGINES:
                if eng in s:
                    st = s[eng]
                    r.update({f"{prefix}_median": st["median"], f"{prefix}_min": st["min"], f"{prefix}_max": st["max"],
                              f"{prefix}_n": len(st["samples"])})
    for r in rows.values():
        r["bits_per_param"] = 8 * r["file_bytes"] / params
    return sorted(rows.values(), key=lambda r: (r["bits_per_param"], r["format"])), speed


def args_label(a, fmt):
    return dict(x.split("=", 1) for x in a.label).get(fmt, fmt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("formats_dir", type=Path)
    ap.add_argument("out_csv", type=Path)
    ap.add_argument("out_svg", type=Path)
    ap.add_argument("title", nargs="?")
    ap.add_argument("--speed", type=Path, help="decode_speed.json from bench/eval/decode_speed.sh")
    ap.add_argument("--label", action="append", default=[], metavar="FORMAT=TEXT", help="the speed panel's label for a format")
    ap.add_argument("--params", type=int, help="the model's parameter count (default: reference.bytes / 2, for an f16 reference)")
    a = ap.parse_args()
    rows, speed = load_rows(a.formats_dir, a.speed, a.params)
    title = a.title or str(a.formats_dir)
    fields = ["format", "file_bytes", "bits_per_param", "kld_mean", "kld_err", "same_top", "chunks"]
    if speed:
        fields += ["speed_file", "speed_file_bytes"]
        for eng, prefix, _, _ in ENGINES:
            if any(f"{prefix}_median" in r for r in rows):
                fields += [f"{prefix}_{k}" for k in ("median", "min", "max", "n")]
    with a.out_csv.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)

    fig, axes = plt.subplots(1, 2 if speed else 1, figsize=(11.5 if speed else 6.4, 4.4), squeeze=False)
    ax = axes[0][0]
    kl = [r for r in rows if "kld_mean" in r]
    ax.errorbar([r["bits_per_param"] for r in kl], [r["kld_mean"] for r in kl], yerr=[r["kld_err"] for r in kl], fmt="o", capsize=3)
    for r in kl:
        ax.annotate(r["format"], (r["bits_per_param"], r["kld_mean"]), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("file bits per parameter")
    ax.set_ylabel("mean KL divergence from the reference (nats)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    if speed:
        ax = axes[0][1]
        dodge = {"tessera": 0.99, "tessera_q8": 1.0, "llama": 1.01}  # series side by side at one x
        for eng, prefix, label, marker in ENGINES:
            sp = [r for r in rows if f"{prefix}_median" in r]
            if not sp:
                continue
            xs = [r["bits_per_param"] * dodge[eng] for r in sp]
            ys = [r[f"{prefix}_median"] for r in sp]
            err = [[y - r[f"{prefix}_min"] for y, r in zip(ys, sp)], [r[f"{prefix}_max"] - y for y, r in zip(ys, sp)]]
            ax.errorbar(xs, ys, yerr=err, fmt=marker, capsize=2, elinewidth=0.8, alpha=0.85, label=label)
        # one label per format, above its fastest median; formats at the same x alternate sides
        placed = []
        for r in rows:
            meds = [r[f"{p}_median"] for _, p, _, _ in ENGINES if f"{p}_median" in r]
            if not meds:
                continue
            left = sum(abs(x - r["bits_per_param"]) < 0.03 for x in placed) % 2 == 1
            placed.append(r["bits_per_param"])
            ax.annotate(args_label(a, r["format"]), (r["bits_per_param"], max(meds)), textcoords="offset points",
                        xytext=(-6 if left else 6, 6), ha="right" if left else "left", fontsize=7)
        ax.set_xscale("log")
        ticks = [4, 5, 6, 8, 12, 16]
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("file bits per parameter (log scale)")
        ax.set_ylabel("decode tokens/s")
        ax.set_ylim(bottom=0)
        ax.set_title(f"decode speed: {speed['test']}, {speed['threads']} threads;\nmedian and min–max of {speed['rounds']} interleaved "
                     f"rounds", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    # no creation date in an SVG, so that regenerating it from the same data changes nothing
    fig.savefig(a.out_svg, metadata={"Date": None} if a.out_svg.suffix == ".svg" else None)


if __name__ == "__main__":
    main()
