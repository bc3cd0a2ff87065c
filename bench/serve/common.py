"""Shared by the server benchmarks: the command-line arguments every one takes and starting
`tessera serve` on a free port."""
import argparse
import os
import re
import subprocess
import sys
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
