"""Pillow's and torchvision's own resizes of seeded pixels over a sweep of odd sizes, as sha256
hashes of the output bytes: the independent reference for tessera's resampler (image/resize.cpp)
at shapes the screen goldens do not reach (heights around its 64-row strips, tails, 1-pixel
sides, up- and downscales). tests/test_vision.cpp (Vision.ResizeMatchesPillowAndTorchOverSizes)
makes the same pixels and compares.

  .peers/venv/bin/python bench/reference/make_resize_golden.py tests/fixtures/vision/resize/golden.json
"""
import hashlib
import json
import sys

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as F


def pixels(w, h, seed):
    # the test's hash of each byte index (uint32 arithmetic)
    i = np.arange(w * h * 3, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x01000193)
    x = (i * np.uint64(0x9E3779B1)) & np.uint64(0xFFFFFFFF)
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x85EBCA77)) & np.uint64(0xFFFFFFFF)
    x ^= x >> np.uint64(13)
    return (x >> np.uint64(24)).astype(np.uint8).reshape(h, w, 3)


CASES = [  # in_w, in_h, out_w, out_h
    (300, 200, 97, 131), (300, 200, 97, 63), (1, 130, 5, 65), (130, 1, 64, 3), (257, 129, 128, 64),
    (199, 65, 200, 64), (640, 129, 321, 127), (333, 257, 1000, 700), (701, 450, 512, 300), (1920, 1080, 1024, 576),
    (64, 64, 63, 65), (97, 300, 96, 1), (513, 300, 512, 299), (2, 2, 700, 129), (800, 4000, 37, 200),
]
PIL_FILTERS = {"lanczos": Image.LANCZOS, "bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR}
TORCH_FILTERS = {"bicubic": InterpolationMode.BICUBIC, "bilinear": InterpolationMode.BILINEAR}


def main():
    out = []
    for n, (w, h, ow, oh) in enumerate(CASES):
        px = pixels(w, h, n)
        img = Image.fromarray(px, "RGB")
        for name, f in PIL_FILTERS.items():
            b = np.asarray(img.resize((ow, oh), f)).tobytes()
            out.append({"in": [w, h], "out": [ow, oh], "seed": n, "filter": name, "arithmetic": "pillow",
                        "sha256": hashlib.sha256(b).hexdigest()})
        t = torch.from_numpy(px).permute(2, 0, 1).contiguous()
        for name, f in TORCH_FILTERS.items():
            r = F.resize(t, [oh, ow], interpolation=f, antialias=True)
            b = r.permute(1, 2, 0).contiguous().numpy().tobytes()
            out.append({"in": [w, h], "out": [ow, oh], "seed": n, "filter": name, "arithmetic": "torch",
                        "sha256": hashlib.sha256(b).hexdigest()})
    meta = {"pillow": Image.__version__, "torch": torch.__version__, "torchvision": torchvision.__version__}
    json.dump({"made_with": meta, "cases": out}, open(sys.argv[1], "w"), indent=1)
    print(f"{len(out)} resizes, {meta}")


if __name__ == "__main__":
    main()
