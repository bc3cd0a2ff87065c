#!/usr/bin/env bash
# `tessera serve --screen x11`: live capture of a real X server (Xvfb) running a real program
# (xterm) driven by xdotool. Checks that the first frame is captured and encoded in the
# background, that typing produces new frames (XDamage) whose unchanged tiles come from the
# cache, that an idle screen produces no frames at all, and that a screen question is answered
# from a current visual memory. Usage: serve_screen.sh TESSERA_BINARY
set -u
bin="$1"
source "$(dirname "$0")/serve_common.sh"
metric() { curl -s "http://127.0.0.1:$port/metrics" | sed -n "s/^$1 //p"; }

# Xvfb picks a free display itself and writes its number once it accepts clients (-displayfd)
exec 3>"$tmp/display"
Xvfb -displayfd 3 -screen 0 1280x800x24 -nolisten tcp >"$tmp/xvfb.log" 2>&1 &
pids+=($!); disown
exec 3>&-
for _ in $(seq 1 300); do d=$(head -n 1 "$tmp/display"); [ -n "$d" ] && break; sleep 0.1; done
[ -n "$d" ] || { echo "FAIL Xvfb did not start: $(tail -n 3 "$tmp/xvfb.log" | tr '\n' ' ')"; exit 1; }
# generous waits: on a loaded 2-core machine (builds beside the test) xterm took over 5 s to map,
# and once in CI it never mapped in 30 s; an xterm that died is started again, and its own
# messages are kept for the failure line
win=""
for attempt in 1 2 3; do
  DISPLAY=":$d" xterm -geometry 100x30+0+0 >"$tmp/xterm.log" 2>&1 &
  xpid=$!; pids+=($xpid); disown
  for _ in $(seq 1 400); do
    win=$(DISPLAY=":$d" xdotool search --class xterm 2>/dev/null | head -n 1); [ -n "$win" ] && break
    kill -0 "$xpid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$win" ] && break
  kill -9 "$xpid" 2>/dev/null
  echo "note: xterm attempt $attempt on :$d did not map a window: $(tail -n 2 "$tmp/xterm.log" | tr '\n' ' ')"
done
[ -n "$win" ] || { echo "FAIL xterm did not start on :$d: $(tail -n 3 "$tmp/xterm.log" | tr '\n' ' ') / Xvfb: $(tail -n 3 "$tmp/xvfb.log" | tr '\n' ' ')"; exit 1; }
sleep 0.5

"$bin" serve --port 0 -t 2 -m "$tiny/text.gguf" --mmproj "$tiny/mmproj.gguf" --screen "x11::$d" --capture-period 0.3 \
  --debounce 0.2 --cpu-budget 100 >"$tmp/out" 2>"$tmp/log" &
pid=$!
pids+=($pid)
port=$(listening_port "$tmp/log" "$pid") || { echo "FAIL server: $(cat "$tmp/log")"; exit 1; }
grep -q "MIT-SHM, XDamage" "$tmp/log" && ok "capture through MIT-SHM with XDamage" || bad "capture mode: $(head -n 1 "$tmp/log")"

wait_current() { for _ in $(seq 1 300); do [ "$(metric tessera_screen_memory_current)" = 1 ] && return 0; sleep 0.1; done; return 1; }
wait_current && ok "first frame captured and encoded in the background ($(metric tessera_tiles_encoded_total) tiles encoded, $(metric tessera_tiles_reused_total) reused)" \
  || bad "the visual memory never became current: $(curl -s "http://127.0.0.1:$port/metrics" | grep screen)"
frames0=$(metric tessera_screen_frames_total)
sleep 1.5
[ "$(metric tessera_screen_frames_total)" = "$frames0" ] && ok "idle screen: no new frames in 1.5 s" || bad "idle screen produced frames"
enc0=$(metric tessera_tiles_encoded_total)
DISPLAY=":$d" xdotool windowfocus --sync "$win" type --delay 40 "echo the quick brown fox"
DISPLAY=":$d" xdotool key --window "$win" Return
sleep 1
wait_current
frames1=$(metric tessera_screen_frames_total); enc1=$(metric tessera_tiles_encoded_total); reused1=$(metric tessera_tiles_reused_total)
[ "$frames1" -gt "$frames0" ] && [ "$enc1" -gt "$enc0" ] && ok "typing: $((frames1 - frames0)) new frames, $((enc1 - enc0)) tiles encoded, reused so far $reused1" \
  || bad "typing produced frames $frames0 -> $frames1, tiles $enc0 -> $enc1"
[ "$(metric tessera_screen_damage_events_total)" -gt 0 ] && ok "XDamage events: $(metric tessera_screen_damage_events_total)" || bad "no damage events"
body='{"model": "text", "temperature": 0, "max_tokens": 6, "messages": [{"role": "user", "content": [{"type": "screen"}, {"type": "text", "text": "What is on the screen?"}]}]}'
curl -s "http://127.0.0.1:$port/v1/chat/completions" -d "$body" >"$tmp/reply"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["usage"]["screen"]["memory_current"] is True; print(r["choices"][0]["message"]["content"])' "$tmp/reply" >/dev/null \
  && ok "a screen question is answered from the current memory" || bad "screen question: $(head -c 300 "$tmp/reply")"
kill -TERM "$pid"; wait "$pid"; rc=$?
[ $rc -eq 0 ] && ok "SIGTERM with capture running: exit 0" || bad "SIGTERM: exit $rc"

# a display that does not exist: one line, exit 1
"$bin" serve --port 0 -m "$tiny/text.gguf" --mmproj "$tiny/mmproj.gguf" --screen x11::4999 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "tessera: error: cannot open the X display" "$tmp/err" \
  && ok "missing display: $(cat "$tmp/err")" || bad "missing display: rc=$rc $(cat "$tmp/err")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
