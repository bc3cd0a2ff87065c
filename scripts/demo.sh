#!/usr/bin/env bash
# Sets everything up, then runs the main jobs on the default model:
#   1. a question answered by SmolLM2-135M-Instruct (Q4_1 GGUF), streamed, with its speed;
#   2. a question about a bundled screenshot through the whole SmolVLM screen path.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
prompt="${1:-In two sentences, why do laptops get hot when running AI models?}"
echo
echo "\$ build/tessera run -p \"$prompt\" -n 96"
build/tessera run -p "$prompt" -n 96

screen="tests/fixtures/vision/screens/xterm_1280x720.png"
text_vlm="models/smolvlm-text.gguf" mmproj="models/smolvlm-random-mmproj.gguf"
if [ ! -f "$text_vlm" ] || [ ! -f "$mmproj" ]; then
  build/tessera vlm-init --out-text "$text_vlm" --out-mmproj "$mmproj" \
    --vision-hidden 192 --vision-layers 4 --vision-heads 3 --vision-ff 768 2>/dev/null
fi
cat <<NOTE

--- The screen path (SmolVLM / Idefics3) on $screen ---
NOTE: no trained SmolVLM vision weights can be fetched here, so this runs the real SmolLM2-135M
text weights with a SEEDED RANDOM, reduced-size SigLIP vision tower (made by 'tessera vlm-init'):
the answer cannot describe the screen. Everything else is the real pipeline: Hugging Face-exact
preprocessing into 12 tiles + 1 global image, encoder, pixel-shuffle connector, prompt layout.
With real files:  build/tessera run -m SmolVLM-256M-Instruct-text.gguf \\
                    --mmproj mmproj-SmolVLM-256M-Instruct.gguf --image screen.png -p "..."
              or: build/tessera run -m path/to/SmolVLM-256M-Instruct/ --image screen.png -p "..."
NOTE
echo "\$ build/tessera run -m $text_vlm --mmproj $mmproj --image $screen -p \"What is the user doing?\" -n 32"
build/tessera run -m "$text_vlm" --mmproj "$mmproj" --image "$screen" -p "What is the user doing?" -n 32 --repeat-penalty 1.3

cat <<NOTE

--- Watching the screen: a recorded typing session (tests/fixtures/watch/typing, 8 frames) ---
Unchanged tiles come from a content-keyed cache and the KV cache is kept up to the first change;
every 4th frame is recomputed from scratch and compared bit for bit (--validate 4).
NOTE
echo "\$ build/tessera watch -m $text_vlm --mmproj $mmproj --frames tests/fixtures/watch/typing -n 8 --validate 4"
summarize_watch=$(cat <<'PY'
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    if "summary" in d:
        s = d["summary"]
        print(f"summary: {s['frames']} frames, mean encoder work {s['mean_encoder_work']:.2f} of a full encode, "
              f"mean time {s['mean_time_vs_full']:.2f} of a full recompute, "
              f"{s['bitwise_equal']}/{s['validated']} validated frames bitwise equal")
    elif "skipped" not in d:
        v = d.get("validate")
        extra = f", full recompute {v['full_ms']:.0f} ms, bitwise equal: {v['bitwise_equal']}" if v else ""
        print(f"frame {d['frame']}: {d['tiles_changed']}/{d['tiles']} tiles changed, "
              f"{d['tokens_reused']}/{d['tokens']} prompt tokens reused, {d['ms']['total']:.0f} ms{extra}")
PY
)
build/tessera watch -m "$text_vlm" --mmproj "$mmproj" --frames tests/fixtures/watch/typing -n 8 --validate 4 | python3 -c "$summarize_watch"
