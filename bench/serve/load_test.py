"""Load test for `tessera serve`: N concurrent clients for M minutes, mixing text questions,
image questions (a screenshot as a base64 PNG) and screen questions (a frame pushed first).

Counts responses by status (429 is the designed refusal of a full queue; anything else that is
not 200 is an error), reports latency p50/p99 of the successful ones, and samples the server's
resident memory every 5 s to show it stays bounded.

    python3 bench/serve/load_test.py --text T.gguf --mmproj M.gguf [--clients 32] [--minutes 10]
        [--threads 2] [--max-queue 8] [--out out/serve_load] [--server-flags "-c 2048 --mem-budget 400"]
"""
import base64
import collections
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

from common import ROOT, arguments, start_server

FRAMES = os.path.join(ROOT, "tests", "fixtures", "watch", "typing")


def post(port, path, body, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    c.request("POST", path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0


def main():
    a = arguments(__doc__, clients=32, minutes=10.0, max_queue=8, out="out/serve_load", server_flags="")
    server, port = start_server(a, "--max-queue", str(a.max_queue), *a.server_flags.split())
    try:
        c = http.client.HTTPConnection("127.0.0.1", port)
        c.request("GET", "/v1/models")
        model = json.loads(c.getresponse().read())["data"][0]["id"]
        frames = sorted(os.path.join(FRAMES, f) for f in os.listdir(FRAMES))
        pngs = [open(f, "rb").read() for f in frames]
        b64 = [base64.b64encode(p).decode() for p in pngs[:2]]
        post(port, "/v1/screen/frames", pngs[0], {"Content-Type": "image/png"})

        statuses = collections.Counter()
        latencies = collections.defaultdict(list)
        lock = threading.Lock()
        end = time.monotonic() + a.minutes * 60
        questions = ["What is the capital of France?", "Write one sentence about the sea.", "List three colors.",
                     "Summarise: the build failed because a header was missing."]

        def client(i):
            rng = random.Random(i)
            while time.monotonic() < end:
                kind = rng.choice(["text", "text", "image", "screen"])
                if kind == "text":
                    content = rng.choice(questions)
                elif kind == "image":
                    content = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + rng.choice(b64)}},
                               {"type": "text", "text": "What is on the screen?"}]
                else:
                    if rng.random() < 0.5:
                        post(port, "/v1/screen/frames", rng.choice(pngs), {"Content-Type": "image/png"})
                    content = [{"type": "screen"}, {"type": "text", "text": "What is the user doing?"}]
                body = json.dumps({"model": model, "max_tokens": rng.choice([8, 16, 32]), "temperature": 0.7,
                                   "seed": rng.randrange(1 << 30), "stream": rng.random() < 0.5,
                                   "messages": [{"role": "user", "content": content}]})
                t0 = time.monotonic()
                try:
                    status, _ = post(port, "/v1/chat/completions", body, {"Content-Type": "application/json"})
                except Exception as e:  # a dropped connection counts as an error
                    status = "error: " + type(e).__name__
                dt = time.monotonic() - t0
                with lock:
                    statuses[(kind, status)] += 1
                    if status == 200:
                        latencies[kind].append(dt)
                if status == 429:
                    time.sleep(rng.uniform(0.2, 1.0))  # back off, as a client should

        threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
        for t in threads:
            t.start()
        rss = []
        while any(t.is_alive() for t in threads):
            rss.append(rss_mb(server.pid))
            if server.poll() is not None:
                sys.exit("the server died")
            time.sleep(5)
        for t in threads:
            t.join()
        alive = server.poll() is None
        server.terminate()
        rc = server.wait(timeout=120)
        errors = sum(n for (k, s), n in statuses.items() if s not in (200, 429))
        print(f"\n## load test: {a.clients} clients, {a.minutes:g} min, {a.threads} threads, --max-queue {a.max_queue}\n")
        print("| kind | 200 | 429 | other | latency of 200s: p50 s | p99 s |")
        print("|---|---|---|---|---|---|")
        for kind in ("text", "image", "screen"):
            ok = statuses[(kind, 200)]
            busy = statuses[(kind, 429)]
            other = sum(n for (k, s), n in statuses.items() if k == kind and s not in (200, 429))
            lat = sorted(latencies[kind])
            p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan")
            print(f"| {kind} | {ok} | {busy} | {other} | {statistics.median(lat) if lat else float('nan'):.2f} | {p99:.2f} |")
        print(f"\nerrors other than 429: {errors}; server alive at the end: {alive}; exit after SIGTERM: {rc}; "
              f"RSS MB first/last/max: {rss[0]:.0f}/{rss[-1]:.0f}/{max(rss):.0f}")
        json.dump({"statuses": {f"{k}:{s}": n for (k, s), n in statuses.items()}, "rss_mb": rss,
                   "latencies": latencies}, open(os.path.join(a.out, "load.json"), "w"))
        return 0 if errors == 0 and alive and rc == 0 else 1
    finally:
        if server.poll() is None:
            server.kill()


if __name__ == "__main__":
    sys.exit(main())
