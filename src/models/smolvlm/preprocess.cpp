#include "models/smolvlm/preprocess.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tessera {

namespace {
constexpr int kMaxImageSize = 4096;  // transformers' MAX_IMAGE_SIZE for Idefics3

void crop(const ImageRGB& in, int x0, int y0, int x1, int y1, ImageRGB& out) {
  out.width = x1 - x0;
  out.height = y1 - y0;
  out.pixels.resize(static_cast<size_t>(out.width) * out.height * 3);
  for (int y = 0; y < out.height; ++y)
    std::copy_n(in.row(y0 + y) + 3 * x0, 3 * out.width, out.row(y));
}
}  // namespace

void idefics3_resize_size(int w, int h, int longest_edge, int& out_w, int& out_h) {
  // _resize_output_size_rescale_to_max_len: longest side to max_len, other side truncated, made even
  const double aspect = static_cast<double>(w) / h;
  int W, H;
  if (w >= h) {
    W = longest_edge;
    H = static_cast<int>(W / aspect);
    if (H % 2 != 0) ++H;
  } else {
    H = longest_edge;
    W = static_cast<int>(H * aspect);
    if (W % 2 != 0) ++W;
  }
  H = std::max(H, 1);
  W = std::max(W, 1);
  // _resize_output_size_scale_below_upper_bound
  const double aspect2 = static_cast<double>(W) / H;
  if (W >= H && W > kMaxImageSize) {
    W = kMaxImageSize;
    H = static_cast<int>(W / aspect2);
  } else if (H > W && H > kMaxImageSize) {
    H = kMaxImageSize;
    W = static_cast<int>(H * aspect2);
  }
  out_w = std::max(W, 1);
  out_h = std::max(H, 1);
}

namespace {

// resize_for_vision_encoder: both sides of a w × h image up to multiples of the tile size (a stretch)
void stretched_size(int w, int h, int T, int& W, int& H) {
  const double aspect = static_cast<double>(w) / h;
  if (w >= h) {
    W = (w + T - 1) / T * T;
    H = static_cast<int>(W / aspect);
    H = (H + T - 1) / T * T;
  } else {
    H = (h + T - 1) / T * T;
    W = static_cast<int>(H * aspect);
    W = (W + T - 1) / T * T;
  }
}

}  // namespace

Idefics3Grid idefics3_grid(const Idefics3PreprocessConfig& cfg, int w, int h) {
  Idefics3Grid g;
  idefics3_resize_size(w, h, cfg.longest_edge, g.resized_w, g.resized_h);
  if (!cfg.split) return g;
  int W = 0, H = 0;
  stretched_size(g.resized_w, g.resized_h, cfg.tile, W, H);
  g.stretched_w = W, g.stretched_h = H;
  if (H > cfg.tile || W > cfg.tile) g.rows = (H + cfg.tile - 1) / cfg.tile, g.cols = (W + cfg.tile - 1) / cfg.tile;
  return g;
}

namespace {

ImageRGB sized(int w, int h) {
  ImageRGB im;
  im.width = w;
  im.height = h;
  im.pixels.resize(static_cast<size_t>(w) * h * 3);
  return im;
}

// The tiles and the global image from the stretched image, whose rows [a, b) changed; all == true
// computes every one.
void split_tiles(const ImageRGB& stretched, const Idefics3PreprocessConfig& cfg, int a, int b,
                 bool all, PreprocessedImage& out, ThreadPool* pool) {
  const int T = cfg.tile, W = stretched.width, H = stretched.height;
  if (H > T || W > T) {
    out.rows = (H + T - 1) / T;
    out.cols = (W + T - 1) / T;
    const int th = (H + out.rows - 1) / out.rows, tw = (W + out.cols - 1) / out.cols;
    out.tiles.resize(static_cast<size_t>(out.rows * out.cols + 1));
    for (int r = 0; r < out.rows; ++r) {
      if (!all && (r * th >= b || std::min(r * th + th, H) <= a)) continue;  // none of its rows changed
      for (int c = 0; c < out.cols; ++c)
        crop(stretched, c * tw, r * th, std::min(c * tw + tw, W), std::min(r * th + th, H), out.tiles[static_cast<size_t>(r * out.cols + c)]);
    }
    ImageRGB& global = out.tiles.back();
    if (all || global.width != T || global.height != T) global = sized(T, T), a = 0, b = H;
    const auto [g0, g1] = resized_rows_touched(H, T, cfg.filter, cfg.arithmetic, a, b);
    resize_rows_like_pil(stretched, global, g0, g1, cfg.filter, cfg.arithmetic, pool);
  } else {
    out.rows = out.cols = 0;
    out.tiles.assign(1, stretched);
  }
}

}  // namespace

PreprocessedImage preprocess_idefics3(const ImageRGB& image, const Idefics3PreprocessConfig& cfg, ThreadPool* pool) {
  PreprocessState st;
  preprocess_idefics3_rows(image, cfg, 0, image.height, st, pool);
  return std::move(st.out);
}

const PreprocessedImage& preprocess_idefics3_rows(const ImageRGB& image, const Idefics3PreprocessConfig& cfg, int a, int b,
                                                  PreprocessState& st, ThreadPool* pool) {
  if (image.width <= 0 || image.height <= 0) fail("image has zero size");
  if (cfg.tile <= 0 || cfg.longest_edge < cfg.tile) fail("bad preprocessing sizes");
  int w, h;
  idefics3_resize_size(image.width, image.height, cfg.longest_edge, w, h);
  const bool fresh = !st.valid || st.in_w != image.width || st.in_h != image.height;
  st.valid = false;  // until this call completes: a failure leaves no half-updated state behind
  if (fresh) a = 0, b = image.height;
  a = std::max(0, a), b = std::min(image.height, b);
  if (fresh) st.first = sized(w, h);
  auto [a1, b1] = resized_rows_touched(image.height, h, cfg.filter, cfg.arithmetic, a, b);
  resize_rows_like_pil(image, st.first, a1, b1, cfg.filter, cfg.arithmetic, pool);
  PreprocessedImage& out = st.out;
  if (!cfg.split) {
    if (fresh) out = PreprocessedImage{}, out.tiles.assign(1, sized(cfg.tile, cfg.tile));
    const auto [g0, g1] = resized_rows_touched(h, cfg.tile, cfg.filter, cfg.arithmetic, a1, b1);
    resize_rows_like_pil(st.first, out.tiles[0], g0, g1, cfg.filter, cfg.arithmetic, pool);
    out.resized_w = out.resized_h = cfg.tile;
  } else {
    int W, H;
    stretched_size(w, h, cfg.tile, W, H);
    if (fresh) st.stretched = sized(W, H), out = PreprocessedImage{};
    const auto [a2, b2] = resized_rows_touched(h, H, cfg.filter, cfg.arithmetic, a1, b1);
    resize_rows_like_pil(st.first, st.stretched, a2, b2, cfg.filter, cfg.arithmetic, pool);
    out.resized_w = W;
    out.resized_h = H;
    split_tiles(st.stretched, cfg, a2, b2, fresh, out, pool);
  }
  st.in_w = image.width;
  st.in_h = image.height;
  st.valid = true;
  return out;
}

void tile_to_chw(const ImageRGB& tile, const Idefics3PreprocessConfig& cfg, float* out) {
  const size_t plane = static_cast<size_t>(tile.width) * tile.height;
  float mean255[3], std255[3];
  for (int c = 0; c < 3; ++c) {
    mean255[c] = cfg.mean[c] * 255.0f;
    std255[c] = cfg.std[c] * 255.0f;
  }
  for (int y = 0; y < tile.height; ++y) {
    const uint8_t* p = tile.row(y);
    for (int x = 0; x < tile.width; ++x) {
      for (int c = 0; c < 3; ++c)  // the default (torchvision) processor fuses rescale into normalise
        out[c * plane + static_cast<size_t>(y) * tile.width + x] = (static_cast<float>(p[3 * x + c]) - mean255[c]) / std255[c];
    }
  }
}

}  // namespace tessera
