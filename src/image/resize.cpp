#include "image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.h"
#include "core/scratch_buffer.h"
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

// This thread's intermediate images: per strip slot the strip's source rows as columns and its
// resampled columns, and the horizontal pass's rows whole (when a vertical pass follows).
struct ResizeScratch {
  ScratchBuffer cols, out_cols, rows;
};
ResizeScratch& resize_scratch() {
  thread_local ResizeScratch s;
  return s;
}

}  // namespace

void release_resize_scratch() {
  ResizeScratch& s = resize_scratch();
  s.cols.release(), s.out_cols.release(), s.rows.release();
}

void resize_rows_like_pil(const ImageRGB& in, ImageRGB& out, int o0, int o1, ResampleFilter f, ResampleArithmetic arith,
                          ThreadPool* pool) {
  const int out_w = out.width, out_h = out.height;
  if (out_w <= 0 || out_h <= 0 || out_w > (1 << 16) || out_h > (1 << 16)) fail("resize to %dx%d is out of range", out_w, out_h);
  if (out.pixels.size() != static_cast<size_t>(out_w) * out_h * 3) fail("resize: the output image is not %dx%d", out_w, out_h);
  o0 = std::max(0, o0);
  o1 = std::min(out_h, o1);
  if (o0 >= o1) return;
  const bool need_h = out_w != in.width, need_v = out_h != in.height;
  if (!need_h && !need_v) {  // Pillow returns a copy
    std::memcpy(out.row(o0), in.row(o0), static_cast<size_t>(o1 - o0) * out_w * 3);
    return;
  }
  const Coeffs ch = precompute(in.width, out_w, f, arith);
  Coeffs cv = precompute(in.height, out_h, f, arith);
  const auto combine = combine_rows_u8;  // kernels/resample.h, vectorised per ISA
  const auto run = [&](int64_t n, RangeFn fn) {
    if (pool) pool->parallel_for(n, 8, fn);
    else fn(0, n);
  };
  // the source rows output rows [o0, o1) read (all of them without a vertical pass)
  const int y_first = need_v ? cv.bounds[2 * static_cast<size_t>(o0)] : o0;
  const int y_last = need_v ? cv.bounds[2 * static_cast<size_t>(o1) - 2] + cv.bounds[2 * static_cast<size_t>(o1) - 1] : o1;
  const int h = y_last - y_first;
  const uint8_t* src = in.row(y_first);  // rows y_first.., the vertical pass's source
  int64_t src_stride = int64_t{in.width} * 3;
  // The intermediate images live in this thread's scratch, kept across calls: allocated per call
  // they cost more than the resampling (core/scratch_buffer.h). Every byte read is written first.
  ResizeScratch& sc = resize_scratch();
  ScratchBuffer &cols_buf = sc.cols, &out_cols_buf = sc.out_cols, &tmp_buf = sc.rows;
  if (need_h) {
    // The horizontal pass in strips of kResizeStripRows source rows: a strip's pixels transposed into
    // columns, output column xx combining source columns xmin.. with its taps (a strip's height
    // at a time), and those transposed back into rows. A strip's two buffers stay in L2, and only
    // they are scratch; whole-image column buffers were 10-13 MB of fresh pages on a process's
    // first 1080p frame (1.5 us each here, docs/plan.md). Strips go to the pool in interleaved
    // sets, one buffer slot per set, so every slot is the calling thread's scratch.
    uint8_t* dst = need_v ? tmp_buf.get(static_cast<size_t>(out_w) * h * 3, "resampler's rows") : out.row(o0);
    const int64_t dst_stride = int64_t{out_w} * 3;
    const int64_t strips = (h + kResizeStripRows - 1) / kResizeStripRows;
    const int64_t slots = std::min<int64_t>({strips, pool ? pool->size() : 1, kResizeStripSlots});
    const size_t cols_bytes = static_cast<size_t>(in.width) * kResizeStripRows * 3, out_bytes = static_cast<size_t>(out_w) * kResizeStripRows * 3;
    uint8_t* cols_all = cols_buf.get(cols_bytes * static_cast<size_t>(slots), "resampler's columns");
    uint8_t* out_all = out_cols_buf.get(out_bytes * static_cast<size_t>(slots), "resampler's columns");
    // strip s of slot `slot`; with `inner` the pool splits the strip's own work (one strip only)
    const auto strip = [&](int64_t s, int64_t slot, ThreadPool* inner) {
      const int64_t r0 = s * kResizeStripRows, rs = std::min<int64_t>(kResizeStripRows, h - r0);
      uint8_t* cols = cols_all + cols_bytes * static_cast<size_t>(slot);
      uint8_t* out_cols = out_all + out_bytes * static_cast<size_t>(slot);
      transpose_pixels(src + r0 * src_stride, src_stride, rs, in.width, cols, rs * 3, inner);
      const auto columns = [&](int64_t x0, int64_t x1) {
        std::vector<const uint8_t*> taps(static_cast<size_t>(ch.ksize));
        for (int64_t xx = x0; xx < x1; ++xx) {
          const int xmin = ch.bounds[2 * static_cast<size_t>(xx)], n = ch.bounds[2 * static_cast<size_t>(xx) + 1];
          for (int t = 0; t < n; ++t) taps[static_cast<size_t>(t)] = cols + static_cast<size_t>(xmin + t) * rs * 3;
          combine(taps.data(), &ch.k[static_cast<size_t>(xx) * ch.ksize], n, rs * 3, ch.precision, out_cols + static_cast<size_t>(xx) * rs * 3);
        }
      };
      if (inner) inner->parallel_for(out_w, 8, columns);
      else columns(0, out_w);
      transpose_pixels(out_cols, rs * 3, out_w, rs, dst + r0 * dst_stride, dst_stride, inner);
    };
    if (slots == 1) {  // one strip, or no pool to share them
      for (int64_t s = 0; s < strips; ++s) strip(s, 0, pool);
    } else {
      pool->parallel_for(slots, 1, [&](int64_t a, int64_t b) {
        for (int64_t slot = a; slot < b; ++slot)
          for (int64_t s = slot; s < strips; s += slots) strip(s, slot, nullptr);
      });
    }
    if (!need_v) return;  // the rows were the output's
    src = dst;
    src_stride = dst_stride;
  }
  run(o1 - o0, [&](int64_t i0, int64_t i1) {
    std::vector<const uint8_t*> rows(static_cast<size_t>(cv.ksize));
    for (int64_t yy = o0 + i0; yy < o0 + i1; ++yy) {
      const int ymin = cv.bounds[2 * static_cast<size_t>(yy)], n = cv.bounds[2 * static_cast<size_t>(yy) + 1];
      for (int t = 0; t < n; ++t) rows[static_cast<size_t>(t)] = src + (ymin - y_first + t) * src_stride;
      combine(rows.data(), &cv.k[static_cast<size_t>(yy) * cv.ksize], n, int64_t{out_w} * 3, cv.precision,
              out.row(static_cast<int>(yy)));
    }
  });
}

ImageRGB resize_like_pil(const ImageRGB& in, int out_w, int out_h, ResampleFilter f, ResampleArithmetic arith,
                         ThreadPool* pool) {
  if (out_w <= 0 || out_h <= 0 || out_w > (1 << 16) || out_h > (1 << 16)) fail("resize to %dx%d is out of range", out_w, out_h);
  if (in.width == out_w && in.height == out_h) return in;  // Pillow returns a copy
  ImageRGB out;
  out.width = out_w;
  out.height = out_h;
  out.pixels.resize(static_cast<size_t>(out_w) * out_h * 3);
  resize_rows_like_pil(in, out, 0, out_h, f, arith, pool);
  return out;
}

std::pair<int, int> resized_rows_touched(int in_h, int out_h, ResampleFilter f, ResampleArithmetic arith, int a, int b) {
  if (a >= b) return {0, 0};
  if (in_h == out_h) return {a, b};
  const Coeffs cv = precompute(in_h, out_h, f, arith);
  int first = out_h, last = 0;
  for (int yy = 0; yy < out_h; ++yy) {
    const int ymin = cv.bounds[2 * static_cast<size_t>(yy)], n = cv.bounds[2 * static_cast<size_t>(yy) + 1];
    if (ymin < b && ymin + n > a) first = std::min(first, yy), last = yy + 1;
  }
  return first < last ? std::pair<int, int>{first, last} : std::pair<int, int>{0, 0};
}

}  // namespace tessera
