# Qwen3-VL-2B text (Q4_K_M), tessera's default vs llama-bench, pp512 and tg32, alternated rounds:
# the AVX2 proxy (tessera --isa avx2 vs llama.cpp's AVX2 build) and native (AVX-512 VNNI build).
M2=.peers/qwen3vl-2b/text-Q4_K_M.gguf
for r in 1 2 3; do
  for isa in avx2 native; do
    if [ $isa = avx2 ]; then cap="--isa avx2"; lb=.peers/llama.cpp-build-avx2/bin; else cap=""; lb=.peers/llama.cpp-build/bin; fi
    t=$(nice -n -15 build/tessera bench -t 2 -p 512 -n 32 -d 0 -r 1 $cap -m $M2 --json | python3 -c "import json,sys;r=json.load(sys.stdin)['results'];print(' '.join(str(round(x['median'],2)) for x in r))")
    l=$(nice -n -15 $lb/llama-bench -m $M2 -t 2 -r 1 -o json -p 512 -n 32 2>/dev/null | python3 -c "import json,sys;print(' '.join(str(round(x['avg_ts'],2)) for x in json.load(sys.stdin)))")
    echo "round $r $isa: tessera pp512 tg32 = $t | llama.cpp pp512 tg32 = $l"
  done
done
