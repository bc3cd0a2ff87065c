#!/usr/bin/env bash
# Bad input to the CLI: each case must exit nonzero (not by a signal) with exactly one line on
# stderr starting "tessera: error:", and leave no output file behind.
set -u
bin="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
head -c 100000 /dev/urandom >"$tmp/random.gguf"
head -c 1000000 "$model" >"$tmp/truncated.gguf"
printf 'GGUF\003\000\000\000\377\377\377\377\377\377\377\377\000\000\000\000\000\000\000\000' >"$tmp/hostile.gguf"
long="$(printf 'word %.0s' $(seq 1 400))"
: >"$tmp/empty.txt"

pass=0 fail=0
check() {  # name, then the command's arguments
  local name="$1"; shift
  timeout 120 "$bin" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null  # a hang fails (124) instead of stalling CI
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" -eq 1 ] && grep -q '^tessera: error: ' "$tmp/err"; then
    pass=$((pass + 1)); echo "ok   $name: $(cat "$tmp/err")"
  else
    fail=$((fail + 1)); echo "FAIL $name: rc=$rc stderr lines=$lines: $(head -c 300 "$tmp/err")"
  fi
}

check "missing model"        run -m "$tmp/nope.gguf" -p hi
check "model is a directory" run -m "$tmp" -p hi
check "random bytes model"   run -m "$tmp/random.gguf" -p hi
check "truncated model"      run -m "$tmp/truncated.gguf" -p hi
check "hostile counts"       run -m "$tmp/hostile.gguf" -p hi
check "empty file"           run -m /dev/null -p hi
check "empty prompt"         run -m "$model" -p ""
check "prompt over context"  run -m "$model" -c 64 -p "$long"
check "unknown flag"         run -m "$model" -p hi --bogus
check "unknown subcommand"   frobnicate
check "no subcommand"
check "bad thread count"     run -m "$model" -p hi -t 0
check "bad temperature"      run -m "$model" -p hi --temp -1
check "bad top-p"            run -m "$model" -p hi --top-p 2
check "missing flag value"   run -m "$model" -p
check "unwritable output"    run -m "$model" -p hi -n 4 -o "$tmp/no/such/dir/out.txt"
check "output is a dir"      run -m "$model" -p hi -n 4 -o "$tmp"
check "bad isa"              run -m "$model" -p hi --isa sse9
check "bf16 vision, no image" run -m "$model" -p hi --bf16-vision
check "fp32 vision, no image" run -m "$model" -p hi --fp32-vision
check "bf16 and fp32 vision" run -m "$model" -p hi --bf16-vision --fp32-vision
check "q8 vision, no image"   run -m "$model" -p hi --q8-vision
check "tokenize bad model"   tokenize -m "$tmp/random.gguf" -p hi
check "eval: missing text"   eval -m "$model" -f "$tmp/nope.txt"
check "eval: f32 reference, no reference" eval -m "$model" -f "$root/README.md" --reference-f32-activations
check "eval: empty text"     eval -m "$model" -f "$tmp/empty.txt"
check "eval: a device as text" eval -m "$model" -f /dev/zero
check "eval: text under one chunk" eval -m "$model" -f "$root/README.md" -c 100000
check "eval: unwritable json" eval -m "$model" -f "$root/README.md" --json "$tmp/no/such/dir/e.json"
# Qwen3-VL: an image whose tokens cannot fit the context is refused before it is encoded
qwen="$root/tests/fixtures/qwen3vl/tiny"
check "q8 vision on Qwen3-VL" run -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" \
  --image "$root/tests/fixtures/vision/screens/xterm_700x450.png" -p hi -n 1 --q8-vision
# quantize: bad budgets, types, files; nothing written (the leftover check below covers q.gguf)
qz=(quantize -m "$qwen/text.gguf" -o "$tmp/q.gguf" -c 64 --layer-bands 1)
check "quantize: no budget"        "${qz[@]}"
check "quantize: two budgets"      "${qz[@]}" --max-kld 0.1 --max-bpw 5
check "quantize: bad size"         "${qz[@]}" --max-size 12X
check "quantize: bad type"         "${qz[@]}" --max-kld 0.1 --types q4_k,q9
check "quantize: float type"       "${qz[@]}" --max-kld 0.1 --types f16
check "quantize: missing model"    quantize -m "$tmp/nope.gguf" -o "$tmp/q.gguf" --max-kld 0.1
check "quantize: model is a dir"   quantize -m "$tmp" -o "$tmp/q.gguf" --max-kld 0.1
check "quantize: over the reference" quantize -m "$qwen/text.gguf" -o "$qwen/text.gguf" --max-kld 0.1
check "quantize: unwritable output" quantize -m "$qwen/text.gguf" -o "$tmp/no/such/dir/q.gguf" --max-kld 0.1
check "quantize: missing text"     "${qz[@]}" --max-kld 0.1 -f "$tmp/nope.txt"
check "quantize: text under a chunk" quantize -m "$qwen/text.gguf" -o "$tmp/q.gguf" --max-kld 0.1 -f "$root/README.md" -c 100000
check "quantize: missing sensitivity" "${qz[@]}" --max-kld 0.1 --sensitivity "$tmp/nope.json"
check "quantize: not a sensitivity" "${qz[@]}" --max-kld 0.1 --sensitivity "$qwen/manifest.json"
check "quantize: reuse and save"   "${qz[@]}" --max-kld 0.1 --sensitivity "$qwen/manifest.json" --save-sensitivity "$tmp/s.json"
check "quantize: impossible budget" "${qz[@]}" --types q4_0 --max-bpw 1
check "Qwen3-VL image over context" run -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" -c 512 -p hi \
  --image "$root/tests/fixtures/vision/screens/desktop_1920x1080.png"
check "Qwen3-VL pixels too few" run -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" -p hi --vision-max-pixels 10 \
  --image "$root/tests/fixtures/vision/screens/xterm_700x450.png"
check "eval: reference of another vocabulary" eval -m "$model" -f "$root/README.md" --reference "$qwen/text.gguf"
check "Qwen3-VL mmproj, SmolLM2 text" run -m "$model" --mmproj "$qwen/mmproj.gguf" -p hi \
  --image "$root/tests/fixtures/vision/screens/xterm_700x450.png"
check "Qwen3-VL watch, SmolVLM's knob" watch -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" \
  --frames "$root/tests/fixtures/watch/idle" --approx-global 2
check "Qwen3-VL watch, frames over context" watch -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" -c 512 \
  --frames "$root/tests/fixtures/watch/idle"
# tessera eval --image
check "eval: no text, no image"  eval -m "$model"
check "eval: per layer, no reference" eval -m "$model" -f "$root/README.md" -c 64 --per-layer
check "eval: bad requantize type" eval -m "$model" -f "$root/README.md" --requantize a4g128 --json "$tmp/rq.json"
check "eval: requantize a directory" eval -m "$tmp" -f "$root/README.md" --requantize a4g64 --json "$tmp/rq.json"
check "eval: requantize an image" eval -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" --reference-fp32-vision \
  --image "$root/tests/fixtures/vision/screens/xterm_700x450.png" --requantize a4g64
check "eval: image without mmproj" eval -m "$qwen/text.gguf" --image "$root/tests/fixtures/vision/screens/xterm_700x450.png" --reference-fp32-vision
check "eval: image without reference" eval -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" --image "$root/tests/fixtures/vision/screens/xterm_700x450.png"
check "eval: image and text"     eval -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" --reference-fp32-vision -f "$root/README.md" \
  --image "$root/tests/fixtures/vision/screens/xterm_700x450.png"
check "eval: mmproj for a text"  eval -m "$model" -f "$root/README.md" --mmproj "$qwen/mmproj.gguf"
check "eval: missing image"      eval -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" --reference-fp32-vision --image "$tmp/nope.png"
# tessera plan: flags and files it reads (a saved calibration is hostile input too)
printf '{"name": "x", "mem_bytes": -5}' >"$tmp/bad_device.json"
check "plan: bad screen"       plan --screen 1920by1080 --calibration "$tmp/bad_device.json"
check "plan: unknown device"   plan --device m9-ultra --calibration "$tmp/bad_device.json" --screen 1920x1080
check "plan: hostile calibration" plan --calibration "$tmp/bad_device.json"
check "plan: calibration is a directory" plan --calibration "$tmp"
check "plan: memory for this machine" plan --memory-gb 16
check "plan: unknown weight type" plan --weights q3_z --calibration "$tmp/bad_device.json"
check "plan: missing model"     plan -m "$tmp/nope.gguf" --calibration "$tmp/bad_device.json"
check "plan: random bytes model" plan -m "$tmp/random.gguf" --calibration "$tmp/bad_device.json"
check "plan: bad cadence"       plan --cadence 0
check "plan: unwritable json"   plan --json "$tmp/no/such/dir/p.json"
check "run: SmolVLM knob without an image" run -m "$model" -p hi --vision-longest-edge 1024
check "run: Qwen3-VL with SmolVLM's knob" run -m "$qwen/text.gguf" --mmproj "$qwen/mmproj.gguf" -p hi --vision-longest-edge 1024 \
  --image "$root/tests/fixtures/vision/screens/xterm_700x450.png"
rm -f "$tmp/bad_device.json"
# the screen path
tiny="$root/tests/fixtures/vision/tiny"
screen="$root/tests/fixtures/vision/screens/xterm_700x450.png"
head -c 3000 "$screen" >"$tmp/cut.png"
python3 - "$screen" "$tmp/zero.png" <<'PY'
import sys, zlib
b = bytearray(open(sys.argv[1], "rb").read())
b[16:20] = b"\0\0\0\0"  # IHDR width = 0, with a valid CRC
b[29:33] = zlib.crc32(bytes(b[12:29])).to_bytes(4, "big")
open(sys.argv[2], "wb").write(b)
PY
vlm=(run -m "$tiny/text.gguf" --mmproj "$tiny/mmproj.gguf" -p "What is on the screen?" -n 4)
tinyw=(-m "$tiny/text.gguf" --mmproj "$tiny/mmproj.gguf")
check "image missing"        "${vlm[@]}" --image "$tmp/nope.png"
check "image truncated"      "${vlm[@]}" --image "$tmp/cut.png"
check "image zero width"     "${vlm[@]}" --image "$tmp/zero.png"
check "image not an image"   "${vlm[@]}" --image "$tmp/random.gguf"
check "image over budget"    "${vlm[@]}" --image "$screen" --image-max-pixels 100000
check "SmolVLM watch, Qwen3-VL knob" watch "${tinyw[@]}" --frames "$root/tests/fixtures/watch/idle" --vision-max-pixels 100000
check "image without mmproj" run -m "$tiny/text.gguf" -p hi --image "$screen"
check "mmproj without image" run -m "$tiny/text.gguf" -p hi --mmproj "$tiny/mmproj.gguf"
check "mmproj is a text gguf" run -m "$tiny/text.gguf" -p hi --mmproj "$tiny/text.gguf" --image "$screen"
check "mmproj misfits model" run -m "$model" -p hi --mmproj "$tiny/mmproj.gguf" --image "$screen"
check "prompt over context (image)" "${vlm[@]}" --image "$screen" -c 256
rm -f "$tmp/cut.png" "$tmp/zero.png"

[ -z "$(ls "$tmp" | grep -v -e random.gguf -e truncated.gguf -e hostile.gguf -e empty.txt -e out -e err)" ] || { echo "FAIL leftover files: $(ls "$tmp")"; fail=$((fail + 1)); }

# watching: an empty frame directory, a frame list naming nothing, no vision model, bad knobs
mkdir -p "$tmp/noframes"
: >"$tmp/empty.list"
check "watch: empty directory"   watch "${tinyw[@]}" --frames "$tmp/noframes"
check "watch: empty list"        watch "${tinyw[@]}" --frames "$tmp/empty.list"
check "watch: missing frames"    watch "${tinyw[@]}" --frames "$tmp/nope"
check "watch: no vision model"   watch -m "$root/tests/fixtures/vision/tiny/text.gguf" --frames "$root/tests/fixtures/vision/screens"
check "watch: bad approx-kv"     watch "${tinyw[@]}" --frames "$root/tests/fixtures/vision/screens" --approx-kv 2
# a corrupt frame among good ones is skipped with its reason; the others are answered
mkdir -p "$tmp/frames"
cp "$root/tests/fixtures/vision/screens/xterm_700x450.png" "$tmp/frames/a.png"
head -c 3000 "$root/tests/fixtures/vision/screens/xterm_700x450.png" >"$tmp/frames/b.png"
cp "$root/tests/fixtures/vision/screens/xterm_700x450.png" "$tmp/frames/c.png"
if "$bin" watch "${tinyw[@]}" --frames "$tmp/frames" -n 2 --validate 1 >"$tmp/out" 2>"$tmp/err" &&
   [ "$(grep -c '"skipped": "' "$tmp/out")" -eq 1 ] && [ "$(grep -c '"bitwise_equal": true' "$tmp/out")" -eq 2 ]; then
  pass=$((pass + 1)); echo "ok   watch skips the corrupt frame: $(grep '"skipped"' "$tmp/out" | head -c 160)"
else
  fail=$((fail + 1)); echo "FAIL watch with a corrupt frame: $(head -c 400 "$tmp/out") $(cat "$tmp/err")"
fi
# and the good paths: -o writes the whole answer atomically; the screen path answers
if "$bin" "${vlm[@]}" --image "$screen" >"$tmp/out" 2>"$tmp/err" && grep -q "vision encode" "$tmp/err"; then
  pass=$((pass + 1)); echo "ok   screen question answered: $(grep 'vision encode' "$tmp/err")"
else
  fail=$((fail + 1)); echo "FAIL screen question: $(cat "$tmp/err")"
fi
if "$bin" run -m "$model" -p "Say hi" -n 8 -o "$tmp/answer.txt" 2>/dev/null && [ -s "$tmp/answer.txt" ]; then
  pass=$((pass + 1)); echo "ok   output file written"
else
  fail=$((fail + 1)); echo "FAIL output file not written"
fi
# tessera plan's good paths, on a saved calibration (no timing here): a file pair, a built-in
# model on an Apple device, the options listing; each prints its tables and writes its JSON
dev="$root/tests/fixtures/plan/device_example.json"
if "$bin" plan -m "$tiny/text.gguf" --mmproj "$tiny/mmproj.gguf" --calibration "$dev" --json "$tmp/plan.json" >"$tmp/out" 2>"$tmp/err" &&
   grep -q "resident after an image question" "$tmp/out" && grep -q '"peak_question"' "$tmp/plan.json" &&
   "$bin" plan -m qwen3-vl-2b --weights q4_k --device m2-pro --memory-gb 32 --calibration "$dev" >"$tmp/out" 2>"$tmp/err" &&
   grep -q "m2-pro 32 GB" "$tmp/out" &&
   "$bin" plan --options --device m1 --calibration "$dev" >"$tmp/out" 2>"$tmp/err" && grep -q "options fit m1 8 GB" "$tmp/out"; then
  pass=$((pass + 1)); echo "ok   plan: $(grep 'options fit' "$tmp/out")"
else
  fail=$((fail + 1)); echo "FAIL plan: $(head -c 400 "$tmp/out") $(cat "$tmp/err")"
fi
rm -f "$tmp/plan.json"
# chat keeps the KV cache: the second turn evaluates only its own tokens
second=$(printf 'What is the capital of France?\nAnd of Italy?\n' | "$bin" chat -m "$model" -n 24 2>&1 >/dev/null | grep -o 'prompt: [0-9]* tokens' | sed -n 2p | grep -o '[0-9]*')
if [ -n "$second" ] && [ "$second" -lt 20 ]; then
  pass=$((pass + 1)); echo "ok   chat reuses the cache (second turn: $second prompt tokens)"
else
  fail=$((fail + 1)); echo "FAIL chat second turn prompt tokens: '$second'"
fi

bash "$root/tests/cli_hostile_input.sh" "$bin" "$tmp" || fail=$((fail + 1))
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
