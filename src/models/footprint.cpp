#include "models/footprint.h"

#include <algorithm>
#include <initializer_list>
#include <cmath>

#include "image/resize.h"
#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"

namespace tessera {

size_t siglip_buffer_bytes(const SiglipConfig& c, bool bf16, bool q8) {
  const size_t N = static_cast<size_t>(c.n_patches()), H = static_cast<size_t>(c.hidden);
  const size_t S = static_cast<size_t>(c.image_size), P = static_cast<size_t>(c.patch_size), F = static_cast<size_t>(c.ff);
  // im2col rows, the tile's pixels (three planes of floats), a row block of hidden and the output
  const size_t common = N * 3 * P * P + 3 * S * S + N * H + static_cast<size_t>(c.tokens_per_tile()) * static_cast<size_t>(c.text_hidden);
  const size_t fp32 = (common + 7 * N * H + N * F) * sizeof(float);  // hidden, normed, q/k/v, attention, o/fc2, the MLP
  if (!bf16) return fp32;
  const Bf16AttnDims D = bf16_attn_dims(tile_attention_shape(c), c.n_patches());
  const int64_t attn16 = D.n_head * D.nqp * D.hdk + bf16_attn_k_elems(D) + bf16_attn_v_elems(D);
  if (q8) return fp32 + static_cast<size_t>(attn16) * 2;  // fp32 q/k/v packed into the bf16 attention's tiles
  // the bf16 path writes only the hidden rows and the o/fc2 output in fp32 (its buffers of the
  // others stay untouched pages: siglip.cpp's TileFloats); the normed rows and the MLP's go into
  // bf16 activation tiles, and q/k/v into the attention's tiles
  const int64_t b16 = bf16_act_elems(c.n_patches(), c.hidden) + bf16_act_elems(c.n_patches(), c.ff) + attn16;
  return (common + 2 * N * H) * sizeof(float) + static_cast<size_t>(b16) * 2;
}

size_t idefics3_tile_count(const Idefics3PreprocessConfig& p, int w, int h) {
  return static_cast<size_t>(idefics3_grid(p, w, h).tiles());
}

namespace {

// One resize in_w x in_h -> out_w x out_h: with a horizontal pass the resampler holds, per strip
// slot (image/resize.h), a strip of the source as columns and its resampled columns, and with a
// vertical pass too the horizontal pass's rows whole; each of the three buffers is kept at the
// largest size any resize asked for. The slots are counted as many as a pool of
// kResizeStripSlots threads uses (fewer threads use fewer: 0.75 MB each for a 1080p screen).
struct ResizeShape {
  size_t in_w, in_h, out_w, out_h;
};
size_t resize_scratch_bytes(std::initializer_list<ResizeShape> resizes) {
  constexpr size_t S = static_cast<size_t>(kResizeStripRows);
  size_t cols = 0, out_cols = 0, rows = 0;
  for (const ResizeShape& r : resizes) {
    if (r.out_w == r.in_w) continue;  // a vertical pass alone reads the source in place
    const size_t slots = std::min((r.in_h + S - 1) / S, static_cast<size_t>(kResizeStripSlots));
    cols = std::max(cols, slots * r.in_w * S * 3);
    out_cols = std::max(out_cols, slots * r.out_w * S * 3);
    if (r.out_h != r.in_h) rows = std::max(rows, r.out_w * r.in_h * 3);
  }
  return cols + out_cols + rows;
}

}  // namespace

size_t idefics3_resize_scratch_bytes(const Idefics3PreprocessConfig& p, int w, int h) {
  const Idefics3Grid g = idefics3_grid(p, w, h);
  const size_t W = static_cast<size_t>(w), H = static_cast<size_t>(h), T = static_cast<size_t>(p.tile);
  const size_t rw = static_cast<size_t>(g.resized_w), rh = static_cast<size_t>(g.resized_h);
  const size_t sw = static_cast<size_t>(g.stretched_w), sh = static_cast<size_t>(g.stretched_h);
  if (!p.split) return resize_scratch_bytes({{W, H, rw, rh}, {rw, rh, T, T}});
  if (!g.rows) return resize_scratch_bytes({{W, H, rw, rh}, {rw, rh, sw, sh}});
  return resize_scratch_bytes({{W, H, rw, rh}, {rw, rh, sw, sh}, {sw, sh, T, T}});
}

size_t idefics3_frame_bytes(const SiglipConfig& c, const Idefics3PreprocessConfig& p, int w, int h) {
  const size_t tiles = idefics3_tile_count(p, w, h), tile_px = static_cast<size_t>(p.tile) * static_cast<size_t>(p.tile);
  const size_t per_tile = static_cast<size_t>(c.tokens_per_tile()) * static_cast<size_t>(c.text_hidden);
  return 2 * static_cast<size_t>(w) * static_cast<size_t>(h) * 3 + 2 * tiles * tile_px * 3 + 4 * tiles * per_tile * sizeof(float) +
         idefics3_resize_scratch_bytes(p, w, h);
}

Qwen3VLPreprocessConfig qwen3vl_preprocess_config(const Qwen3VLVisionConfig& c) {
  Qwen3VLPreprocessConfig p;
  p.patch = c.patch;
  p.merge = c.merge;
  p.temporal = c.temporal;
  return p;
}

namespace {

// The smart-resized size of a w x h screen (the processor's first step).
struct Resized {
  int w = 0, h = 0;
};
Resized qwen3vl_resized(const Qwen3VLVisionConfig& c, int64_t max_pixels, int w, int h) {
  const Qwen3VLPreprocessConfig pc = qwen3vl_preprocess_config(c).with_max_pixels(max_pixels);
  Resized r;
  qwen3vl_smart_resize(h, w, pc.factor(), pc.min_pixels, pc.max_pixels, r.h, r.w);
  return r;
}

int64_t patches_of(const Qwen3VLVisionConfig& c, Resized r) { return static_cast<int64_t>(r.h / c.patch) * (r.w / c.patch); }

size_t resize_scratch_of(int w, int h, Resized r) {
  return resize_scratch_bytes({{static_cast<size_t>(w), static_cast<size_t>(h), static_cast<size_t>(r.w), static_cast<size_t>(r.h)}});
}

}  // namespace

int64_t qwen3vl_patches(const Qwen3VLVisionConfig& c, int64_t max_pixels, int w, int h) {
  return patches_of(c, qwen3vl_resized(c, max_pixels, w, h));
}

size_t qwen3vl_buffer_bytes(const Qwen3VLVisionConfig& c, int64_t patches) {
  const size_t K = static_cast<size_t>(3 * c.temporal * c.patch * c.patch);
  const size_t per_patch = 11 * static_cast<size_t>(c.hidden) + static_cast<size_t>(c.ff) + static_cast<size_t>(c.head_dim()) + K;
  return static_cast<size_t>(patches) * per_patch * sizeof(float);
}

size_t qwen3vl_resize_scratch_bytes(const Qwen3VLVisionConfig& c, int64_t max_pixels, int w, int h) {
  return resize_scratch_of(w, h, qwen3vl_resized(c, max_pixels, w, h));
}

size_t qwen3vl_frame_bytes(const Qwen3VLVisionConfig& c, int64_t max_pixels, int w, int h) {
  const Resized r = qwen3vl_resized(c, max_pixels, w, h);  // once: the resize is the frame's two terms
  const int64_t n = patches_of(c, r);
  const size_t K = static_cast<size_t>(3 * c.temporal * c.patch * c.patch);
  const size_t tokens = static_cast<size_t>(n / (c.merge * c.merge));
  return 2 * static_cast<size_t>(w) * static_cast<size_t>(h) * 3 + 2 * static_cast<size_t>(n) * K * sizeof(float) +
         5 * tokens * static_cast<size_t>(qwen3vl_out_row(c)) * sizeof(float) + resize_scratch_of(w, h, r);
}

}  // namespace tessera
