// Vectorised element-wise ops: the encoder's softmax rows (with exp_nonpos on 16 lanes, the tail
// on one) and GELU-tanh (its own exp2), SwiGLU, and the RMS and Layer norms.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/elementwise.h"
#include "kernels/kernels.h"
#include "kernels/simd/vec16.h"

namespace tessera::avx512 {

void softmax_row(float* x, int64_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) mx = _mm512_max_ps(mx, _mm512_mul_ps(_mm512_loadu_ps(x + i), s));
  float m = _mm512_reduce_max_ps(mx);
  for (int64_t j = i; j < n; ++j) m = std::fmax(m, x[j] * scale);
  const __m512 mv = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    const __m512 e = simd::exp16_nonpos({_mm512_fmsub_ps(_mm512_loadu_ps(x + i), s, mv)}).v;
    _mm512_storeu_ps(x + i, e);
    sum = _mm512_add_ps(sum, e);
  }
  double total = _mm512_reduce_add_ps(sum);
  for (int64_t j = i; j < n; ++j) total += x[j] = exp_nonpos(x[j] * scale - m);
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / total));
  for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
  for (int64_t j = i; j < n; ++j) x[j] *= static_cast<float>(1.0 / total);
}

void gelu_tanh(float* x, int64_t n) {
  // 0.5·v·(1 + tanh(u)) = v / (1 + exp(-2u)), u = k·(v + 0.044715·v³), and exp(-2u) = 2^t with
  // t = v·(a + b·v²): one division and an exp2 whose range reduction is one VREDUCEPS (f = t -
  // floor(t), rounded down where inexact) and whose scaling is one VSCALEFPS (by 2^floor(t)).
  // Half the operations of tanh from exp; within 1.3e-7 of float64 GELU-tanh, relative to
  // max(1, |gelu|). t is clamped to ±200 (2^±200 is 0 or inf in fp32).
  constexpr double kLog2e = 1.4426950408889634, kK = 0.7978845608028654;
  const __m512 a = _mm512_set1_ps(static_cast<float>(-2.0 * kK * kLog2e)),
               b = _mm512_set1_ps(static_cast<float>(-2.0 * kK * kLog2e * 0.044715)), one = _mm512_set1_ps(1.0f),
               lo = _mm512_set1_ps(-200.0f), hi = _mm512_set1_ps(200.0f);
  // 2^f on [0, 1), fitted minimax (relative error 6.4e-8)
  constexpr float c[7] = {1.0f, 0.693147063f, 0.240229309f, 0.0554852821f, 0.00967545155f, 0.00124678458f, 0.000216129192f};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    __m512 t = _mm512_mul_ps(v, _mm512_fmadd_ps(_mm512_mul_ps(v, v), b, a));
    t = _mm512_min_ps(_mm512_max_ps(t, lo), hi);
    const __m512 f = _mm512_reduce_ps(t, 9);
    __m512 p = _mm512_set1_ps(c[6]);
    for (int j = 5; j >= 0; --j) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c[j]));
    _mm512_storeu_ps(x + i, _mm512_div_ps(v, _mm512_add_ps(_mm512_scalef_ps(p, t), one)));
  }
  if (i < n) ref::gelu_tanh(x + i, n - i);
}

// --- norms: elementwise.cpp's sum8 with its eight partial sums as the lanes of one double vector
// (lane j: elements i = j mod 8, in order), so the same bits as the scalar twins; 1.5 ns per
// element there, most of the vision encoder's add+layer_norm time. ---

namespace {

// The lanes' sums plus the tail (elements i..n-1, value f(i), into sum i mod 8 as sum8 does),
// added up by tree8.
template <class F>
double lanes_total(__m512d acc, int64_t i, int64_t n, F f) {
  alignas(64) double a[8];
  _mm512_store_pd(a, acc);
  for (; i < n; ++i) a[i % 8] += f(i);
  return tree8(a);
}

inline __m512d widen8(const float* x) { return _mm512_cvtps_pd(_mm256_loadu_ps(x)); }

// Σ x[i] in sum8's order; with d, x[i] += d[i] first (the residual add, fused into this pass).
double sum_x(float* x, const float* d, int64_t n) {
  __m512d s = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (d) _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(d + i)));
    s = _mm512_add_pd(s, widen8(x + i));
  }
  for (int64_t j = i; d && j < n; ++j) x[j] += d[j];
  return lanes_total(s, i, n, [&](int64_t j) { return static_cast<double>(x[j]); });
}

// Σ double(x[i] * x[i]) (the square in float, as rms_scale), with the same optional residual add.
double sum_sq(float* x, const float* d, int64_t n) {
  __m512d s = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    if (d) {
      v = _mm256_add_ps(v, _mm256_loadu_ps(d + i));
      _mm256_storeu_ps(x + i, v);
    }
    s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm256_mul_ps(v, v)));
  }
  for (int64_t j = i; d && j < n; ++j) x[j] += d[j];
  return lanes_total(s, i, n, [&](int64_t j) { return static_cast<double>(x[j] * x[j]); });
}

void layer_norm_x(const float* x, const float* w, const float* b, float* y, int64_t n, float eps, double sum) {
  const double mean = sum / static_cast<double>(n);
  const __m512d vm = _mm512_set1_pd(mean);
  __m512d v = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d c = _mm512_sub_pd(widen8(x + i), vm);
    v = _mm512_add_pd(v, _mm512_mul_pd(c, c));
  }
  const double var = lanes_total(v, i, n, [&](int64_t j) { return (x[j] - mean) * (x[j] - mean); }) / static_cast<double>(n);
  const __m512 inv = _mm512_set1_ps(layer_norm_inv(var, eps)), m = _mm512_set1_ps(static_cast<float>(mean));
  for (i = 0; i < n; i += 16) {  // y = (x - m) * inv * w + b, in that order
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 c = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m), inv), _mm512_maskz_loadu_ps(k, w + i));
    _mm512_mask_storeu_ps(y + i, k, _mm512_add_ps(c, _mm512_maskz_loadu_ps(k, b + i)));
  }
}

void rms_norm_x(const float* x, const float* w, float* y, int64_t n, float eps, double ss) {
  const __m512 s = _mm512_set1_ps(rms_scale_from(ss, n, eps));
  for (int64_t i = 0; i < n; i += 16) {  // y = x * scale * w
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), s), _mm512_maskz_loadu_ps(k, w + i)));
  }
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  rms_norm_x(x, w, y, n, eps, sum_sq(const_cast<float*>(x), nullptr, n));  // not written without d
}
void add_rms_norm(float* x, const float* d, const float* w, float* y, int64_t n, float eps) {
  rms_norm_x(x, w, y, n, eps, sum_sq(x, d, n));
}
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  layer_norm_x(x, w, b, y, n, eps, sum_x(const_cast<float*>(x), nullptr, n));
}
void add_layer_norm(float* x, const float* d, const float* w, const float* b, float* y, int64_t n, float eps) {
  layer_norm_x(x, w, b, y, n, eps, sum_x(x, d, n));
}

#include "kernels/simd/elementwise_simd.inc"

}  // namespace tessera::avx512
