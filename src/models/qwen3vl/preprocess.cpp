#include "models/qwen3vl/preprocess.h"

#include <algorithm>
#include <cfenv>
#include <cmath>

#include "core/error.h"

namespace tessera {

// Python's arithmetic, step for step: true division in double, round() to nearest even,
// math.floor / math.ceil of doubles, math.sqrt.
void qwen3vl_smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels, int& out_h, int& out_w) {
  if (height < 1 || width < 1) fail("image of %d x %d pixels has nothing to resize", width, height);
  if (factor < 1 || min_pixels < 1 || max_pixels < min_pixels) fail("bad resize limits (factor %d, pixels %lld..%lld)", factor,
                                                                     static_cast<long long>(min_pixels), static_cast<long long>(max_pixels));
  const double h = height, w = width, f = factor;
  if (std::max(h, w) / std::min(h, w) > 200) fail("image of %d x %d pixels: aspect ratio must be smaller than 200", width, height);
  const auto round_even = [](double x) {
    const int mode = std::fegetround();
    std::fesetround(FE_TONEAREST);
    const double r = std::nearbyint(x);
    std::fesetround(mode);
    return r;
  };
  double h_bar = round_even(h / f) * f, w_bar = round_even(w / f) * f;
  if (h_bar * w_bar > static_cast<double>(max_pixels)) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    h_bar = std::max(f, std::floor(h / beta / f) * f);
    w_bar = std::max(f, std::floor(w / beta / f) * f);
  } else if (h_bar * w_bar < static_cast<double>(min_pixels)) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = std::ceil(h * beta / f) * f;
    w_bar = std::ceil(w * beta / f) * f;
  }
  if (!(h_bar >= f && w_bar >= f && h_bar <= 65536 && w_bar <= 65536))
    fail("image of %d x %d pixels resizes to %.0f x %.0f, out of range", width, height, w_bar, h_bar);
  out_h = static_cast<int>(h_bar);
  out_w = static_cast<int>(w_bar);
}

void qwen3vl_patchify(const ImageRGB& img, const Qwen3VLPreprocessConfig& c, Qwen3VLPatches& out) {
  const int P = c.patch, M = c.merge, T = c.temporal;
  if (img.width % c.factor() != 0 || img.height % c.factor() != 0)
    fail("patchify: %d x %d is not a multiple of %d", img.width, img.height, c.factor());
  out.grid_t = 1;
  out.grid_h = img.height / P;
  out.grid_w = img.width / P;
  out.row_size = 3 * T * P * P;
  out.pixels.resize(static_cast<size_t>(out.grid_h) * out.grid_w * out.row_size);
  float mean255[3], std255[3];
  for (int ch = 0; ch < 3; ++ch) {
    mean255[ch] = c.mean[ch] * 255.0f;  // transformers fuses rescale into normalize: (x - 255 m) / (255 s)
    std255[ch] = c.std[ch] * 255.0f;
  }
  // row order: merge blocks row-major, inside each the M x M patches row-major
  float* o = out.pixels.data();
  for (int by = 0; by < out.grid_h / M; ++by)
    for (int bx = 0; bx < out.grid_w / M; ++bx)
      for (int my = 0; my < M; ++my)
        for (int mx = 0; mx < M; ++mx) {
          const int y0 = (by * M + my) * P, x0 = (bx * M + mx) * P;
          for (int ch = 0; ch < 3; ++ch) {
            float* plane = o + static_cast<size_t>(ch) * T * P * P;
            for (int y = 0; y < P; ++y) {
              const uint8_t* src = img.row(y0 + y) + 3 * x0 + ch;
              for (int x = 0; x < P; ++x) plane[y * P + x] = (static_cast<float>(src[3 * x]) - mean255[ch]) / std255[ch];
            }
            for (int t = 1; t < T; ++t) std::copy_n(plane, P * P, plane + static_cast<size_t>(t) * P * P);
          }
          o += out.row_size;
        }
}

Qwen3VLPatches preprocess_qwen3vl(const ImageRGB& image, const Qwen3VLPreprocessConfig& cfg, ThreadPool* pool) {
  int h = 0, w = 0;
  qwen3vl_smart_resize(image.height, image.width, cfg.factor(), cfg.min_pixels, cfg.max_pixels, h, w);
  Qwen3VLPatches out;
  out.resized = w == image.width && h == image.height ? image : resize_like_pil(image, w, h, ResampleFilter::Bicubic, cfg.arithmetic, pool);
  qwen3vl_patchify(out.resized, cfg, out);
  return out;
}

}  // namespace tessera
