#!/usr/bin/env python3
"""tessera plan's predictions against measurement on this machine (issue 32, point 5).

For each case (a model file, a resolution knob, a weight precision) it runs --repeats rounds of:
`tessera plan --calibrate` (this machine's kernel rates, measured in the same minute as the run
they predict), `tessera plan --json`, and `tessera run` on the same image, question and settings;
then one `tessera profile --json`. It sets side by side each figure's median over the rounds,
predicted and measured: the phases' times (preprocess, vision encode + connector, prefill, decode
per token, time to first token) from `run`'s timing lines, and the resident memory after the
question (the profiler's peak RSS). With --calibrate-once, one calibration first serves every
round (a noisy neighbour at calibration time then moves every prediction alike). The report
names the CPU.

  python3 bench/plan/validate.py OUT_DIR [--cases smolvlm,qwen,smolvlm_q8mmproj] [--quick] [--repeats 3] [--calibrate-once]

Models (made by the project's scripts, git-ignored):
  .peers/smolvlm-full/{text.gguf,mmproj.gguf}  SmolVLM-256M shape (real SmolLM2 Q4_1 text, random vision)
  .peers/qwen3vl-2b/{text.gguf,text-Q4_K_M.gguf,mmproj.gguf}  Qwen3-VL-2B shape, seeded random
  smolvlm_q8mmproj: the SmolVLM pair with its mmproj converted to Q8_0 (not in the default set)
Other precisions are made with `tessera convert` into OUT_DIR/models.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESSERA = os.path.join(ROOT, "build", "tessera")
IMAGE = os.path.join(ROOT, "tests", "fixtures", "watch", "typing", "frame_000.png")  # 1920x1080 xterm
QUESTION = "What is the user typing?"
QUESTION_TOKENS = 14  # the question in either family's chat template (its prompt's text tokens)
ANSWER = 32  # enough tokens for a decode median-like average on a shared machine


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return r


def convert(src, typ, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    dst = os.path.join(out_dir, os.path.basename(os.path.dirname(src)) + f"-{typ}.gguf")
    if not os.path.exists(dst):
        run([TESSERA, "convert", "-m", src, "-o", dst, "--type", typ])
    return dst


def cases(which, out_dir, quick):
    c = []
    if "smolvlm" in which:
        d = os.path.join(ROOT, ".peers", "smolvlm-full")
        text, mm = os.path.join(d, "text.gguf"), os.path.join(d, "mmproj.gguf")
        for edge in ([512, 1024] if quick else [512, 1024, 2048]):
            c.append(("SmolVLM-256M", text, mm, "Q4_1", ["--vision-longest-edge", str(edge)], ["--longest-edge", str(edge)], f"edge {edge}"))
        for typ in ([] if quick else ["q8_0", "f16"]):
            c.append(("SmolVLM-256M", convert(text, typ, out_dir), mm, typ.upper(), ["--vision-longest-edge", "1024"],
                      ["--longest-edge", "1024"], "edge 1024"))
    if "smolvlm_q8mmproj" in which:  # a Q8_0 mmproj: on 8-bit activations where the calibration says vision_q8
        d = os.path.join(ROOT, ".peers", "smolvlm-full")
        text, mm = os.path.join(d, "text.gguf"), os.path.join(out_dir, "smolvlm-full-mmproj-q8_0.gguf")
        if not os.path.exists(mm):
            os.makedirs(out_dir, exist_ok=True)
            run([TESSERA, "convert", "-m", os.path.join(d, "mmproj.gguf"), "-o", mm, "--type", "q8_0"])
        for edge in ([1024] if quick else [512, 1024, 2048]):
            c.append(("SmolVLM-256M, Q8_0 mmproj", text, mm, "Q4_1", ["--vision-longest-edge", str(edge)], ["--longest-edge", str(edge)],
                      f"edge {edge}"))
    if "qwen" in which:
        d = os.path.join(ROOT, ".peers", "qwen3vl-2b")
        mm = os.path.join(d, "mmproj.gguf")
        q4 = os.path.join(d, "text-Q4_K_M.gguf")
        for px in ([65536] if quick else [65536, 262144, 589824]):
            c.append(("Qwen3-VL-2B", q4, mm, "Q4_K_M", ["--vision-max-pixels", str(px)], ["--max-pixels", str(px)], f"{px} px"))
        if not quick:
            c.append(("Qwen3-VL-2B", os.path.join(d, "text.gguf"), mm, "F16", ["--vision-max-pixels", "262144"], ["--max-pixels", "262144"],
                      "262144 px"))
            c.append(("Qwen3-VL-2B", convert(os.path.join(d, "text.gguf"), "q8_0", out_dir), mm, "Q8_0",
                      ["--vision-max-pixels", "262144"], ["--max-pixels", "262144"], "262144 px"))
    return c


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--cases", default="smolvlm,qwen")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--repeats", type=int, default=3, help="rounds per case (each: calibrate, predict, run); the table shows each figure's median over them")
    ap.add_argument("--calibrate-once", action="store_true",
                    help="one calibration for every case (default: a calibration in every round of every case, just before its run: "
                         "this host's speed moves by 10-30%% within minutes, and a prediction is only as current as its rates)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    calib = os.path.join(a.out, "device.json")
    t = ["-t", a.threads]
    if a.calibrate_once:
        run([TESSERA, "plan", "--calibrate", "--calibration", calib] + t)
    rows = []
    for name, text, mm, prec, run_knob, plan_knob, res in cases(a.cases.split(","), os.path.join(a.out, "models"), a.quick):
        tag = re.sub(r"[^A-Za-z0-9]+", "_", f"{name}_{prec}_{res}")
        pj, mj = os.path.join(a.out, f"plan_{tag}.json"), os.path.join(a.out, f"profile_{tag}.json")
        t0 = time.time()
        # Each round: the machine's rates measured (unless --calibrate-once), the case predicted
        # from them, then run once with `tessera run` (what a user's question costs: the
        # profiler's per-op clocks add 5-20% to a decode step). The table holds each figure's
        # median over the rounds on both sides, so one slow minute of this shared host moves
        # neither a prediction nor a measurement alone. The resident memory comes from one
        # `tessera profile` (its peak RSS).
        runs, preds = [], []
        for rep in range(a.repeats):
            if not a.calibrate_once:
                calib = os.path.join(a.out, f"device_{tag}_r{rep}.json")
                run([TESSERA, "plan", "--calibrate", "--calibration", calib] + t)
            run([TESSERA, "plan", "-m", text, "--mmproj", mm, "--screen", "1920x1080", "--calibration", calib, "--answer-tokens",
                 str(ANSWER), "--question-tokens", str(QUESTION_TOKENS), "--json", pj] + t + plan_knob)
            p = json.load(open(pj))
            preds.append({
                "prompt tokens": p["prompt_tokens"],
                "preprocess ms": p["ms"]["preprocess"],
                "vision ms": p["ms"]["vision"],
                "prefill ms": p["ms"]["prefill"],
                "decode ms/token": p["ms"]["decode_per_token"],
                "resident MiB": p["memory"]["peak_question"] / 2**20,
                "TTFT ms": p["ms"]["ttft_cold"],
            })
            r = run([TESSERA, "run", "-m", text, "--mmproj", mm, "--image", IMAGE, "-p", QUESTION, "-n", str(ANSWER)] + t + run_knob)
            m = re.search(r"\[prefill: (\d+) tokens, ([\d.]+) ms.*decode: (\d+) tokens, ([\d.]+) ms", r.stderr)
            im = re.search(r"preprocess ([\d.]+) ms \| vision encode ([\d.]+) ms[^|\]]*(?:\| connector ([\d.]+) ms)?", r.stderr)
            if not m or not im:
                sys.exit(f"no timing lines from run:\n{r.stderr[-1000:]}")
            prompt, prefill, ntok, dec = int(m.group(1)), float(m.group(2)), int(m.group(3)), float(m.group(4))
            one = {
                "prompt tokens": prompt,
                "preprocess ms": float(im.group(1)),
                "vision ms": float(im.group(2)) + float(im.group(3) or 0.0),
                "prefill ms": prefill,
                "decode ms/token": dec / max(1, ntok),
            }
            one["TTFT ms"] = one["preprocess ms"] + one["vision ms"] + prefill + one["decode ms/token"]
            runs.append(one)
        run([TESSERA, "profile", "-m", text, "--mmproj", mm, "--image", IMAGE, "-p", QUESTION, "-n", str(ANSWER), "--json", mj] + t + run_knob)
        resident = json.load(open(mj))["memory"]["peak_resident_bytes"] / 2**20
        for one in runs:
            one["resident MiB"] = resident
        wall = (time.time() - t0) / a.repeats
        meas = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
        spread = {k: [min(x[k] for x in runs), max(x[k] for x in runs)] for k in runs[0]}
        pred = {k: statistics.median(x[k] for x in preds) for k in preds[0]}
        pred_spread = {k: [min(x[k] for x in preds), max(x[k] for x in preds)] for k in preds[0]}
        rows.append({"model": name, "weights": prec, "resolution": res, "predicted": pred, "measured": meas, "measured_range": spread, "predicted_range": pred_spread,
                     "repeats": a.repeats, "wall_s": wall})
        print(f"{name} {prec} {res}: " + ", ".join(f"{k} {pred[k]:.1f}/{meas[k]:.1f}" for k in pred), flush=True)
    json.dump({"cpu": cpu_model(), "threads": int(a.threads), "rows": rows}, open(os.path.join(a.out, "validation.json"), "w"), indent=1)
    keys = ["preprocess ms", "vision ms", "prefill ms", "decode ms/token", "TTFT ms", "resident MiB"]
    lines = [f"CPU: {cpu_model()}, {a.threads} threads; predicted / measured (ratio); each figure the median of {a.repeats} rounds (calibrate, predict, run)", "",
             "| model | weights | resolution | prompt tokens | " + " | ".join(keys) + " |",
             "|---" * (4 + len(keys)) + "|"]
    worst = {k: 0.0 for k in keys}
    for r in rows:
        cells = []
        for k in keys:
            pv, mv = r["predicted"][k], r["measured"][k]
            ratio = pv / mv if mv else float("nan")
            if mv:
                worst[k] = max(worst[k], abs(ratio - 1))
            cells.append(f"{pv:.1f} / {mv:.1f} ({ratio:.2f})")
        lines.append(f"| {r['model']} | {r['weights']} | {r['resolution']} | {r['predicted']['prompt tokens']} / {r['measured']['prompt tokens']} | "
                     + " | ".join(cells) + " |")
    lines += ["", "largest error: " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in worst.items())]
    open(os.path.join(a.out, "validation.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
