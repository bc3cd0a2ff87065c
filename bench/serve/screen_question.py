"""A question about the live screen against the same question with the screenshot uploaded, on one
server: time to first token and total, for (a) the screen settled (the background encoded it and
evaluated the prompt's prefix through the image), (b) the same frame as an image_url request
(everything in the foreground), (c) the screen just changed (the question finishes the encoding
itself). Frames are POSTed to /v1/screen/frames (no X server needed). Rounds alternate; medians.

    python3 bench/serve/screen_question.py --text T.gguf --mmproj M.gguf --frames A.png,B.png
        [--rounds 3] [--max-tokens 16] [--server-flags "--vision-max-pixels 258048 -c 4096"]
"""
import base64
import json
import statistics
import time
import urllib.request

from common import arguments, start_server
from watch_bench import ask, metrics

QUESTION = "What is the user working on?"


def push(port, path):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/screen/frames", data=open(path, "rb").read(),
                                 headers={"Content-Type": "image/png"})
    return json.load(urllib.request.urlopen(req, timeout=60))


def settle(port, timeout=900):
    """Until the memory is current and the background's CPU stopped growing (prefix evaluated)."""
    prev, t0 = -1.0, time.monotonic()
    while time.monotonic() - t0 < timeout:
        m = metrics(port)
        cpu = m.get("tessera_background_cpu_seconds_total", 0.0)
        if m.get("tessera_screen_memory_current") == 1 and abs(cpu - prev) < 0.02:
            return
        prev = cpu
        time.sleep(0.5)
    raise SystemExit("the visual memory did not settle")


def image_question(port, model, path, max_tokens):
    b64 = base64.b64encode(open(path, "rb").read()).decode()
    body = json.dumps({"model": model, "stream": True, "temperature": 0, "max_tokens": max_tokens,
                       "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": [
                           {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64}},
                           {"type": "text", "text": QUESTION}]}]})
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    t0, ttft = time.monotonic(), None
    with urllib.request.urlopen(req, timeout=900) as r:
        for raw in r:
            line = raw.decode().strip()
            if ttft is None and line.startswith("data: ") and '"content"' in line:
                ttft = time.monotonic() - t0
    return {"ttft_s": ttft, "total_s": time.monotonic() - t0}


def main():
    a = arguments(__doc__, rounds=3, max_tokens=16, frames="", server_flags="", out="out/serve_screen_question")
    frames = a.frames.split(",")
    proc, port = start_server(a, "--debounce", "0", "--cpu-budget", "100", *a.server_flags.split())
    model = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models"))["data"][0]["id"]
    rows = {"settled": [], "image_url": [], "just_changed": []}
    try:
        for rnd in range(a.rounds):
            for i, f in enumerate(frames):
                push(port, f)
                settle(port)
                rows["settled"].append(ask(port, model, QUESTION, a.max_tokens))
                rows["image_url"].append(image_question(port, model, f, a.max_tokens))
                # the next frame arrives and the question comes at once: it finishes the encode itself
                nxt = frames[(i + 1) % len(frames)]
                push(port, nxt)
                rows["just_changed"].append(ask(port, model, QUESTION, a.max_tokens))
                print(f"round {rnd} frame {i}: " + ", ".join(f"{k} {v[-1]['ttft_s']:.2f}/{v[-1]['total_s']:.2f} s" for k, v in rows.items()),
                      flush=True)
    finally:
        proc.terminate()
        proc.wait()
    out = {k: {"ttft_s_median": statistics.median(r["ttft_s"] for r in v), "total_s_median": statistics.median(r["total_s"] for r in v),
               "ttft_s_range": [min(r["ttft_s"] for r in v), max(r["ttft_s"] for r in v)], "n": len(v)} for k, v in rows.items()}
    json.dump({"rows": rows, "summary": out}, open(f"{a.out}/screen_question.json", "w"), indent=1)
    print("| request | time to first token (median, range) | whole answer (median) |")
    print("|---|---|---|")
    for k, v in out.items():
        print(f"| {k} | {v['ttft_s_median']:.2f} s ({v['ttft_s_range'][0]:.2f}–{v['ttft_s_range'][1]:.2f}) | {v['total_s_median']:.2f} s |")


if __name__ == "__main__":
    main()
