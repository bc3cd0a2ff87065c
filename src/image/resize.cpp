#include "image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/resample.h"

namespace tessera {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}
double lanczos(double x) { return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0; }
double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double bilinear(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

struct Coeffs {
  int ksize = 0;
  int precision = kPrecisionBits;  // fraction bits of k
  std::vector<int> bounds;  // xmin, count per output
  std::vector<int32_t> k;   // fixed point, ksize per output
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc (or PyTorch's int16 variant).
Coeffs precompute(int in_size, int out_size, ResampleFilter f, ResampleArithmetic arith) {
  double (*filter)(double) = f == ResampleFilter::Lanczos ? lanczos : f == ResampleFilter::Bicubic ? bicubic : bilinear;
  const double support0 = f == ResampleFilter::Lanczos ? 3.0 : f == ResampleFilter::Bicubic ? 2.0 : 1.0;
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = support0 * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<size_t>(out_size) * 2);
  c.k.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(static_cast<size_t>(c.ksize));
  std::vector<double> all(static_cast<size_t>(out_size) * c.ksize, 0.0);
  double wmax = 0.0;
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    xmax = std::min(xmax, c.ksize);  // (PyTorch clamps the rare one-too-many tap; Pillow would overrun)
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[static_cast<size_t>(x)] = filter((x + xmin - center + 0.5) * ss);
      ww += w[static_cast<size_t>(x)];
    }
    for (int x = 0; x < xmax; ++x) {
      double v = w[static_cast<size_t>(x)];
      if (ww != 0.0) v /= ww;
      all[static_cast<size_t>(xx) * c.ksize + x] = v;
      wmax = std::max(wmax, v);
    }
    c.bounds[2 * static_cast<size_t>(xx)] = xmin;
    c.bounds[2 * static_cast<size_t>(xx) + 1] = xmax;
  }
  if (arith == ResampleArithmetic::Torch) {
    // as many fraction bits as keep the largest weight inside int16
    int p = 0;
    for (; p < 22; ++p)
      if (static_cast<int>(0.5 + wmax * (1 << (p + 1))) >= (1 << 15)) break;
    c.precision = p;
  }
  for (size_t i = 0; i < all.size(); ++i) {
    const double v = all[i];
    const double scaled = v * (1 << c.precision);
    c.k[i] = v < 0 ? static_cast<int32_t>(-0.5 + scaled) : static_cast<int32_t>(0.5 + scaled);
  }
  return c;
}

// Pixel transposes in blocks of 32 × 32 pixels (each block's reads and writes stay in L1; pixel
// by pixel, every write of a column-major copy was a cache miss). src has `rows` rows of
// `cols` pixels, src_stride bytes apart; dst gets `cols` rows of `rows` pixels, dst_stride apart.
void transpose_pixels(const uint8_t* src, int64_t src_stride, int64_t rows, int64_t cols, uint8_t* dst,
                      int64_t dst_stride, ThreadPool* pool) {
  constexpr int64_t B = 32;
  const auto blocks = [&](int64_t c0, int64_t c1) {  // column blocks c0..c1
    for (int64_t cb = c0; cb < c1; ++cb)
      for (int64_t r0 = 0; r0 < rows; r0 += B)
        for (int64_t c = cb * B; c < std::min(cols, cb * B + B); ++c) {
          uint8_t* d = dst + c * dst_stride;
          for (int64_t r = r0; r < std::min(rows, r0 + B); ++r) {
            const uint8_t* p = src + r * src_stride + 3 * c;
            d[3 * r] = p[0], d[3 * r + 1] = p[1], d[3 * r + 2] = p[2];
          }
        }
  };
  const int64_t nb = (cols + B - 1) / B;
  if (pool) pool->parallel_for(nb, 1, blocks);
  else blocks(0, nb);
}

}  // namespace

ImageRGB resize_like_pil(const ImageRGB& in, int out_w, int out_h, ResampleFilter f, ResampleArithmetic arith,
                         ThreadPool* pool) {
  if (out_w <= 0 || out_h <= 0 || out_w > (1 << 16) || out_h > (1 << 16)) fail("resize to %dx%d is out of range", out_w, out_h);
  if (in.width == out_w && in.height == out_h) return in;  // Pillow returns a copy
  const bool need_h = out_w != in.width, need_v = out_h != in.height;
  const Coeffs ch = precompute(in.width, out_w, f, arith);
  Coeffs cv = precompute(in.height, out_h, f, arith);
  const auto combine = combine_rows_u8;  // kernels/resample.h, vectorised per ISA
  const auto run = [&](int64_t n, RangeFn fn) {
    if (pool) pool->parallel_for(n, 8, fn);
    else fn(0, n);
  };
  const ImageRGB* src = &in;
  ImageRGB tmp;
  if (need_h) {
    // only the source rows the vertical pass reads, as columns: output column xx combines
    // source columns xmin.. with its taps, a whole column (h pixels) at a time
    const int y_first = cv.bounds[0];
    const int y_last = cv.bounds[2 * static_cast<size_t>(out_h) - 2] + cv.bounds[2 * static_cast<size_t>(out_h) - 1];
    for (int i = 0; i < out_h; ++i) cv.bounds[2 * static_cast<size_t>(i)] -= y_first;
    const int h = y_last - y_first;
    std::vector<uint8_t> cols(static_cast<size_t>(in.width) * h * 3), out_cols(static_cast<size_t>(out_w) * h * 3);
    transpose_pixels(in.row(y_first), int64_t{in.width} * 3, h, in.width, cols.data(), int64_t{h} * 3, pool);
    run(out_w, [&](int64_t x0, int64_t x1) {
      std::vector<const uint8_t*> rows(static_cast<size_t>(ch.ksize));
      for (int64_t xx = x0; xx < x1; ++xx) {
        const int xmin = ch.bounds[2 * static_cast<size_t>(xx)], n = ch.bounds[2 * static_cast<size_t>(xx) + 1];
        for (int t = 0; t < n; ++t) rows[static_cast<size_t>(t)] = cols.data() + static_cast<size_t>(xmin + t) * h * 3;
        combine(rows.data(), &ch.k[static_cast<size_t>(xx) * ch.ksize], n, int64_t{h} * 3, ch.precision,
                out_cols.data() + static_cast<size_t>(xx) * h * 3);
      }
    });
    tmp.width = out_w;
    tmp.height = h;
    tmp.pixels.resize(static_cast<size_t>(tmp.width) * tmp.height * 3);
    transpose_pixels(out_cols.data(), int64_t{h} * 3, out_w, h, tmp.pixels.data(), int64_t{out_w} * 3, pool);  // back to rows
    src = &tmp;
  }
  if (!need_v) return tmp;
  ImageRGB out;
  out.width = src->width;
  out.height = out_h;
  out.pixels.resize(static_cast<size_t>(out.width) * out_h * 3);
  run(out_h, [&](int64_t y0, int64_t y1) {
    std::vector<const uint8_t*> rows(static_cast<size_t>(cv.ksize));
    for (int64_t yy = y0; yy < y1; ++yy) {
      const int ymin = cv.bounds[2 * static_cast<size_t>(yy)], n = cv.bounds[2 * static_cast<size_t>(yy) + 1];
      for (int t = 0; t < n; ++t) rows[static_cast<size_t>(t)] = src->row(ymin + t);
      combine(rows.data(), &cv.k[static_cast<size_t>(yy) * cv.ksize], n, int64_t{out.width} * 3, cv.precision,
              out.row(static_cast<int>(yy)));
    }
  });
  return out;
}

}  // namespace tessera
