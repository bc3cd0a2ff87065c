#!/usr/bin/env python3
"""Decode against the bandwidth roof of the bytes it reads, measured in the same minute: rounds of
`tessera probe --read-bytes B` (the 2-thread read rate over a buffer of B bytes, B = the bytes one
decoded token reads, split across the threads; and the DRAM rate), `tessera bench` tgN (one
repetition per binary, order shuffled), then the probe again. A round's roof is the mean of the
read_set rates before and after it; its fraction is decode t/s x bytes read per token / that roof.
The bytes per token come from one `tessera profile` of the same decode (every decode op's bytes,
weights and KV cache, divided by the tokens).

The roof is the working set's: a model whose bytes per token fit the last-level cache (SmolLM2's
101 MB on a Xeon with a 260 MiB L3) is read at the L3 rate, not DRAM's; one that does not (a 2B
model's 1.1 GB) at DRAM's. The DRAM fraction is reported beside it. On these shared VMs the host's
DRAM rate moves between 11 and 55 GB/s from one minute to the next, so a roof measured once
(models/probe.json) makes the fraction a statement about the calibration minute; here each round
carries its own.

  python3 bench/compare/decode_roof.py --rounds 7 --out bench/results/decode_roof_DATE_CLASS \
      [--base /tmp/wt_base/build/tessera] [--model M] [--n 128] [--threads 2] [--isa avx2] [--depth 900]

--depth D decodes after D cached positions (`tessera bench -d D`; the bytes per token profiled after
a raw prompt of about D tokens), where the KV cache adds to the bytes read: SmolVLM's answers start
after ~900 tokens.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"decode_roof: {' '.join(cmd)} failed: {r.stderr.strip().splitlines()[-1:]}")
    return r.stdout


def read_gbs(tessera, threads, set_bytes, tmp):
    """(read_set, read_dram) at `threads` threads, GB/s."""
    run([tessera, "probe", "-t", str(threads), "-r", "3", "--read-bytes", str(int(set_bytes)), "-o", tmp])
    got = {m["name"]: m["median"] for m in json.load(open(tmp))["probe"] if m["threads"] == threads}
    if "read_set" not in got or "read_dram" not in got:
        sys.exit("decode_roof: the probe wrote no read_set / read_dram row")
    return got["read_set"], got["read_dram"]


def decode_tps(binary, args):
    cmd = [binary, "bench", "-t", str(args.threads), "-p", "0", "-n", str(args.n), "-d", str(args.depth), "-r", "1", "--json"]
    if args.model:
        cmd += ["-m", args.model]
    if args.isa:
        cmd += ["--isa", args.isa]
    out = json.loads(run(cmd))
    want = f"tg{args.n}" + (f" @ d{args.depth}" if args.depth else "")
    for r in out["results"]:
        if r["test"] == want:
            return r["median"], out["machine"]
    sys.exit(f"decode_roof: no {want} row from {binary}")


def bytes_per_token(binary, args, tmp):
    prompt = "Write a long story about a robot."
    if args.depth:  # 14 tokens a sentence in SmolLM2's tokenizer; raw, so the prompt is all there is
        prompt = "The quick brown fox jumps over the lazy dog near the river bank. " * max(1, round(args.depth / 14))
    cmd = [binary, "profile", "-t", str(args.threads), "-n", str(args.n), "-p", prompt, "--json", tmp] + (["--raw"] if args.depth else [])
    if args.model:
        cmd += ["-m", args.model]
    if args.isa:
        cmd += ["--isa", args.isa]
    run(cmd)
    p = json.load(open(tmp))
    ops = [o for o in p["ops"] if o["op"].startswith("decode / ")]
    tokens = max(o["calls"] for o in ops if "lm_head" in o["op"] or "output" in o["op"])
    return sum(o["bytes"] for o in ops) / tokens, tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build", "tessera"))
    ap.add_argument("--base", help="a second tessera binary, measured in the same rounds")
    ap.add_argument("--model")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--isa", help="cap tessera's kernels (as --isa avx2 on an AVX-512 machine: the AVX2 proxy)")
    ap.add_argument("--depth", type=int, default=0, help="cached positions before the decode (bench -d)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tmp = os.path.join(args.out, ".probe.json")
    bpt, profiled = bytes_per_token(args.tessera, args, os.path.join(args.out, "profile.json"))
    bins = {"tessera": args.tessera}
    if args.base:
        bins["base"] = args.base
    rounds, machine = [], None
    for i in range(args.rounds):
        before, dram_before = read_gbs(args.tessera, args.threads, bpt, tmp)
        order = list(bins)
        random.shuffle(order)
        tps = {}
        for name in order:
            tps[name], fp = decode_tps(bins[name], args)
            if name == "tessera":  # the fingerprint (commit included) of the binary measured, not the base's
                machine = fp
        after, dram_after = read_gbs(args.tessera, args.threads, bpt, tmp)
        roof, dram = (before + after) / 2, (dram_before + dram_after) / 2
        row = {"round": i + 1, "set_before": before, "set_after": after, "roof": roof, "dram": dram}
        for name, v in tps.items():
            row[name + "_tps"] = v
            row[name + "_fraction"] = v * bpt / 1e9 / roof
            row[name + "_of_dram"] = v * bpt / 1e9 / dram
        rounds.append(row)
        print(json.dumps(row), flush=True)
    os.remove(tmp)

    def stat(key):
        v = [r[key] for r in rounds]
        return statistics.median(v), min(v), max(v)

    lines = [f"# Decode against the read roof of its working set, {args.rounds} interleaved rounds", "",
             f"machine: `{json.dumps(machine)}`", "",
             f"bytes read per decoded token: {bpt / 1e6:.1f} MB (`tessera profile`, {profiled} tokens); tg{args.n}"
             f"{' @ d' + str(args.depth) if args.depth else ''}, "
             f"{args.threads} threads{'; --isa ' + args.isa if args.isa else ''}; a round's roof: the mean of "
             f"`tessera probe --read-bytes {int(bpt)}`'s read_set before and after it (read_dram beside it)", "",
             "| round | set GB/s before | after | DRAM GB/s | " + " | ".join(f"{n} t/s | {n} of roof | of DRAM" for n in bins) + " |",
             "|---|---|---|---|" + "---|---|---|" * len(bins)]
    for r in rounds:
        lines.append(f"| {r['round']} | {r['set_before']:.1f} | {r['set_after']:.1f} | {r['dram']:.1f} | " +
                     " | ".join(f"{r[n + '_tps']:.1f} | {100 * r[n + '_fraction']:.0f}% | {100 * r[n + '_of_dram']:.0f}%" for n in bins) + " |")
    lines.append("")
    for n in bins:
        m, lo, hi = stat(n + "_fraction")
        tm, tlo, thi = stat(n + "_tps")
        dm, _, _ = stat(n + "_of_dram")
        lines.append(f"- {n} ({bins[n]}): {tm:.1f} t/s ({tlo:.1f}..{thi:.1f}); **{100 * m:.0f}%** of the roof "
                     f"(rounds {100 * lo:.0f}..{100 * hi:.0f}%); {100 * dm:.0f}% of DRAM's")
    if args.base:
        r = [x["tessera_tps"] / x["base_tps"] for x in rounds]
        lines.append(f"- tessera / base, per round: {statistics.median(r):.3f}x ({min(r):.3f}..{max(r):.3f})")
    m, lo, hi = stat("roof")
    dm, dlo, dhi = stat("dram")
    lines.append(f"- roof (read_set): {m:.1f} GB/s ({lo:.1f}..{hi:.1f}); DRAM {dm:.1f} GB/s ({dlo:.1f}..{dhi:.1f})")
    open(os.path.join(args.out, "decode_roof.md"), "w").write("\n".join(lines) + "\n")
    json.dump({"bytes_per_token": bpt, "machine": machine, "rounds": rounds}, open(os.path.join(args.out, "decode_roof.json"), "w"), indent=1)
    print("\n".join(lines[-len(bins) - 1 - bool(args.base):]))


if __name__ == "__main__":
    main()
