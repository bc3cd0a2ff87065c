// The RMS and Layer norms on AVX2: elementwise.cpp's sum8 with its eight partial sums as the lanes
// of two __m256d (lane j: elements i = j mod 8, in order), so the same bits as the scalar twins and
// the AVX-512 and NEON versions. Explicit multiplies and adds (no fused multiply-add), as the
// scalar twins round. Until these, AVX2 machines ran the scalar norms (~1.5 ns per element, most
// of the vision encoder's add + layer_norm time).
#include <immintrin.h>

#include "kernels/elementwise.h"

namespace tessera::avx2 {

namespace {

// Eight double partial sums: lo lanes 0-3, hi lanes 4-7.
struct Sums8 {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  void add(__m256 v) {  // the eight floats of v, widened
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  // the tail (elements i..n-1, value f(i), into sum i mod 8 as sum8 does), then tree8
  template <class F>
  double total(int64_t i, int64_t n, F f) const {
    alignas(32) double s[8];
    _mm256_store_pd(s, lo);
    _mm256_store_pd(s + 4, hi);
    for (; i < n; ++i) s[i % 8] += f(i);
    return tree8(s);
  }
};

// Σ x[i] (square: Σ double(x[i] * x[i]), the square in float) in sum8's order; with d, x[i] += d[i] first.
double sum_x(float* x, const float* d, int64_t n, bool square) {
  Sums8 s;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    if (d) {
      v = _mm256_add_ps(v, _mm256_loadu_ps(d + i));
      _mm256_storeu_ps(x + i, v);
    }
    s.add(square ? _mm256_mul_ps(v, v) : v);
  }
  for (int64_t j = i; d && j < n; ++j) x[j] += d[j];
  return s.total(i, n, [&](int64_t j) { return square ? static_cast<double>(x[j] * x[j]) : static_cast<double>(x[j]); });
}

void layer_norm_x(const float* x, const float* w, const float* b, float* y, int64_t n, float eps, double sum) {
  const double mean = sum / static_cast<double>(n);
  const __m256d vm = _mm256_set1_pd(mean);
  Sums8 v;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    const __m256d c0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xv)), vm);
    const __m256d c1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), vm);
    v.lo = _mm256_add_pd(v.lo, _mm256_mul_pd(c0, c0));
    v.hi = _mm256_add_pd(v.hi, _mm256_mul_pd(c1, c1));
  }
  const double var = v.total(i, n, [&](int64_t j) { return (x[j] - mean) * (x[j] - mean); }) / static_cast<double>(n);
  const float inv = layer_norm_inv(var, eps), m = static_cast<float>(mean);
  const __m256 vinv = _mm256_set1_ps(inv), vmf = _mm256_set1_ps(m);
  for (i = 0; i + 8 <= n; i += 8) {  // y = (x - m) * inv * w + b, in that order
    const __m256 c = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmf), vinv), _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(y + i, _mm256_add_ps(c, _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) y[i] = (x[i] - m) * inv * w[i] + b[i];
}

void rms_norm_x(const float* x, const float* w, float* y, int64_t n, float eps, double ss) {
  const float scale = rms_scale_from(ss, n, eps);
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _mm256_loadu_ps(w + i)));
  for (; i < n; ++i) y[i] = x[i] * scale * w[i];
}

}  // namespace

#include "kernels/simd/norms_entry.inc"

}  // namespace tessera::avx2
