#include "vision/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

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

inline uint8_t clip8(int32_t v, int precision) {
  if (v <= 0) return 0;
  v >>= precision;
  return v > 255 ? 255 : static_cast<uint8_t>(v);
}

}  // namespace

ImageRGB resize_like_pil(const ImageRGB& in, int out_w, int out_h, ResampleFilter f, ResampleArithmetic arith) {
  if (out_w <= 0 || out_h <= 0 || out_w > (1 << 16) || out_h > (1 << 16)) fail("resize to %dx%d is out of range", out_w, out_h);
  if (in.width == out_w && in.height == out_h) return in;  // Pillow returns a copy
  const bool need_h = out_w != in.width, need_v = out_h != in.height;
  const Coeffs ch = precompute(in.width, out_w, f, arith);
  Coeffs cv = precompute(in.height, out_h, f, arith);
  const ImageRGB* src = &in;
  ImageRGB tmp;
  if (need_h) {
    // only the source rows the vertical pass reads
    const int y_first = cv.bounds[0];
    const int y_last = cv.bounds[2 * static_cast<size_t>(out_h) - 2] + cv.bounds[2 * static_cast<size_t>(out_h) - 1];
    for (int i = 0; i < out_h; ++i) cv.bounds[2 * static_cast<size_t>(i)] -= y_first;
    tmp.width = out_w;
    tmp.height = y_last - y_first;
    tmp.pixels.resize(static_cast<size_t>(tmp.width) * tmp.height * 3);
    for (int y = 0; y < tmp.height; ++y) {
      const uint8_t* s = in.row(y + y_first);
      uint8_t* d = tmp.row(y);
      for (int xx = 0; xx < out_w; ++xx) {
        const int xmin = ch.bounds[2 * static_cast<size_t>(xx)], n = ch.bounds[2 * static_cast<size_t>(xx) + 1];
        const int32_t* k = &ch.k[static_cast<size_t>(xx) * ch.ksize];
        int32_t s0 = 1 << (ch.precision - 1), s1 = s0, s2 = s0;
        for (int x = 0; x < n; ++x) {
          const uint8_t* p = s + 3 * (x + xmin);
          s0 += p[0] * k[x];
          s1 += p[1] * k[x];
          s2 += p[2] * k[x];
        }
        d[3 * xx] = clip8(s0, ch.precision);
        d[3 * xx + 1] = clip8(s1, ch.precision);
        d[3 * xx + 2] = clip8(s2, ch.precision);
      }
    }
    src = &tmp;
  }
  if (!need_v) return tmp;
  ImageRGB out;
  out.width = src->width;
  out.height = out_h;
  out.pixels.resize(static_cast<size_t>(out.width) * out_h * 3);
  for (int yy = 0; yy < out_h; ++yy) {
    const int ymin = cv.bounds[2 * static_cast<size_t>(yy)], n = cv.bounds[2 * static_cast<size_t>(yy) + 1];
    const int32_t* k = &cv.k[static_cast<size_t>(yy) * cv.ksize];
    uint8_t* d = out.row(yy);
    for (int x = 0; x < out.width * 3; ++x) {
      int32_t s = 1 << (cv.precision - 1);
      for (int y = 0; y < n; ++y) s += src->row(y + ymin)[x] * k[y];
      d[x] = clip8(s, cv.precision);
    }
  }
  return out;
}

}  // namespace tessera
