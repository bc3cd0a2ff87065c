#include "kernels/elementwise.h"
#include "core/fp16.h"
#include "kernels/exp_poly.h"
#include "kernels/kernels.h"

#include <cmath>

namespace tessera {

namespace {

// Σ f(i) for i < n in double, as eight interleaved partial sums (i mod 8) added up by a fixed
// tree: the same bits on every machine and ISA (plain IEEE double adds in one order), and eight
// independent add chains where one serial chain made the norms latency-bound. The SIMD norms keep
// the eight partial sums as the lanes of double vectors, and all add them up by tree8
// (elementwise.h).
template <class F>
double sum8(int64_t n, F f) {
  double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) a[j] += f(i + j);
  for (; i < n; ++i) a[i % 8] += f(i);
  return tree8(a);
}

}  // namespace

namespace ref {

float rms_scale(const float* x, int64_t n, float eps) {
  const double ss = sum8(n, [&](int64_t i) { return static_cast<double>(x[i] * x[i]); });
  return rms_scale_from(ss, n, eps);
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  const float scale = rms_scale(x, n, eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

void add_rms_norm(float* x, const float* d, const float* w, float* y, int64_t n, float eps) {
  for (int64_t i = 0; i < n; ++i) x[i] += d[i];
  rms_norm(x, w, y, n, eps);
}

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  const double mean = sum8(n, [&](int64_t i) { return static_cast<double>(x[i]); }) / static_cast<double>(n);
  const double var = sum8(n, [&](int64_t i) { return (x[i] - mean) * (x[i] - mean); }) / static_cast<double>(n);
  const float inv = layer_norm_inv(var, eps), m = static_cast<float>(mean);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) * inv * w[i] + b[i];
}

void add_layer_norm(float* x, const float* d, const float* w, const float* b, float* y, int64_t n, float eps) {
  for (int64_t i = 0; i < n; ++i) x[i] += d[i];
  layer_norm(x, w, b, y, n, eps);
}

}  // namespace ref

// The dispatched norms (rms_norm, layer_norm, ...) are in dispatch.cpp: AVX2, AVX-512 and NEON
// keep sum8's partial sums in double vectors (the same bits); the portable level runs the scalar
// twins.

void rope_angles(int64_t pos, int head_dim, float base, float* cs) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(head_dim));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < head_dim / 2; ++i) {
    cs[2 * i] = std::cos(theta);
    cs[2 * i + 1] = std::sin(theta);
    theta *= theta_scale;
  }
}

void rope_angles_mrope(int64_t t, int64_t h, int64_t w, const int sections[3], int head_dim, float base, float* cs) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(head_dim));
  float theta[3] = {static_cast<float>(t), static_cast<float>(h), static_cast<float>(w)};
  for (int i = 0; i < head_dim / 2; ++i) {
    const int axis = i % 3 == 1 && i < 3 * sections[1] ? 1 : i % 3 == 2 && i < 3 * sections[2] ? 2 : 0;
    cs[2 * i] = std::cos(theta[axis]);
    cs[2 * i + 1] = std::sin(theta[axis]);
    for (float& a : theta) a *= theta_scale;
  }
}

// Heads outer, so the inner loop runs over contiguous values (the compiler vectorizes it).
void rope_pairs(float* x, int n_heads, int head_dim, const float* cs) {
  for (int h = 0; h < n_heads; ++h) {
    float* p = x + h * head_dim;
    for (int i = 0; i < head_dim; i += 2) {
      const float c = cs[i], s = cs[i + 1], a = p[i], b = p[i + 1];
      p[i] = a * c - b * s;
      p[i + 1] = a * s + b * c;
    }
  }
}

void rope_neox(float* x, int n_heads, int head_dim, const float* cs) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* p = x + h * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1], a = p[i], b = p[i + half];
      p[i] = a * c - b * s;
      p[i + half] = a * s + b * c;
    }
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

namespace ref {

void store_f16(const float* x, int64_t n, uint16_t* y, int64_t step) {
  for (int64_t i = 0; i < n; ++i) y[i * step] = float_to_fp16(x[i]);
}

// A signalling NaN comes back quiet (its payload kept), as F16C's and NEON's conversions return it.
void load_f16(const uint16_t* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const bool nan = (x[i] & 0x7c00u) == 0x7c00u && (x[i] & 0x3ffu) != 0;
    y[i] = nan ? fp16_to_float(static_cast<uint16_t>(x[i] | 0x200u)) : fp16_to_float(x[i]);
  }
}

void swiglu(float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i];
    const float e = exp_nonpos(x < 0.0f - x ? x : 0.0f - x);  // exp(-|x|)
    const float s = (x < 0.0f ? e : 1.0f) / (1.0f + e);
    g[i] = x * s * u[i];
  }
}

void softmax_row(float* x, int64_t n, float scale) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i] * scale);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] = exp_nonpos(x[i] * scale - mx);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void gelu_tanh(float* x, int64_t n) {
  constexpr float k = 0.7978845608028654f;  // sqrt(2/pi)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  }
}

}  // namespace ref
}  // namespace tessera
