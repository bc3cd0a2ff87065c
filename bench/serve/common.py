"""Shared by the server benchmarks: the command-line arguments every one takes and starting
`tessera serve` on a free port."""
import argparse
import os
import random
import re
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def arguments(doc, **defaults):
    """The model pair, threads, duration and output folder, plus extra (name, type, default)."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--text", required=True, help="text GGUF (e.g. tessera vlm-init's)")
    ap.add_argument("--mmproj", required=True, help="mmproj GGUF")
    ap.add_argument("--threads", type=int, default=2)
    for name, default in defaults.items():
        ap.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    return a


def start_server(a, *flags):
    """build/tessera serve on a free port with the model pair; returns (process, port)."""
    log = open(os.path.join(a.out, "server.log"), "w")
    proc = subprocess.Popen([os.path.join(ROOT, "build", "tessera"), "serve", "--port", "0", "-t", str(a.threads),
                             "-m", a.text, "--mmproj", a.mmproj, *flags], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        m = re.search(r"listening on http://127.0.0.1:(\d+)", open(os.path.join(a.out, "server.log")).read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    sys.exit("the server did not start: " + open(os.path.join(a.out, "server.log")).read())


def start_xvfb(procs):
    """Xvfb 1920x1080 on a free display (appended to procs); returns (display number, environment)."""
    disp = 90 + random.randrange(300)
    while os.path.exists(f"/tmp/.X{disp}-lock"):
        disp += 1
    procs.append(subprocess.Popen(["Xvfb", f":{disp}", "-screen", "0", "1920x1080x24", "-nolisten", "tcp"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(1)
    return disp, dict(os.environ, DISPLAY=f":{disp}")


def replay_frames(folder):
    """The recorded session's PNG frames, in order (exits when there are none)."""
    frames = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".png"))
    if not frames:
        sys.exit(f"no PNG frames in {folder}")
    return frames


def start_replay(frames, env, until, stop):
    """Shows the frames on the root window, one a second (looping), until time `until` or stop is
    set, on a thread; returns a list whose element 0 counts the frames shown."""
    shown = [0]

    def run():
        t = time.monotonic()
        while not stop.is_set() and time.monotonic() < until:
            subprocess.run(["display", "-window", "root", frames[shown[0] % len(frames)]], env=env)
            shown[0] += 1
            t += 1.0
            time.sleep(max(0.0, t - time.monotonic()))

    subprocess.run(["display", "-window", "root", frames[0]], env=env)
    threading.Thread(target=run, daemon=True).start()
    return shown
