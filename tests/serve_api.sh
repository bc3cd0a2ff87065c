#!/usr/bin/env bash
# `tessera serve` against real clients: curl (and the openai Python package where it can be
# imported, tests/serve_openai.py). Starts servers on free ports, checks the OpenAI routes, that a
# greedy reply (whole and streamed) is exactly `tessera run`'s text for the same prompt, the
# refusals (4xx in OpenAI's error JSON, the server still serving), the queue limit, the API key,
# an image request on the tiny VLM, and that SIGTERM exits 0. Usage: serve_api.sh TESSERA_BINARY
set -u
bin="$1"
source "$(dirname "$0")/serve_common.sh"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
id="SmolLM2-135M-Instruct.Q4_1"

# start NAME ARGS...: a server on a free port; sets $port and $pid
start() {
  local name="$1"; shift
  "$bin" serve --port 0 -t 2 "$@" >"$tmp/$name.out" 2>"$tmp/$name.log" &
  pid=$!
  pids+=("$pid")
  port=$(listening_port "$tmp/$name.log" "$pid") && return 0
  echo "FAIL server $name did not start: $(cat "$tmp/$name.log")"
  exit 1
}
url() { echo "http://127.0.0.1:$port$1"; }
# status BODY [curl args...]: the HTTP status of a chat completion; the body lands in $tmp/body
status() {
  local body="$1"; shift
  curl -s -o "$tmp/body" -w '%{http_code}' "$@" "$(url /v1/chat/completions)" -H 'Content-Type: application/json' --data-binary "$body"
}
expect() {  # name, want status, body, [curl args]
  local name="$1" want="$2" body="$3"; shift 3
  local got
  got=$(status "$body" "$@")
  if [ "$got" = "$want" ] && python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["message"] and e["type"]' "$tmp/body" 2>/dev/null; then
    ok "$name: $got $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"]["message"])' "$tmp/body")"
  else
    bad "$name: want $want, got $got: $(head -c 300 "$tmp/body")"
  fi
}
# a greedy 12-token request about a PNG file: image_request FILE MODEL
image_request() {
  python3 - "$1" "$2" <<'PY'
import base64, json, sys
b = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
print(json.dumps({"model": sys.argv[2], "temperature": 0, "max_tokens": 12, "messages": [{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b}}, {"type": "text", "text": "What is on the screen?"}]}]}))
PY
}
msg() { printf '{"model": "%s", "messages": [{"role": "user", "content": "%s"}], "temperature": 0, "max_tokens": %s%s}' "$id" "$1" "$2" "${3:-}"; }

start main -m "$model" --max-tokens 2048
curl -sf "$(url /health)" | grep -q '"ok"' && ok "GET /health" || bad "GET /health"
curl -sf "$(url /v1/models)" | python3 -c "import json,sys; d=json.load(sys.stdin); assert d['data'][0]['id']=='$id'" && ok "GET /v1/models lists $id" || bad "GET /v1/models"

# a greedy reply is `tessera run`'s text, whole and streamed
prompt="Write one sentence about the sea."
want=$("$bin" run -m "$model" -p "$prompt" -n 40 -t 2 2>/dev/null)
[ "$(status "$(msg "$prompt" 40)")" = 200 ] || bad "chat completion status"
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body")
[ "$got" = "$want" ] && ok "non-streamed reply equals tessera run's: '$got'" || bad "non-streamed reply: '$got' vs run's '$want'"
python3 -c 'import json,sys; u=json.load(open(sys.argv[1]))["usage"]; assert u["prompt_tokens"]>0 and u["completion_tokens"]>0 and u["total_tokens"]==u["prompt_tokens"]+u["completion_tokens"] and "prefill_ms" in u["timings"]' "$tmp/body" \
  && ok "usage with token counts and per-phase timings" || bad "usage: $(cat "$tmp/body")"
curl -sN "$(url /v1/chat/completions)" --data-binary "$(msg "$prompt" 40 ', "stream": true, "stream_options": {"include_usage": true}')" >"$tmp/stream"
python3 - "$tmp/stream" "$want" <<'PY' && ok "streamed reply (server-sent events, token by token) equals tessera run's" || bad "streamed reply: $(head -c 400 "$tmp/stream")"
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l]
assert all(l.startswith("data: ") for l in lines), lines[:3]
assert lines[-1] == "data: [DONE]"
chunks = [json.loads(l[6:]) for l in lines[:-1]]
assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
pieces = [c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]]
assert sum(1 for p in pieces if p) > 5, "streamed in pieces"
assert "".join(pieces) == sys.argv[2], ("".join(pieces), sys.argv[2])
assert chunks[-2]["choices"][0]["finish_reason"] in ("stop", "length")
assert chunks[-1]["usage"]["completion_tokens"] > 0
PY
# a client that goes away stops its generation (streamed: at the next token; non-streamed: at the
# next one-second whitespace keepalive), and the server takes the next request at once
metric() { curl -s "$(url /metrics)" | awk -v m="$1" '$1 == m {print $2}'; }
for mode in stream plain; do
  before=$(metric tessera_requests_cancelled_total); gen0=$(metric tessera_generated_tokens_total)
  extra=''; [ $mode = stream ] && extra=', "stream": true'
  # the client leaves after 1 s; a non-streamed reply notices at a keepalive, up to 2 s in, by when
  # the 8-bit default has decoded ~500 tokens on a Zen 4: ask for 2000 (greedy, no end of text before)
  curl -sN -m 1 -o /dev/null "$(url /v1/chat/completions)" --data-binary "$(msg "Tell me a very long story about the sea." 2000 "$extra")"
  for _ in $(seq 100); do [ "$(metric tessera_requests_running)" = 0 ] && break; sleep 0.1; done
  after=$(metric tessera_requests_cancelled_total); gen=$(( $(metric tessera_generated_tokens_total) - gen0 ))
  [ "$after" = $((before + 1)) ] && [ "$gen" -lt 2000 ] && ok "a $mode client that disconnects stops its generation ($gen of 2000 tokens)" \
    || bad "$mode disconnect: cancelled $before -> $after, $gen tokens"
done
# a reply that takes over a second arrives chunked, led by keepalive spaces: still one JSON document
status "$(msg "Tell me a very long story about the sea." 200)" >/dev/null
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["usage"]["completion_tokens"]>0 and d["choices"][0]["message"]["content"]' "$tmp/body" \
  && ok "a slow non-streamed reply (keepalive spaces first) parses as JSON" || bad "slow reply: $(head -c 300 "$tmp/body")"

# the same prompt again reuses the cached prefix
status "$(msg "$prompt" 8)" >/dev/null
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["usage"]["prompt_tokens_details"]["cached_tokens"]>0' "$tmp/body" \
  && ok "a repeated prompt reuses the cached prefix" || bad "prefix reuse: $(cat "$tmp/body")"
# stop sequences cut the reply before them
status "$(msg "Count from 1 to 20, separated by commas." 60 ', "stop": ["7"]')" >/dev/null
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["choices"][0]; assert "7" not in c["message"]["content"] and c["finish_reason"]=="stop", c' "$tmp/body" \
  && ok "stop sequence: '$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body")'" || bad "stop: $(cat "$tmp/body")"

# refusals: OpenAI's error JSON with the right status, and the server keeps serving
expect "malformed JSON" 400 '{"model": '
expect "not an object" 400 '[1, 2]'
expect "unknown model" 404 '{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}'
expect "missing model" 400 '{"messages": [{"role": "user", "content": "hi"}]}'
expect "messages not an array" 400 "{\"model\": \"$id\", \"messages\": \"hi\"}"
expect "empty messages" 400 "{\"model\": \"$id\", \"messages\": []}"
expect "wrong role" 400 "{\"model\": \"$id\", \"messages\": [{\"role\": \"robot\", \"content\": \"hi\"}]}"
expect "content of the wrong type" 400 "{\"model\": \"$id\", \"messages\": [{\"role\": \"user\", \"content\": 5}]}"
expect "negative max_tokens" 400 "$(msg hi -1)"
expect "max_tokens over the limit" 400 "$(msg hi 100000)"
expect "max_tokens not an integer" 400 "$(msg hi '"ten"')"
expect "temperature out of range" 400 "{\"model\": \"$id\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"temperature\": 7}"
expect "top_p zero" 400 "{\"model\": \"$id\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"top_p\": 0}"
expect "five stop sequences" 400 "$(msg hi 4 ', "stop": ["a","b","c","d","e"]')"
expect "n = 2" 400 "$(msg hi 4 ', "n": 2')"
expect "image by URL (no network, no disk reads)" 400 "{\"model\": \"$id\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {\"url\": \"file:///etc/passwd\"}}]}]}"
expect "image on a text-only model" 400 "{\"model\": \"$id\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {\"url\": \"data:image/png;base64,iVBORw0KGgo=\"}}]}]}"
expect "the screen on a text-only model" 400 "{\"model\": \"$id\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"screen\"}, {\"type\": \"text\", \"text\": \"what is this?\"}]}]}"
expect "deep JSON nesting" 400 "$(python3 -c 'print("["*50000 + "]"*50000)')"
long=$(python3 -c 'print("word " * 5000)')
expect "prompt longer than the context" 400 "$(msg "$long" 4)"
expect "no such route" 404 '' -X GET
curl -s -o "$tmp/body" -w '%{http_code}' "$(url /nope)" | grep -q 404 && ok "GET /nope: 404" || bad "GET /nope"
# a slow client that sends half a request and stalls does not block others
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{"model"' >&3
[ "$(status "$(msg hi 2)")" = 200 ] && ok "served while a slow client stalls" || bad "slow client blocked the server"
exec 3>&-
[ "$(status "$(msg hi 2)")" = 200 ] && ok "still serving after every refusal" || bad "server stopped serving"
curl -s "$(url /metrics)" >"$tmp/metrics"
grep -q '^tessera_requests_total{status="400"}' "$tmp/metrics" && grep -q '^tessera_time_to_first_token_seconds_bucket' "$tmp/metrics" \
  && grep -q '^tessera_resident_memory_bytes' "$tmp/metrics" && ok "GET /metrics (Prometheus text)" || bad "metrics: $(head -c 300 "$tmp/metrics")"
if python3 -c 'import openai' 2>/dev/null; then
  python3 "$root/tests/serve_openai.py" "$(url /v1)" "$id" "$prompt" "$want" && ok "openai client: completion and stream" || bad "openai client"
else
  echo "skip openai client: the openai package is not importable (scripts/test.sh installs it into build/pylib)"
fi
kill -TERM "$pid"; wait "$pid"; rc=$?
[ $rc -eq 0 ] && ok "SIGTERM: exit 0" || bad "SIGTERM: exit $rc"

# SIGTERM while a reply streams: the request finishes (drain), then exit 0
start drain -m "$model"
curl -sN "$(url /v1/chat/completions)" --data-binary "$(msg "Tell me a long story." 64 ', "stream": true')" >"$tmp/drain" &
cpid=$!
sleep 0.5
kill -TERM "$pid"; wait "$pid"; rc=$?
wait "$cpid"
[ $rc -eq 0 ] && grep -q '^data: \[DONE\]' "$tmp/drain" && ok "SIGTERM mid-stream: the stream completes, exit 0" || bad "drain: rc=$rc $(tail -c 200 "$tmp/drain")"

# the queue limit: with room for no waiting request, a second concurrent one gets 429
start queue -m "$model" --max-queue 0
curl -s -o /dev/null "$(url /v1/chat/completions)" --data-binary "$(msg "Tell me a long story." 200)" &
cpid=$!
sleep 0.5
expect "queue full" 429 "$(msg hi 2)"
wait "$cpid"
kill -TERM "$pid"; wait "$pid"

# the API key and the body limit
start key -m "$model" --api-key sekrit --max-body-mb 0.01
expect "no API key" 401 "$(msg hi 2)"
expect "wrong API key" 401 "$(msg hi 2)" -H 'Authorization: Bearer nope'
[ "$(status "$(msg hi 2)" -H 'Authorization: Bearer sekrit')" = 200 ] && ok "right API key: 200" || bad "API key"
big=$(python3 -c 'print("x" * 20000)')
expect "body over --max-body-mb" 413 "$(msg "$big" 2)" -H 'Authorization: Bearer sekrit'
kill -TERM "$pid"; wait "$pid"

# an image request on the tiny VLM is `tessera run --image`'s reply
frame="$root/tests/fixtures/watch/typing/frame_003.png"
want=$("$bin" run -m "$tiny/text.gguf" --mmproj "$tiny/mmproj.gguf" --image "$frame" -p "What is on the screen?" -n 12 -t 2 2>/dev/null)
start vlm -m "$tiny/text.gguf" --mmproj "$tiny/mmproj.gguf" --debounce 0.1 --cpu-budget 100
vid=$(curl -s "$(url /v1/models)" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
image_request "$frame" "$vid" >"$tmp/img.json"
[ "$(status "@$tmp/img.json")" = 200 ] || bad "image request status: $(head -c 300 "$tmp/body")"
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body")
[ "$got" = "$want" ] && ok "image reply equals tessera run --image's" || bad "image reply '$got' vs '$want'"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["usage"]["timings"]["vision_ms"]>0' "$tmp/body" && ok "usage reports the vision time" || bad "vision_ms"
# until the background is done: the memory current and then its prompt prefix evaluated
# (background CPU no longer growing); a question asked earlier would preempt that work
wait_background_done() {
  local prev=-1 m cur cpu
  for _ in $(seq 1 240); do
    m=$(curl -s "$(url /metrics)")
    cur=$(echo "$m" | sed -n 's/^tessera_screen_memory_current //p'); cpu=$(echo "$m" | sed -n 's/^tessera_background_cpu_seconds_total //p')
    [ "$cur" = 1 ] && python3 -c 'import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) < 0.02 else 1)' "$cpu" "$prev" && return 0
    prev=$cpu
    sleep 0.5
  done
}
# the same frame pushed as the live screen: a {"type": "screen"} question gets the same reply
python3 -c 'import json; print(json.dumps({"model": "'"$vid"'", "temperature": 0, "max_tokens": 12, "messages": [{"role": "user", "content": [{"type": "screen"}, {"type": "text", "text": "What is on the screen?"}]}]}))' >"$tmp/screen.json"
expect "a screen question before any frame" 503 "@$tmp/screen.json"
code=$(curl -s -o "$tmp/push" -w '%{http_code}' "$(url /v1/screen/frames)" -H 'Content-Type: image/png' --data-binary "@$frame")
[ "$code" = 202 ] && grep -q '"changed":true' "$tmp/push" && ok "POST /v1/screen/frames (PNG): 202" || bad "frame push: $code $(cat "$tmp/push")"
wait_background_done
[ "$(status "@$tmp/screen.json")" = 200 ] || bad "screen question status: $(head -c 300 "$tmp/body")"
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body")
[ "$got" = "$want" ] && ok "a screen question on the pushed frame equals tessera run --image's reply" || bad "screen reply '$got' vs '$want'"
python3 -c 'import json,sys; u=json.load(open(sys.argv[1]))["usage"]; assert u["screen"]["memory_current"] and u["prompt_tokens_details"]["cached_tokens"] > 800, u' "$tmp/body" \
  && ok "the memory was current and its prompt prefix precomputed ($(python3 -c 'import json,sys; u=json.load(open(sys.argv[1]))["usage"]; print(u["prompt_tokens_details"]["cached_tokens"], "of", u["prompt_tokens"], "prompt tokens cached")' "$tmp/body"))" \
  || bad "screen usage: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"])' "$tmp/body")"
# a text question overwrites those positions; the next screen question gets the saved prefix back
status "$(printf '{"model": "%s", "messages": [{"role": "user", "content": "Say hi."}], "temperature": 0, "max_tokens": 4}' "$vid")" >/dev/null
[ "$(status "@$tmp/screen.json")" = 200 ] || bad "screen question after a text one: $(head -c 300 "$tmp/body")"
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body")
python3 -c 'import json,sys; u=json.load(open(sys.argv[1]))["usage"]; assert u["prompt_tokens_details"]["cached_tokens"] > 800, u' "$tmp/body" && [ "$got" = "$want" ] \
  && ok "after a text question, the screen prompt's saved prefix is restored (same reply, $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens_details"]["cached_tokens"])' "$tmp/body") tokens reused)" \
  || bad "restored prefix: '$got' vs '$want': $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"])' "$tmp/body")"
code=$(curl -s -o "$tmp/push" -w '%{http_code}' "$(url /v1/screen/frames)" -H 'Content-Type: image/png' --data-binary "@$frame")
grep -q '"changed":false' "$tmp/push" && ok "the same frame again: unchanged" || bad "unchanged frame: $(cat "$tmp/push")"
head -c 300 /dev/urandom >"$tmp/noise"
code=$(curl -s -o "$tmp/push" -w '%{http_code}' "$(url /v1/screen/frames?width=10\&height=10)" -H 'Content-Type: application/octet-stream' --data-binary "@$tmp/noise")
[ "$code" = 202 ] && ok "raw RGB frame (10x10): 202" || bad "raw frame: $code $(cat "$tmp/push")"
code=$(curl -s -o "$tmp/push" -w '%{http_code}' "$(url /v1/screen/frames?width=10\&height=11)" -H 'Content-Type: application/octet-stream' --data-binary "@$tmp/noise")
[ "$code" = 400 ] && ok "raw frame of the wrong size: 400 $(cat "$tmp/push")" || bad "raw frame size: $code"
code=$(curl -s -o "$tmp/push" -w '%{http_code}' "$(url /v1/screen/frames)" -H 'Content-Type: image/png' --data-binary "@$tmp/noise")
[ "$code" = 400 ] && ok "a frame that is not a PNG: 400" || bad "bad frame: $code"
python3 -c 'import json; print(json.dumps({"model": "'"$vid"'", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"}}]}]}))' >"$tmp/trunc.json"
expect "truncated PNG" 400 "@$tmp/trunc.json"
python3 -c 'import json; print(json.dumps({"model": "'"$vid"'", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@@"}}]}]}))' >"$tmp/b64.json"
expect "invalid base64" 400 "@$tmp/b64.json"
kill -TERM "$pid"; wait "$pid"

# Qwen3-VL (the tiny seeded-random pair): an image request is `tessera run --image`'s reply, with
# its multimodal positions and DeepStack rows; so is a question about the live screen
qwen="$root/tests/fixtures/qwen3vl/tiny"
qframe="$root/tests/fixtures/vision/screens/xterm_700x450.png"
want=$("$bin" run -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" --image "$qframe" -p "What is on the screen?" -n 12 -t 2 2>/dev/null)
start qwen -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf"
qid=$(curl -s "$(url /v1/models)" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
image_request "$qframe" "$qid" >"$tmp/qimg.json"
[ "$(status "@$tmp/qimg.json")" = 200 ] || bad "Qwen3-VL image request status: $(head -c 300 "$tmp/body")"
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body")
[ -n "$want" ] && [ "$got" = "$want" ] && ok "Qwen3-VL image reply equals tessera run --image's" || bad "Qwen3-VL image reply '$got' vs '$want'"
[ "$(status "@$tmp/qimg.json")" = 200 ] && [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body")" = "$want" ] \
  && ok "Qwen3-VL: the same request again (cached prefix up to the image) gives the same reply" || bad "Qwen3-VL repeat: $(head -c 300 "$tmp/body")"
# the live screen: the same frame pushed, encoded in the background with the prompt's prefix
# through the image; a screen question then prefills only its own words and gets the same reply
python3 -c 'import json; print(json.dumps({"model": "'"$qid"'", "temperature": 0, "max_tokens": 12, "messages": [{"role": "user", "content": [{"type": "screen"}, {"type": "text", "text": "What is on the screen?"}]}]}))' >"$tmp/qscreen.json"
expect "a Qwen3-VL screen question before any frame" 503 "@$tmp/qscreen.json"
code=$(curl -s -o "$tmp/push" -w '%{http_code}' "$(url /v1/screen/frames)" -H 'Content-Type: image/png' --data-binary "@$qframe")
[ "$code" = 202 ] || bad "Qwen3-VL frame push: $code $(cat "$tmp/push")"
wait_background_done
[ "$(status "@$tmp/qscreen.json")" = 200 ] || bad "Qwen3-VL screen question status: $(head -c 300 "$tmp/body")"
got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body")
python3 -c 'import json,sys; u=json.load(open(sys.argv[1]))["usage"]; assert u["screen"]["memory_current"] and u["prompt_tokens_details"]["cached_tokens"] > 300, u' "$tmp/body" \
  && [ "$got" = "$want" ] && ok "Qwen3-VL screen question: run --image's reply from the current memory ($(python3 -c 'import json,sys; u=json.load(open(sys.argv[1]))["usage"]; print(u["prompt_tokens_details"]["cached_tokens"], "of", u["prompt_tokens"], "prompt tokens cached")' "$tmp/body"))" \
  || bad "Qwen3-VL screen reply '$got' vs '$want': $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"])' "$tmp/body")"
# a text question overwrites those positions; the saved prefix comes back for the next one
status "$(printf '{"model": "%s", "messages": [{"role": "user", "content": "Say hi."}], "temperature": 0, "max_tokens": 4}' "$qid")" >/dev/null
[ "$(status "@$tmp/qscreen.json")" = 200 ] && [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"])' "$tmp/body")" = "$want" ] \
  && ok "Qwen3-VL: after a text question, the screen prompt's saved prefix gives the same reply" || bad "Qwen3-VL restored prefix: $(head -c 300 "$tmp/body")"
kill -TERM "$pid"; wait "$pid"

# --mem-budget: refused at start when too small (one line, nonzero exit); under a tight budget a
# request image whose work does not fit gets 413 and a small one is served
out=$("$bin" serve --port 0 -t 2 -m "$tiny/text.gguf" --mmproj "$tiny/mmproj.gguf" --mem-budget 1 2>&1); rc=$?
[ $rc -ne 0 ] && [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "below what this server needs" \
  && ok "--mem-budget too small: exit $rc, '$out'" || bad "--mem-budget 1: rc=$rc '$out'"
fixed=$(echo "$out" | sed -n 's/.* = \([0-9]*\) MB, plus.*/\1/p')
start budget -m "$tiny/text.gguf" --mmproj "$tiny/mmproj.gguf" --mem-budget $((fixed + 16 + 40))
python3 - "$vid" "$tmp" <<'PY'
import base64, json, struct, sys, zlib
def png(w, h):  # a smooth RGB image: small as a PNG, large once decoded
    rows = b"".join(b"\0" + bytes((x * 7 + y) & 255 for x in range(w)) * 3 for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")
for name, (w, h) in {"huge": (4000, 4000), "small": (64, 48)}.items():
    b = base64.b64encode(png(w, h)).decode()
    json.dump({"model": sys.argv[1], "max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b}}, {"type": "text", "text": "What is this?"}]}]},
        open(f"{sys.argv[2]}/{name}.json", "w"))
PY
expect "an image whose work does not fit --mem-budget" 413 "@$tmp/huge.json"
[ "$(status "@$tmp/small.json")" = 200 ] && ok "a small image under the same budget: 200" || bad "small image under budget: $(head -c 300 "$tmp/body")"
curl -s "$(url /metrics)" | grep -q '^tessera_memory_budget_bytes' && ok "metrics report the memory budget" || bad "budget metric"
kill -TERM "$pid"; wait "$pid"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
