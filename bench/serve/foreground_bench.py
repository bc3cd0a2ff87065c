"""Foreground under background load: a text question's time to first token and tokens/s on a
server that is watching a changing screen, against the same server with its background work off.

Plays a recorded typing session (--replay DIR, from `SESSIONS=typing_long
bench/watch/record_sessions.sh DIR`) on Xvfb at one frame per second for the whole run, so the
screen changes and the other programs' load is the same in every arm. Each round starts the
server once per --cpu-budget arm (0: no background work; the default 10; 100: the background
encodes whenever the screen changed and no request waits), in an order that rotates between
rounds, lets it watch for --warmup s, then asks --questions streamed greedy text questions (no
screen part) --every s apart. Reports per arm the medians over all questions, and the median
over rounds of each arm's ratio to the budget-0 arm of the same round.

    python3 bench/serve/foreground_bench.py --text T.gguf --mmproj M.gguf --replay DIR
        [--rounds 3] [--questions 10] [--every 4] [--warmup 15] [--server-flags "-c 2048 --mem-budget 400"]
"""
import json
import os
import statistics
import threading
import time
import urllib.request

from common import arguments, replay_frames, start_replay, start_server, start_xvfb
from watch_bench import ask, metrics, pct

QUESTIONS = ["Name three colors of the sea.", "What is the capital of France?", "Write one sentence about rain.",
             "List two fruits."]


def main():
    a = arguments(__doc__, rounds=3, questions=10, every=4.0, warmup=15.0, arms="0,10,100", out="out/serve_foreground",
                  server_flags="", replay="")
    frames = replay_frames(a.replay)
    arms = [float(b) for b in a.arms.split(",")]
    procs, results = [], []
    stop = threading.Event()
    try:
        disp, env = start_xvfb(procs)
        start_replay(frames, env, float("inf"), stop)
        for rnd in range(a.rounds):
            order = arms[rnd % len(arms):] + arms[:rnd % len(arms)]
            for budget in order:
                server, port = start_server(a, "--screen", f"x11::{disp}", "--capture-period", "1", "--cpu-budget",
                                            str(budget), *a.server_flags.split())
                try:
                    model = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models").read())["data"][0]["id"]
                    time.sleep(a.warmup)
                    for q in range(a.questions):
                        t0 = time.monotonic()
                        p0 = metrics(port).get("tessera_background_preemptions_total", 0)
                        r = ask(port, model, QUESTIONS[q % len(QUESTIONS)], max_tokens=32, screen=False)
                        r.update(round=rnd, budget=budget,
                                 preempted=metrics(port).get("tessera_background_preemptions_total", 0) > p0)
                        results.append(r)
                        time.sleep(max(0.0, a.every - (time.monotonic() - t0)))
                finally:
                    server.terminate()
                    server.wait(timeout=60)
        with open(os.path.join(a.out, "foreground.jsonl"), "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
        report(results, arms, a)
    finally:
        stop.set()
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)


def report(results, arms, a):
    print(f"\n## foreground text questions while the server watches a replayed typing session "
          f"({a.rounds} rounds x {a.questions} questions per arm, {a.threads} threads)\n")
    print("| --cpu-budget | TTFT s (median, p90, max) | decode tok/s (median, p10) | preempted background work | "
          "TTFT / budget 0 (median of rounds, range) | tok/s budget 0 / this (median of rounds, range) |")
    print("|---|---|---|---|---|---|")
    base = {rnd: [r for r in results if r["round"] == rnd and r["budget"] == arms[0]] for rnd in range(a.rounds)}
    for budget in arms:
        rr = [r for r in results if r["budget"] == budget and r["ttft_s"] is not None]
        t, k = [r["ttft_s"] for r in rr], [r["tok_s"] for r in rr]
        tr, kr = [], []
        for rnd in range(a.rounds):
            mine = [r for r in rr if r["round"] == rnd]
            b = base[rnd]
            if mine and b:
                tr.append(statistics.median(r["ttft_s"] for r in mine) / statistics.median(r["ttft_s"] for r in b))
                kr.append(statistics.median(r["tok_s"] for r in b) / statistics.median(r["tok_s"] for r in mine))
        print(f"| {budget:g} | {statistics.median(t):.3f}, {pct(t, 0.9):.3f}, {max(t):.3f} | {statistics.median(k):.1f}, "
              f"{pct(k, 0.1):.1f} | {sum(1 for r in rr if r['preempted'])}/{len(rr)} | {statistics.median(tr):.2f} "
              f"({min(tr):.2f}-{max(tr):.2f}) | {statistics.median(kr):.2f} ({min(kr):.2f}-{max(kr):.2f}) |")


if __name__ == "__main__":
    main()
