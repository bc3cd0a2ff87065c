#include "models/footprint.h"

#include <algorithm>
#include <cmath>

namespace tessera {

size_t siglip_buffer_bytes(const SiglipConfig& c) {
  const size_t N = static_cast<size_t>(c.n_patches()), H = static_cast<size_t>(c.hidden);
  const size_t S = static_cast<size_t>(c.image_size), P = static_cast<size_t>(c.patch_size);
  const size_t floats = N * 3 * P * P + 7 * N * H + N * static_cast<size_t>(c.ff) + 3 * S * S + N * H +
                        static_cast<size_t>(c.tokens_per_tile()) * static_cast<size_t>(c.text_hidden);
  return floats * sizeof(float);
}

size_t idefics3_tile_count(const Idefics3PreprocessConfig& p, int w, int h) {
  return static_cast<size_t>(idefics3_grid(p, w, h).tiles());
}

size_t idefics3_frame_bytes(const SiglipConfig& c, const Idefics3PreprocessConfig& p, int w, int h) {
  const size_t tiles = idefics3_tile_count(p, w, h), tile_px = static_cast<size_t>(p.tile) * static_cast<size_t>(p.tile);
  const size_t per_tile = static_cast<size_t>(c.tokens_per_tile()) * static_cast<size_t>(c.text_hidden);
  return 2 * static_cast<size_t>(w) * static_cast<size_t>(h) * 3 + 2 * tiles * tile_px * 3 + 4 * tiles * per_tile * sizeof(float);
}

Qwen3VLPreprocessConfig qwen3vl_preprocess_config(const Qwen3VLVisionConfig& c) {
  Qwen3VLPreprocessConfig p;
  p.patch = c.patch;
  p.merge = c.merge;
  p.temporal = c.temporal;
  return p;
}

int64_t qwen3vl_patches(const Qwen3VLVisionConfig& c, int64_t max_pixels, int w, int h) {
  const Qwen3VLPreprocessConfig pc = qwen3vl_preprocess_config(c).with_max_pixels(max_pixels);
  int rh = 0, rw = 0;
  qwen3vl_smart_resize(h, w, pc.factor(), pc.min_pixels, pc.max_pixels, rh, rw);
  return static_cast<int64_t>(rh / pc.patch) * (rw / pc.patch);
}

size_t qwen3vl_buffer_bytes(const Qwen3VLVisionConfig& c, int64_t patches) {
  const size_t K = static_cast<size_t>(3 * c.temporal * c.patch * c.patch);
  const size_t per_patch = 11 * static_cast<size_t>(c.hidden) + static_cast<size_t>(c.ff) + static_cast<size_t>(c.head_dim()) + K;
  return static_cast<size_t>(patches) * per_patch * sizeof(float);
}

size_t qwen3vl_frame_bytes(const Qwen3VLVisionConfig& c, int64_t max_pixels, int w, int h) {
  const int64_t n = qwen3vl_patches(c, max_pixels, w, h);
  const size_t K = static_cast<size_t>(3 * c.temporal * c.patch * c.patch);
  const size_t tokens = static_cast<size_t>(n / (c.merge * c.merge));
  return 2 * static_cast<size_t>(w) * static_cast<size_t>(h) * 3 + 2 * static_cast<size_t>(n) * K * sizeof(float) +
         5 * tokens * static_cast<size_t>(qwen3vl_out_row(c)) * sizeof(float);
}

}  // namespace tessera
