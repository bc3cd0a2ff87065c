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

PreprocessedImage preprocess_idefics3(const ImageRGB& image, const Idefics3PreprocessConfig& cfg, ThreadPool* pool) {
  if (image.width <= 0 || image.height <= 0) fail("image has zero size");
  if (cfg.tile <= 0 || cfg.longest_edge < cfg.tile) fail("bad preprocessing sizes");
  PreprocessedImage out;
  int w, h;
  idefics3_resize_size(image.width, image.height, cfg.longest_edge, w, h);
  ImageRGB img = resize_like_pil(image, w, h, cfg.filter, cfg.arithmetic, pool);
  if (!cfg.split) {
    out.tiles.push_back(resize_like_pil(img, cfg.tile, cfg.tile, cfg.filter, cfg.arithmetic, pool));
    out.resized_w = out.resized_h = cfg.tile;
    return out;
  }
  // resize_for_vision_encoder: both sides up to multiples of the tile size (a stretch)
  const double aspect = static_cast<double>(w) / h;
  const int T = cfg.tile;
  int W, H;
  if (w >= h) {
    W = (w + T - 1) / T * T;
    H = static_cast<int>(W / aspect);
    H = (H + T - 1) / T * T;
  } else {
    H = (h + T - 1) / T * T;
    W = static_cast<int>(H * aspect);
    W = (W + T - 1) / T * T;
  }
  img = resize_like_pil(img, W, H, cfg.filter, cfg.arithmetic, pool);
  out.resized_w = W;
  out.resized_h = H;
  if (H > T || W > T) {
    out.rows = (H + T - 1) / T;
    out.cols = (W + T - 1) / T;
    const int th = (H + out.rows - 1) / out.rows, tw = (W + out.cols - 1) / out.cols;
    for (int r = 0; r < out.rows; ++r) {
      for (int c = 0; c < out.cols; ++c) {
        ImageRGB t;
        crop(img, c * tw, r * th, std::min(c * tw + tw, W), std::min(r * th + th, H), t);
        out.tiles.push_back(std::move(t));
      }
    }
    out.tiles.push_back(resize_like_pil(img, T, T, cfg.filter, cfg.arithmetic, pool));
  } else {
    out.tiles.push_back(std::move(img));
  }
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
