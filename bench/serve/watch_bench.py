"""The resident-server benchmark: `tessera serve --screen x11` watching a typing session.

Starts Xvfb (1920x1080) and plays a typing session on it: with --replay DIR, a recorded one
(bench/watch/record_sessions.sh's typing_long: PNG frames shown on the root window at one per
second, looping if the run is longer), else live (an xterm typed into by xdotool, a burst of keys
a second); then an idle phase. The server captures that screen at --capture-period 1 with a CPU
budget. Every --ask-every s it asks a screen question, and every --text-every s a text question
(both streamed, greedy), recording time to first token and tokens/s: text questions while the
screen changes against those on the idle screen are the foreground-under-background-load
comparison. Every 5 s it reads /metrics (background CPU share, staleness, tiles, resident memory)
and the process's own CPU time from /proc. Prints markdown tables and writes JSON lines.

    python3 bench/serve/watch_bench.py --text T.gguf --mmproj M.gguf [--replay DIR] [--minutes 10]
        [--idle-minutes 2] [--budget 10] [--threads 2] [--out out/serve_bench] [--server-flags "-c 2048"]

Needs Xvfb, xterm and xdotool (scripts/setup.sh installs them), for --replay ImageMagick's display
(apt-get install imagemagick; recording also needs x11-apps and twm), and a built build/tessera. The
full-size SmolVLM-256M shape is `tessera vlm-init` (real SmolLM2 text weights, random SigLIP);
`tessera convert --type q8_0` makes its Q8_0 mmproj.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from common import arguments, replay_frames, start_replay, start_server, start_xvfb
# (no word starts with "-": xdotool would read it as an option)
WORDS = ("def main(): return compute(the, screen, frames) # todo: check the budget and the cache "
         "git status && make && ./build/tessera serve x11 ls src/serve").split()


def metrics(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(tessera_[a-z_]+)(\{[^}]*\})? ([-0-9.e+]+)$", line)
        if m and not m.group(2):
            out[m.group(1)] = float(m.group(3))
    return out


def proc_cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def ask(port, model, question, max_tokens=24, screen=True):
    content = [{"type": "screen"}, {"type": "text", "text": question}] if screen else question
    body = json.dumps({"model": model, "stream": True, "temperature": 0, "max_tokens": max_tokens,
                       "stream_options": {"include_usage": True}, "messages": [{"role": "user", "content": content}]})
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    ttft, n, usage = None, 0, None
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            c = json.loads(line[6:])
            if c.get("usage"):
                usage = c["usage"]
            for ch in c.get("choices", []):
                if ch["delta"].get("content"):
                    n += 1
                    if ttft is None:
                        ttft = time.monotonic() - t0
    total = time.monotonic() - t0
    decode_ms = usage["timings"]["decode_ms"] if usage else 0
    return {"ttft_s": ttft, "total_s": total, "pieces": n,
            "tok_s": usage["completion_tokens"] / (decode_ms / 1e3) if usage and decode_ms > 0 else 0,
            "memory_current": usage.get("screen", {}).get("memory_current") if usage else None,
            "staleness_ms": usage.get("screen", {}).get("staleness_ms") if usage else None}


def main():
    a = arguments(__doc__, minutes=10.0, idle_minutes=2.0, budget=10.0, ask_every=30.0, text_every=10.0,
                  out="out/serve_bench", server_flags="", replay="")
    frames = replay_frames(a.replay) if a.replay else []
    procs = []
    try:
        disp, env = start_xvfb(procs)
        if not frames:
            procs.append(subprocess.Popen(["xterm", "-geometry", "200x60+0+0", "-fa", "Monospace", "-fs", "11"], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(1.5)
            win = subprocess.run(["xdotool", "search", "--class", "xterm"], env=env, capture_output=True, text=True).stdout.split()[0]
            subprocess.run(["xdotool", "windowfocus", "--sync", win], env=env)
        server, port = start_server(a, "--screen", f"x11::{disp}", "--capture-period", "1", "--cpu-budget", str(a.budget),
                                    *a.server_flags.split())
        procs.append(server)
        model = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models").read())["data"][0]["id"]

        stop = threading.Event()
        typing_until = time.monotonic() + a.minutes * 60

        def typist():  # a burst of keys every second while typing; an idle screen after
            i = 0
            while not stop.is_set() and time.monotonic() < typing_until:
                word = WORDS[i % len(WORDS)] + " "
                subprocess.run(["xdotool", "type", "--window", win, "--delay", "30", word], env=env)
                i += 1
                if i % 12 == 0:
                    subprocess.run(["xdotool", "key", "--window", win, "Return"], env=env)
                time.sleep(max(0.0, 1.0 - 0.03 * len(word)))

        if frames:
            replayed = start_replay(frames, env, typing_until, stop)
        else:
            threading.Thread(target=typist, daemon=True).start()
        samples, answers = [], []
        t_start = time.monotonic()
        cpu0 = proc_cpu_seconds(server.pid)
        end = t_start + (a.minutes + a.idle_minutes) * 60
        next_ask = t_start + a.ask_every
        next_text = t_start + a.text_every / 2
        texts = []
        prev = (t_start, cpu0)
        cores = os.cpu_count()
        while time.monotonic() < end:
            time.sleep(5)
            now = time.monotonic()
            m = metrics(port)
            cpu = proc_cpu_seconds(server.pid)
            phase = "typing" if now < typing_until else "idle"
            s = {"t": now - t_start, "phase": phase, "proc_cpu_share": (cpu - prev[1]) / ((now - prev[0]) * cores),
                 "background_cpu_share_1min": m.get("tessera_background_cpu_share"),
                 "staleness_s": m.get("tessera_screen_staleness_seconds"),
                 "memory_current": m.get("tessera_screen_memory_current"),
                 "frames": m.get("tessera_screen_frames_total"), "tiles_encoded": m.get("tessera_tiles_encoded_total"),
                 "tiles_reused": m.get("tessera_tiles_reused_total"), "rss_mb": m.get("tessera_resident_memory_bytes", 0) / 2**20,
                 "preemptions": m.get("tessera_background_preemptions_total")}
            prev = (now, cpu)
            samples.append(s)
            if now >= next_ask:
                r = ask(port, model, "What is the user typing?")
                r["t"] = time.monotonic() - t_start
                r["phase"] = phase
                answers.append(r)
                next_ask += a.ask_every
            if a.text_every > 0 and now >= next_text:  # a question without the screen: the foreground under load or idle
                p0 = metrics(port).get("tessera_background_preemptions_total", 0)
                r = ask(port, model, "Name three colors of the sea.", max_tokens=32, screen=False)
                r["t"] = time.monotonic() - t_start
                r["phase"] = phase
                r["preempted"] = metrics(port).get("tessera_background_preemptions_total", 0) > p0
                texts.append(r)
                next_text += a.text_every
        stop.set()
        with open(os.path.join(a.out, "metrics.txt"), "w") as f:  # the metrics page at the end of the run
            f.write(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode())
        with open(os.path.join(a.out, "samples.jsonl"), "w") as f:
            for s in samples:
                f.write(json.dumps(s) + "\n")
        with open(os.path.join(a.out, "answers.jsonl"), "w") as f:
            for r in answers:
                f.write(json.dumps(r) + "\n")
        with open(os.path.join(a.out, "text_answers.jsonl"), "w") as f:
            for r in texts:
                f.write(json.dumps(r) + "\n")
        if frames:
            print(f"\nreplayed {replayed[0]} frames of {len(frames)} ({a.replay})")
        report(samples, answers, texts, a)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def answered(rs, phase):
    """The questions of a phase that got a first token."""
    return [r for r in rs if r["phase"] == phase and r["ttft_s"] is not None]


def report(samples, answers, texts, a):
    print(f"\n## tessera serve --screen x11, --cpu-budget {a.budget}, {a.threads} threads "
          f"({a.minutes:g} min {'replayed' if a.replay else 'live'} typing, {a.idle_minutes:g} min idle)\n")
    print("| phase | CPU share of the machine (process, 5 s windows: median, p90) | background share over the last minute (median, max) "
          "| staleness s (p50, p95) | memory current | frames | tiles encoded / reused | RSS MB (first, last, max) |")
    print("|---|---|---|---|---|---|---|---|")
    for phase in ("typing", "idle"):
        ss = [s for s in samples if s["phase"] == phase]
        if not ss:
            continue
        first = samples[samples.index(ss[0]) - 1] if samples.index(ss[0]) > 0 else {"frames": 0, "tiles_encoded": 0, "tiles_reused": 0}
        cpu = [s["proc_cpu_share"] for s in ss]
        bg = [s["background_cpu_share_1min"] for s in ss]
        st = [s["staleness_s"] for s in ss]
        cur = sum(1 for s in ss if s["memory_current"]) / len(ss)
        rss = [s["rss_mb"] for s in ss]
        print(f"| {phase} | {statistics.median(cpu):.1%}, {pct(cpu, 0.9):.1%} | {statistics.median(bg):.1%}, {max(bg):.1%} | "
              f"{pct(st, 0.5):.1f}, {pct(st, 0.95):.1f} | {cur:.0%} of samples | {ss[-1]['frames'] - first['frames']:.0f} | "
              f"{ss[-1]['tiles_encoded'] - first['tiles_encoded']:.0f} / {ss[-1]['tiles_reused'] - first['tiles_reused']:.0f} | "
              f"{rss[0]:.0f}, {rss[-1]:.0f}, {max(rss):.0f} |")
    if answers:
        print("\n| questions | TTFT s (median, max) | decode tok/s (median) | memory current when asked | staleness ms when asked (median, max) |")
        print("|---|---|---|---|---|")
        for phase in ("typing", "idle"):
            rr = answered(answers, phase)
            if not rr:
                continue
            t = [r["ttft_s"] for r in rr]
            sm = [r["staleness_ms"] or 0 for r in rr]
            print(f"| {len(rr)} ({phase}) | {statistics.median(t):.2f}, {max(t):.2f} | {statistics.median([r['tok_s'] for r in rr]):.1f} | "
                  f"{sum(1 for r in rr if r['memory_current'])}/{len(rr)} | {statistics.median(sm):.0f}, {max(sm):.0f} |")
    med = {}
    if texts:
        print("\n| text questions (no screen) | TTFT s (median, p90, max) | decode tok/s (median, p10) | found background work running (preempted it) |")
        print("|---|---|---|---|")
        for phase in ("typing", "idle"):
            rr = answered(texts, phase)
            if not rr:
                continue
            t, k = [r["ttft_s"] for r in rr], [r["tok_s"] for r in rr]
            med[phase] = (statistics.median(t), statistics.median(k))
            print(f"| {len(rr)} ({phase}) | {statistics.median(t):.3f}, {pct(t, 0.9):.3f}, {max(t):.3f} | "
                  f"{statistics.median(k):.1f}, {pct(k, 0.1):.1f} | {sum(1 for r in rr if r['preempted'])}/{len(rr)} |")
        if len(med) == 2:
            print(f"\nwhile watching / idle: TTFT {med['typing'][0] / med['idle'][0]:.2f}x, "
                  f"tokens/s {med['idle'][1] / med['typing'][1]:.2f}x slower (medians)")


if __name__ == "__main__":
    main()
