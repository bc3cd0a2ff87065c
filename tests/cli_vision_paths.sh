#!/usr/bin/env bash
# Which vision path the CLI picks for a quantized mmproj (tools/cli_common.cpp, vision_options):
# 8-bit activations by default where they are the fast path (the AVX-512 VNNI level without AMX:
# q8_vision_fast), the float path elsewhere; --f32-activations or a named --bf16/--f16/--fp32-vision
# keeps the float path; --q8-activations asks for 8-bit anywhere, --f32-activations then only for
# the text. A float mmproj takes 8-bit activations too, quantized to Q8_0 at load, by default where
# that beats its bf16 path (q8_vision_fast with bf16 the float default: AMD Zen 4), and anywhere with
# --q8-vision. `run` names the path it took ("| int8+bf16 vision |"). Usage: cli_vision_paths.sh BIN
set -u
bin="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
tiny="$root/tests/fixtures/vision/tiny"
image="$root/tests/fixtures/vision/screens/xterm_700x450.png"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

"$bin" convert -m "$tiny/mmproj.gguf" -o "$tmp/mmproj-q8_0.gguf" --type q8_0 >/dev/null 2>&1 || { echo "FAIL convert"; exit 1; }
isa=$("$bin" bench -m "$tiny/text.gguf" -p 1 -n 0 -d 0 -r 1 --json 2>/dev/null | grep -o '"isa_in_use": "[a-z0-9]*"' | cut -d'"' -f4)
[ -n "$isa" ] || { echo "FAIL no isa_in_use from tessera bench --json"; exit 1; }
path() {  # mmproj, then flags: the path `run` reports
  local mm="$1"; shift
  timeout 120 "$bin" run -m "$tiny/text.gguf" --mmproj "$mm" --image "$image" -p hi -n 1 -t 2 "$@" 2>&1 </dev/null |
    grep -o '| [a-z0-9+]* vision |' | cut -d' ' -f2
}
expect() {  # name, want ("int8" = an int8+ path, "float" = any other), mmproj, flags...
  local name="$1" want="$2" mm="$3"; shift 3
  local got; got=$(path "$mm" "$@")
  local kind=float; case "$got" in int8+*) kind=int8 ;; "") kind=none ;; esac
  if [ "$kind" = "$want" ]; then ok "$name: $got"; else bad "$name: got '$got', want $want"; fi
}
q8="$tmp/mmproj-q8_0.gguf"
if [ "$isa" = avx512vnni ]; then default=int8; else default=float; fi
echo "isa in use: $isa (a Q8_0 mmproj's default: $default)"
expect "Q8_0 mmproj, default"                 "$default" "$q8"
expect "Q8_0 mmproj, --f32-activations"       float "$q8" --f32-activations
expect "Q8_0 mmproj, --fp32-vision"           float "$q8" --fp32-vision
expect "Q8_0 mmproj, --q8-activations"        int8  "$q8" --q8-activations
expect "Q8_0 mmproj, --q8-activations --f32-activations" int8 "$q8" --q8-activations --f32-activations
expect "Q8_0 mmproj, --q8-activations --fp32-vision" int8 "$q8" --q8-activations --fp32-vision
f32="$tiny/mmproj.gguf"
float_default=$(path "$f32" --f32-activations)
if [ "$isa" = avx512vnni ] && [ "$float_default" = bf16 ]; then fdefault=int8; else fdefault=float; fi
echo "a float mmproj's float path: $float_default (its default: $fdefault)"
expect "f32 mmproj, default"                  "$fdefault" "$f32"
expect "f32 mmproj, --q8-activations"         float "$f32" --q8-activations --f32-activations
expect "f32 mmproj, --fp32-vision"     float "$f32" --fp32-vision
expect "f32 mmproj, --q8-vision"              int8  "$f32" --q8-vision
expect "f32 mmproj, --q8-vision --f32-activations" int8 "$f32" --q8-vision --f32-activations
expect "f32 mmproj, --q8-vision --isa avx2"   int8  "$f32" --q8-vision --isa avx2
if [ "$isa" = avx512vnni ] || [ "$isa" = amx ]; then  # the choice follows the kernels in use, capped
  expect "Q8_0 mmproj, default, --isa avx2"     float "$q8" --isa avx2
  expect "Q8_0 mmproj, default, --isa avx512vnni" int8 "$q8" --isa avx512vnni
  expect "f32 mmproj, default, --isa avx2"      float "$f32" --isa avx2
fi
[ "$(path "$q8" --q8-activations --fp32-vision)" = "int8+fp32" ] && ok "8-bit layers with fp32 attention named int8+fp32" ||
  bad "8-bit layers with fp32 attention: $(path "$q8" --q8-activations --fp32-vision)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
