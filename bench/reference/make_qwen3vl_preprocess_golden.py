#!/usr/bin/env python3
"""Goldens for tessera's Qwen3-VL image preprocessing, from transformers' own processor.

For each test screen (and a crop small enough to be scaled up) and each max_pixels setting, runs
the image processor transformers picks by default for Qwen3-VL (Qwen2VLImageProcessor, torchvision
backend) configured as Qwen/Qwen3-VL-2B-Instruct's preprocessor_config.json (patch 16, merge 2,
temporal 2, mean = std = 0.5, size {shortest_edge: 65536, longest_edge: 16777216}, BICUBIC) and
records the grid, the token count and sha256 hashes of the resized image and of pixel_values.

  .peers/venv/bin/python bench/reference/make_qwen3vl_preprocess_golden.py \
      --out tests/fixtures/qwen3vl/preprocess_golden.json
"""
import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import torch
import transformers
from PIL import Image
from transformers import Qwen2VLImageProcessor

REPO = Path(__file__).resolve().parents[2]
SCREENS = REPO / "tests/fixtures/vision/screens"
CONFIG = dict(size={"shortest_edge": 65536, "longest_edge": 16777216}, patch_size=16, temporal_patch_size=2,
              merge_size=2, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], resample=3)
MAX_PIXELS = [16777216, 1048576, 262144, 100000]
CROP = (0, 0, 200, 150)  # left, top, right, bottom of xterm_700x450.png: 30000 px, scaled up to >= 65536


def sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cases = []
    images = [(p.name, Image.open(p)) for p in sorted(SCREENS.iterdir()) if p.suffix in (".png", ".jpg")]
    images.append(("xterm_700x450.png#crop", Image.open(SCREENS / "xterm_700x450.png").convert("RGB").crop(CROP)))
    for name, img in images:
        for mp in MAX_PIXELS:
            cfg = dict(CONFIG, size={"shortest_edge": 65536, "longest_edge": mp})
            proc = Qwen2VLImageProcessor(**cfg)
            out = proc(images=[img], return_tensors="pt")
            pv = out["pixel_values"].numpy().astype("<f4")
            t, gh, gw = [int(x) for x in out["image_grid_thw"][0]]
            cases.append(dict(image=name, max_pixels=mp, grid_thw=[t, gh, gw], resized_hw=[gh * 16, gw * 16],
                              n_tokens=t * gh * gw // 4, pixel_values_shape=list(pv.shape),
                              pixel_values_sha256=sha(pv), pixel_values_head=[float(x) for x in pv.reshape(-1)[:8]]))
            print(name, mp, cases[-1]["grid_thw"], cases[-1]["n_tokens"])
    meta = dict(processor=type(proc).__name__, transformers=transformers.__version__, torch=torch.__version__,
                config=CONFIG, crop=CROP, cases=cases)
    Path(args.out).write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
