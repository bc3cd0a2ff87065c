// Image preprocessing of Hugging Face's Qwen2VLImageProcessor as Qwen3-VL configures it (the
// torchvision one transformers picks by default), reproduced exactly: "smart resize" of the whole
// image to multiples of patch * merge (32 px) with its pixel count kept in [min_pixels,
// max_pixels], bicubic resampling with PyTorch's uint8 antialiased arithmetic, rescale and
// normalise fused as (x - 255 mean) / (255 std), then patches of 16 x 16 grouped by 2 x 2 merge
// blocks, each row [channel][temporal copy][y][x] (a still image fills both temporal slots).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "image/image.h"
#include "image/resize.h"

namespace tessera {

struct Qwen3VLPreprocessConfig {
  int patch = 16, merge = 2, temporal = 2;
  int64_t min_pixels = 65536;     // processor size.shortest_edge
  int64_t max_pixels = 16777216;  // processor size.longest_edge: the resolution knob
  float mean[3] = {0.5f, 0.5f, 0.5f};
  float std[3] = {0.5f, 0.5f, 0.5f};
  ResampleArithmetic arithmetic = ResampleArithmetic::Torch;
  int factor() const { return patch * merge; }
  // These settings with max_pixels bounded to `max` (0: unchanged; at least one merged token),
  // min_pixels lowered to it when above.
  Qwen3VLPreprocessConfig with_max_pixels(int64_t max) const {
    Qwen3VLPreprocessConfig c = *this;
    if (max > 0) c.max_pixels = std::max<int64_t>(max, static_cast<int64_t>(factor()) * factor());
    c.min_pixels = std::min(c.min_pixels, c.max_pixels);
    return c;
  }
};

struct Qwen3VLPatches {
  int grid_t = 1, grid_h = 0, grid_w = 0;  // in patches (image_grid_thw)
  ImageRGB resized;                        // the smart-resized image
  std::vector<float> pixels;               // grid_h * grid_w rows of 3 * temporal * patch^2 (pixel_values)
  int row_size = 0;
  // merged tokens the language model sees: one per merge x merge block of patches
  int n_tokens(const Qwen3VLPreprocessConfig& c) const { return grid_t * grid_h * grid_w / (c.merge * c.merge); }
};

// transformers' smart_resize (qwen2_vl image processing): the (height, width) to resize to.
// Throws tessera::Error for an aspect ratio over 200 or sizes out of range.
void qwen3vl_smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels, int& out_h, int& out_w);

Qwen3VLPatches preprocess_qwen3vl(const ImageRGB& image, const Qwen3VLPreprocessConfig& cfg, ThreadPool* pool = nullptr);

// The patch rows of an already resized image (multiples of cfg.factor() on both sides).
void qwen3vl_patchify(const ImageRGB& resized, const Qwen3VLPreprocessConfig& cfg, Qwen3VLPatches& out);

}  // namespace tessera
