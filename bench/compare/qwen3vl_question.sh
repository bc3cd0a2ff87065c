#!/usr/bin/env bash
# One screenshot question on Qwen3-VL, tessera against llama-mtmd-cli on the same files, threads
# and image-token count, rounds interleaved; prints vision encode, prefill and decode per run and
# the medians. Needs the peer (bench/peers/build_llamacpp.sh) and a Qwen3-VL pair, e.g. the
# seeded-random 2B from bench/reference/make_qwen3vl_reference.py --config 2b (+ llama-quantize
# for Q4_K_M).
# Usage: bench/compare/qwen3vl_question.sh TEXT.gguf MMPROJ.gguf IMAGE [ROUNDS=3] [MAX_TOKENS=256] [THREADS=2]
# Env: LLAMA_BIN (default .peers/llama.cpp-build/bin; .peers/llama.cpp-build-avx2/bin for the AVX2
# class), TESSERA_ARGS (extra flags for every tessera run, e.g. "--isa avx2").
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
text="$1" mmproj="$2" image="$3" rounds="${4:-3}" tokens="${5:-256}" threads="${6:-2}"
bin="${LLAMA_BIN:-$root/.peers/llama.cpp-build/bin}"
q="What is the user doing?"
# the same token budget on both sides: llama.cpp counts tokens, the processor pixels (32 x 32 per token)
pixels=$((tokens * 1024))
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf "engine\tround\timage_tokens\tvision_ms\tprefill_tokens\tprefill_ms\tdecode_tok_s\n"
for r in $(seq 1 "$rounds"); do
  for flags in "" "--f32-activations"; do
    "$root/build/tessera" run -m "$text" --mmproj "$mmproj" --image "$image" --vision-max-pixels "$pixels" -p "$q" -n 16 \
      --temp 0 -t "$threads" ${TESSERA_ARGS:-} $flags >/dev/null 2>"$tmp/t.err" || { cat "$tmp/t.err"; exit 1; }
    LABEL="${flags:-}" perl -ne 'BEGIN{$n=$ENV{LABEL}} if (/(\d+) image tokens .* vision encode ([\d.]+) ms/) { ($it,$v)=($1,$2) }
              if (/prefill: (\d+) tokens, ([\d.]+) ms.*decode: \d+ tokens, [\d.]+ ms, ([\d.]+) tok/) { print "tessera" . ($n ? " $n" : "") . "\t'"$r"'\t$it\t$v\t$1\t$2\t$3\n" }' \
      "$tmp/t.err"
  done
  LD_LIBRARY_PATH="$bin" "$bin/llama-mtmd-cli" -m "$text" --mmproj "$mmproj" --image "$image" --image-max-tokens "$tokens" -p "$q" \
    -n 16 --temp 0 --ignore-eos -t "$threads" -c 4096 --no-warmup -v >/dev/null 2>"$tmp/l.err" || { tail -5 "$tmp/l.err"; exit 1; }
  # clip's encode = from copying the image in to the image-token decode's start; prefill = prompt eval minus encode
  perl -ne 'sub t { my ($m,$s,$ms)=split /\./, $_[0]; return ($m*60+$s)*1000+$ms }
            if (/^(\S+) D clip_encode: copying image/) { $c=t($1) }
            if (/^(\S+) I image decoded \(batch \d+\/\d+\) in (\d+) ms/) { $enc=t($1)-$2-$c }
            if (/total (\d+) tokens/) { $it=$1 }
            if (/prompt eval time =\s+([\d.]+) ms \/\s+(\d+) tokens/) { ($pe,$pt)=($1,$2) }
            if (/ eval time =\s+[\d.]+ ms \/\s+\d+ runs .*?([\d.]+) tokens per second/) { $dt=$1 }
            END { printf "llama.cpp\t'"$r"'\t%d\t%.1f\t%d\t%.1f\t%.2f\n", $it, $enc, $pt, $pe-$enc, $dt }' "$tmp/l.err"
done
