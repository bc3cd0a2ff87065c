"""Summarizes the watch --validate --validate-fp32-vision runs in this folder, one row per file.

Each file: `tessera watch -m .peers/smolvlm-full/text.gguf --mmproj M --frames FRAMES --no-reuse
--validate 1 --validate-fp32-vision -n 8 -t 2 [--f32-activations] [--bf16-vision | --f16-vision]`
(with the Q8_0 mmproj, `--reference-mmproj .peers/smolvlm-full/mmproj.gguf`), FRAMES the 8 frames
frame_000 and frame_003 of tests/fixtures/watch/{typing,scroll,switch,browse}.
"""
import json
import sys
from pathlib import Path

for f in sorted(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent).glob("*.jsonl")):
    rows = [json.loads(l) for l in f.open()]
    v = [r["validate"] for r in rows if "validate" in r]
    if not v:
        continue
    rel = [x["emb_max_rel"] for x in v]
    kl = [x["next_token_kl"] for x in v]
    same = sum(x["same_answer"] for x in v)
    print(f"{f.stem}: embeddings max rel {min(rel) * 100:.2f}-{max(rel) * 100:.2f}%, "
          f"KL mean {sum(kl) / len(kl):.2e} max {max(kl):.2e}, same answer {same}/{len(v)}")
