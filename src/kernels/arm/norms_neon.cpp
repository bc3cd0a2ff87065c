// The RMS and Layer norms on NEON: elementwise.cpp's sum8 with its eight partial sums as the lanes
// of four float64x2 registers (lane j: elements i = j mod 8, in order), so the same bits as the
// scalar twins and the AVX-512 versions. Explicit multiplies and adds (no fused multiply-add), as
// the scalar twins round.
#include <arm_neon.h>

#include "kernels/elementwise.h"

namespace tessera::neon {

namespace {

// Eight double partial sums: a[0] lanes 0-1, a[1] lanes 2-3, a[2] lanes 4-5, a[3] lanes 6-7.
struct Sums8 {
  float64x2_t a[4] = {vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)};
  // adds the eight floats lo (lanes 0-3) and hi (lanes 4-7), widened
  void add(float32x4_t lo, float32x4_t hi) {
    a[0] = vaddq_f64(a[0], vcvt_f64_f32(vget_low_f32(lo)));
    a[1] = vaddq_f64(a[1], vcvt_high_f64_f32(lo));
    a[2] = vaddq_f64(a[2], vcvt_f64_f32(vget_low_f32(hi)));
    a[3] = vaddq_f64(a[3], vcvt_high_f64_f32(hi));
  }
  // the tail (elements i..n-1, value f(i), into sum i mod 8 as sum8 does), then tree8
  template <class F>
  double total(int64_t i, int64_t n, F f) const {
    double s[8];
    for (int k = 0; k < 4; ++k) vst1q_f64(s + 2 * k, a[k]);
    for (; i < n; ++i) s[i % 8] += f(i);
    return tree8(s);
  }
};

// Σ x[i] (square: Σ double(x[i] * x[i])) in sum8's order; with d, x[i] += d[i] first.
double sum_x(float* x, const float* d, int64_t n, bool square) {
  Sums8 s;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t lo = vld1q_f32(x + i), hi = vld1q_f32(x + i + 4);
    if (d) {
      lo = vaddq_f32(lo, vld1q_f32(d + i));
      hi = vaddq_f32(hi, vld1q_f32(d + i + 4));
      vst1q_f32(x + i, lo);
      vst1q_f32(x + i + 4, hi);
    }
    if (square) s.add(vmulq_f32(lo, lo), vmulq_f32(hi, hi));
    else s.add(lo, hi);
  }
  for (int64_t j = i; d && j < n; ++j) x[j] += d[j];
  return s.total(i, n, [&](int64_t j) { return square ? static_cast<double>(x[j] * x[j]) : static_cast<double>(x[j]); });
}

void layer_norm_x(const float* x, const float* w, const float* b, float* y, int64_t n, float eps, double sum) {
  const double mean = sum / static_cast<double>(n);
  const float64x2_t vm = vdupq_n_f64(mean);
  float64x2_t v[4] = {vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t lo = vld1q_f32(x + i), hi = vld1q_f32(x + i + 4);
    const float64x2_t c[4] = {vsubq_f64(vcvt_f64_f32(vget_low_f32(lo)), vm), vsubq_f64(vcvt_high_f64_f32(lo), vm),
                              vsubq_f64(vcvt_f64_f32(vget_low_f32(hi)), vm), vsubq_f64(vcvt_high_f64_f32(hi), vm)};
    for (int k = 0; k < 4; ++k) v[k] = vaddq_f64(v[k], vmulq_f64(c[k], c[k]));
  }
  Sums8 s;
  for (int k = 0; k < 4; ++k) s.a[k] = v[k];
  const double var = s.total(i, n, [&](int64_t j) { return (x[j] - mean) * (x[j] - mean); }) / static_cast<double>(n);
  const float inv = layer_norm_inv(var, eps), m = static_cast<float>(mean);
  const float32x4_t vinv = vdupq_n_f32(inv), vmf = vdupq_n_f32(m);
  for (i = 0; i + 4 <= n; i += 4) {  // y = (x - m) * inv * w + b, in that order
    const float32x4_t c = vmulq_f32(vmulq_f32(vsubq_f32(vld1q_f32(x + i), vmf), vinv), vld1q_f32(w + i));
    vst1q_f32(y + i, vaddq_f32(c, vld1q_f32(b + i)));
  }
  for (; i < n; ++i) y[i] = (x[i] - m) * inv * w[i] + b[i];
}

void rms_norm_x(const float* x, const float* w, float* y, int64_t n, float eps, double ss) {
  const float scale = rms_scale_from(ss, n, eps);
  const float32x4_t s = vdupq_n_f32(scale);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), s), vld1q_f32(w + i)));
  for (; i < n; ++i) y[i] = x[i] * scale * w[i];
}

}  // namespace

#include "kernels/simd/norms_entry.inc"

}  // namespace tessera::neon
