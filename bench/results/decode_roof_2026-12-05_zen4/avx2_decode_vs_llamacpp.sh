# interleaved: tessera --isa avx2 vs llama-bench (AVX2 build), decode only
M2=.peers/qwen3vl-2b/text-Q4_K_M.gguf
for r in 1 2 3 4 5; do
  t2=$(nice -n -15 build/tessera bench -t 2 -p 0 -n 32 -d 0 -r 1 --isa avx2 -m $M2 --json | python3 -c "import json,sys;print(json.load(sys.stdin)['results'][0]['median'])")
  l2=$(nice -n -15 .peers/llama.cpp-build-avx2/bin/llama-bench -m $M2 -t 2 -r 1 -o json -p 0 -n 32 2>/dev/null | python3 -c "import json,sys;print(json.load(sys.stdin)[0]['avg_ts'])")
  ts=$(nice -n -15 build/tessera bench -t 2 -p 0 -n 128 -d 0 -r 1 --isa avx2 --json | python3 -c "import json,sys;print(json.load(sys.stdin)['results'][0]['median'])")
  ls=$(nice -n -15 .peers/llama.cpp-build-avx2/bin/llama-bench -m models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2 -r 1 -o json -p 0 -n 128 2>/dev/null | python3 -c "import json,sys;print(json.load(sys.stdin)[0]['avg_ts'])")
  echo "round $r: 2B tg32 tessera $t2 llama $l2 ratio $(python3 -c "print(round($t2/$l2,2))") | SmolLM2 tg128 tessera $ts llama $ls ratio $(python3 -c "print(round($ts/$ls,2))")"
done
