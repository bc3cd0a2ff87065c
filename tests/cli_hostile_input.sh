#!/usr/bin/env bash
# Hostile input and misuse, as an attacker or a clumsy user would try them: JSON nested
# 100,000 deep, config numbers that wrap when narrowed, FIFOs and devices where files are
# expected, outputs that are devices, FIFOs or symlinks, lost writes on stdout, truncated and
# oversized images, too many threads, a model truncated while mapped, out-of-range flags.
# Each error case: nonzero exit (not a signal), one line "tessera: error: ...", within a time
# limit (a hang fails). Called by cli_bad_input.sh with the binary and a scratch directory.
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
tmp="$2/hostile"
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
tiny="$root/tests/fixtures/vision/tiny"
screens="$root/tests/fixtures/vision/screens"
mlx="$root/tests/fixtures/mlx/tiny-g32"
vlm=(-m "$tiny/text.gguf" --mmproj "$tiny/mmproj.gguf")
mkdir -p "$tmp"
cd "$tmp" || exit 1

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
is_error() {  # rc, name: one "tessera: error:" line in err, a plain nonzero exit
  local rc=$1 name=$2 lines
  lines=$(wc -l <err)
  if [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] && [ "$lines" -eq 1 ] && grep -q '^tessera: error: ' err; then
    ok "$name: $(cat err)"
  else
    bad "$name: rc=$rc stderr lines=$lines: $(head -c 300 err)"
  fi
}
check() {  # name, then arguments; stdin from /dev/null
  local name="$1"; shift
  timeout 60 "$bin" "$@" >out 2>err </dev/null
  is_error $? "$name"
}

# 1. JSON nested 100,000 deep (tokenizer.json, config.json): bounded, not a stack overflow
cp -r "$mlx" hf_nest_tok
cp -r "$mlx" hf_nest_cfg
python3 - <<'PY'
import json
deep = "[" * 100000 + '"ByteLevel"' + "]" * 100000
t = json.load(open("hf_nest_tok/tokenizer.json"))
t["pre_tokenizer"] = "@@"
open("hf_nest_tok/tokenizer.json", "w").write(json.dumps(t).replace('"@@"', deep))
c = json.load(open("hf_nest_cfg/config.json"))
c["extra"] = "@@"
open("hf_nest_cfg/config.json", "w").write(json.dumps(c).replace('"@@"', deep))
PY
check "tokenizer.json nested 100000 deep" run -m hf_nest_tok -p hi -n 2
check "config.json nested 100000 deep"    run -m hf_nest_cfg -p hi -n 2

# 7. config integers range-checked as 64-bit before narrowing
for case in "hidden_size 4294967328" "max_position_embeddings 4294967301" "num_hidden_layers 2.5" "vocab_size -1"; do
  set -- $case
  rm -rf hf_cfg && cp -r "$mlx" hf_cfg
  python3 - "$1" "$2" <<'PY'
import json, sys
c = json.load(open("hf_cfg/config.json"))
c[sys.argv[1]] = json.loads(sys.argv[2])
json.dump(c, open("hf_cfg/config.json", "w"))
PY
  check "config $1 = $2" run -m hf_cfg -p hi -n 2
done

# 5. FIFOs (no writer) where a file is expected: refused at once, never waited on
mkfifo fifo
check "FIFO as -m"       run -m fifo -p hi -n 2
check "FIFO as --mmproj" run -m "$tiny/text.gguf" --mmproj fifo --image "$screens/xterm_700x450.png" -p hi -n 2
check "FIFO as --image"  run "${vlm[@]}" --image fifo -p hi -n 2
check "FIFO as --frames" watch "${vlm[@]}" --frames fifo -n 2
check "FIFO as --probe"  profile -m "$model" -p hi -n 2 --probe fifo
echo "$tmp/fifo" >fifo.list
check "FIFO in a frame list (skipped, then no frame)" watch "${vlm[@]}" --frames fifo.list -n 2
grep -q '"skipped": ".*pipe or FIFO' out && ok "the FIFO frame's skip reason is reported" || bad "FIFO frame skip line: $(head -c 300 out)"
# 4. devices as frame lists: refused, not read without bound
check "--frames /dev/urandom" watch "${vlm[@]}" --frames /dev/urandom -n 2
check "--frames /dev/zero"    watch "${vlm[@]}" --frames /dev/zero -n 2
# an image piped on /dev/stdin: a clear refusal, not "is empty"
timeout 60 "$bin" run "${vlm[@]}" --image /dev/stdin -p hi -n 2 <"$screens/xterm_700x450.png" >out 2>err
[ $? -eq 0 ] && ok "--image /dev/stdin redirected from a file works" || bad "--image /dev/stdin from a file: $(cat err)"
cat "$screens/xterm_700x450.png" | timeout 60 "$bin" run "${vlm[@]}" --image /dev/stdin -p hi -n 2 >out 2>err
is_error $? "--image /dev/stdin from a pipe"

# 6. truncated JPEGs (baseline and progressive) are errors, also as watched frames; a small
# file declaring a huge image is refused before decoding (JPEG and PNG); raw frame headers
# do not allocate before pixels arrive
jpg="$screens/xterm_1280x720.jpg"
prog="$root/tests/fixtures/images/xterm_700x450_progressive.jpg"
head -c $(($(stat -c %s "$jpg") / 2)) "$jpg" >half.jpg
head -c $(($(stat -c %s "$prog") / 2)) "$prog" >half_progressive.jpg
check "baseline JPEG cut in half"    run "${vlm[@]}" --image half.jpg -p hi -n 2
check "progressive JPEG cut in half" run "${vlm[@]}" --image half_progressive.jpg -p hi -n 2
mkdir -p frames_half && cp half.jpg frames_half/a.jpg && cp half_progressive.jpg frames_half/b.jpg
check "watch: only truncated JPEG frames" watch "${vlm[@]}" --frames frames_half -n 2
[ "$(grep -c '"skipped": ".*Premature end' out)" -eq 2 ] && ok "watch skips both truncated JPEGs" || bad "watch truncated JPEG skips: $(head -c 400 out)"
python3 - "$jpg" "$screens/xterm_700x450.png" <<'PY'
import sys, zlib
j = bytearray(open(sys.argv[1], "rb").read())
i = j.find(b"\xff\xc0")  # SOF0: height, width at +5, +7
j[i + 5:i + 7] = (8192).to_bytes(2, "big"); j[i + 7:i + 9] = (8192).to_bytes(2, "big")
open("bomb.jpg", "wb").write(j[:761])
p = bytearray(open(sys.argv[2], "rb").read())
p[16:20] = (8192).to_bytes(4, "big"); p[20:24] = (8192).to_bytes(4, "big")
p[29:33] = zlib.crc32(bytes(p[12:29])).to_bytes(4, "big")
open("bomb.png", "wb").write(p)
PY
check "761-byte JPEG declaring 8192x8192" run "${vlm[@]}" --image bomb.jpg -p hi -n 2
grep -q "cannot fit in 761 bytes" err && ok "  refused by its size, before decoding" || bad "bomb JPEG reason: $(cat err)"
check "46 KB PNG declaring 8192x8192"      run "${vlm[@]}" --image bomb.png -p hi -n 2
printf 'TSRF\000\040\000\000\000\040\000\000\004\000\000\000' >header_only.raw
timeout 60 "$bin" watch "${vlm[@]}" --frames - -n 2 <header_only.raw >out 2>err
is_error $? "raw frame header (8192x8192x4) without pixels"
grep -q 'truncated frame: expected 268435456 bytes of pixels, got 0' out && ok "  reported as a truncated frame" || bad "raw header: $(head -c 300 out)"

# 2. -o into devices and FIFOs writes into them (never replaces them); symlinks are followed
if [ "$(id -u)" -eq 0 ] && mknod null_dev c 1 3 2>/dev/null && mknod full_dev c 1 7 2>/dev/null; then
  timeout 60 "$bin" run -m "$model" -p hi -n 2 -o null_dev >out 2>err
  [ $? -eq 0 ] && [ -c null_dev ] && ok "-o a null device: written into, still a device" || bad "-o null device: $(ls -l null_dev) $(cat err)"
  check "-o a full device (ENOSPC)" run -m "$model" -p hi -n 2 -o full_dev
  [ -c full_dev ] && ok "  the full device is still a device" || bad "-o full device was replaced: $(ls -l full_dev)"
else
  echo "skip -o device nodes (mknod needs root)"
fi
mkfifo out_fifo
(timeout 60 cat out_fifo >fifo_got) &
reader=$!
timeout 60 "$bin" run -m "$model" -p hi -n 4 -o out_fifo >out 2>err
rc=$?
wait $reader
[ $rc -eq 0 ] && [ -p out_fifo ] && [ -s fifo_got ] && ok "-o a FIFO with a reader: $(wc -c <fifo_got) bytes through it, still a FIFO" \
  || bad "-o FIFO: rc=$rc $(ls -l out_fifo) $(cat err)"
mkfifo lonely_fifo
check "-o a FIFO with no reader" run -m "$model" -p hi -n 2 -o lonely_fifo
echo old >target.txt
ln -s target.txt link.txt
timeout 60 "$bin" run -m "$model" -p hi -n 4 -o link.txt >out 2>err
[ $? -eq 0 ] && [ -L link.txt ] && [ "$(cat target.txt)" != old ] && ok "-o a symlink: its target rewritten, the link kept" \
  || bad "-o symlink: $(ls -l link.txt) $(cat err)"
[ -z "$(ls -A | grep '^\.tessera-out-')" ] && ok "no temporary output files left" || bad "leftover temporaries: $(ls -A | grep '^\.tessera-out-')"

# 3. lost writes on stdout: a full disk or a closed descriptor is an error, not exit 0
for cmd in "run -m $model -p hi -n 4" "tokenize -m $model -p hi" "watch ${vlm[*]} --frames $screens -n 2"; do
  timeout 120 "$bin" $cmd >/dev/full 2>err
  is_error $? "stdout on a full device: ${cmd%% *}"
  timeout 120 "$bin" $cmd >&- 2>err
  is_error $? "stdout closed: ${cmd%% *}"
done

# 8. -t beyond the cores: a warning, the cores used, a normal run
timeout 120 "$bin" run -m "$model" -p hi -n 4 -t 1024 >out 2>err
rc=$?
[ $rc -eq 0 ] && grep -q "warning: -t 1024 is more threads than" err && ok "-t 1024: $(grep warning err)" || bad "-t 1024: rc=$rc $(head -c 300 err)"

# 9. the model truncated while mapped: one line naming the file, exit 1 (not SIGBUS)
cp "$model" mapped.gguf
mkfifo chat_in
(timeout 120 "$bin" chat -m mapped.gguf -n 4 <chat_in >chat_out 2>chat_err; echo $? >chat_rc) &
chat=$!
exec 3>chat_in
echo "hello" >&3
for _ in $(seq 1 300); do grep -q "prompt:" chat_err 2>/dev/null && break; sleep 0.2; done
truncate -s 1000000 mapped.gguf
echo "and again" >&3
exec 3>&-
wait $chat
grep -v -e '^\[prompt' -e '^$' chat_err >err
is_error "$(cat chat_rc)" "model truncated while mapped (between chat turns)"

# also noted: out-of-range seeds, the sampling flags' ranges as the sampler checks them, a
# context that fills up is said, overlapping GGUF tensors (unit test Gguf.OverlappingTensorsAreRejected)
check "--seed -1"        run -m "$model" -p hi -n 2 --seed -1
check "--seed 2^64"      run -m "$model" -p hi -n 2 --seed 18446744073709551616
check "--top-p 0"        run -m "$model" -p hi -n 2 --top-p 0
check "--min-p 1"        run -m "$model" -p hi -n 2 --min-p 1
check "--repeat-penalty 0" run -m "$model" -p hi -n 2 --repeat-penalty 0
timeout 60 "$bin" run -m "$model" -p hi -n 2 --seed 18446744073709551615 --temp 0.7 >out 2>err && ok "--seed 2^64-1 accepted" || bad "--seed max: $(cat err)"
timeout 60 "$bin" run -m "$model" -c 40 -n 100 -p hi >out 2>err
grep -q "note: stopped after .* the context is full" err && ok "-c 40 -n 100: $(grep note err)" || bad "-c 40 -n 100 says nothing: $(cat err)"

echo "hostile input: $pass passed, $fail failed"
[ $fail -eq 0 ]
