// Row-wise element-wise ops. Each row is computed on its own, in a fixed order, so results
// never depend on how many rows share a call.
#pragma once
#include <cmath>
#include <cstdint>

namespace tessera {

// y = x / sqrt(mean(x^2) + eps) * w  (sum of squares in double, as llama.cpp does)
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
// Fused residual add + RMSNorm (one pass less over x): x += d; y = rms_norm(x) * w. Bitwise
// the same as add_inplace followed by rms_norm.
void add_rms_norm(float* x, const float* d, const float* w, float* y, int64_t n, float eps);
// RoPE angles of one position: cs[2i] = cos(theta_i), cs[2i + 1] = sin(theta_i) for the
// head_dim / 2 pairs, theta_i = pos * base^(-2i/head_dim) (by repeated multiplication in float,
// as ggml does). Computed once per token and shared by every layer and by q and k.
void rope_angles(int64_t pos, int head_dim, float base, float* cs);
// Multimodal RoPE of Qwen3-VL (interleaved): pair i turns with the row position h when i % 3 == 1
// and i < 3 * sections[1], with the column w when i % 3 == 2 and i < 3 * sections[2], else with
// the time t. Each angle is rope_angles' chain for its own position, so t = h = w gives
// rope_angles(t) bit for bit.
void rope_angles_mrope(int64_t t, int64_t h, int64_t w, const int sections[3], int head_dim, float base, float* cs);
// Rotate adjacent pairs (x[2i], x[2i+1]) of each head by angle i (GGUF llama layout).
void rope_pairs(float* x, int n_heads, int head_dim, const float* cs);
// Rotate (x[i], x[i + head_dim/2]) of each head by angle i (Hugging Face's rotate_half layout).
void rope_neox(float* x, int n_heads, int head_dim, const float* cs);
// g = silu(g) * u = g / (1 + exp(-g)) * u, with the polynomial exp of kernels/exp_poly.h (within a
// few ulp of libm's); vectorised per ISA, bitwise equal at every level (kernels.h dispatch).
void swiglu(float* g, const float* u, int64_t n);
void add_inplace(float* y, const float* x, int64_t n);
// y[i * step] = x[i] in IEEE half, rounded to nearest even (NaN kept quiet, overflow to inf):
// float_to_fp16's bits at every level (F16C, NEON's conversion). The fp16 KV cache's store.
void store_f16(const float* x, int64_t n, uint16_t* y, int64_t step);
// y[i] = x[i] widened from IEEE half (exact; F16C, NEON's conversion; a signalling NaN comes back quiet).
void load_f16(const uint16_t* x, int64_t n, float* y);

// y = (x - mean) / sqrt(var + eps) * w + b  (statistics in double)
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);
// Fused residual add + LayerNorm: x += d; y = layer_norm(x) (bitwise as the two steps).
void add_layer_norm(float* x, const float* d, const float* w, const float* b, float* y, int64_t n, float eps);

// The norms' statistics, the same bits at every ISA level: a sum over i < n is eight partial sums
// in double (element i into sum i mod 8, in order: the lanes of one 8-wide double vector, or of
// two or four narrower ones), added up by this fixed tree.
inline double tree8(const double a[8]) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }
// rms_norm's scale from the sum of squares, and layer_norm's 1/sqrt(var + eps)
inline float rms_scale_from(double ss, int64_t n, float eps) {
  return 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
}
inline float layer_norm_inv(double var, float eps) { return static_cast<float>(1.0 / std::sqrt(var + eps)); }

// The norms per ISA (the functions above run the active kernel table's, kernel_table.h); each bitwise
// its scalar twin.
#define TESSERA_NORM_DECLS                                                                           \
  void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);                     \
  void add_rms_norm(float* x, const float* d, const float* w, float* y, int64_t n, float eps);       \
  void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);   \
  void add_layer_norm(float* x, const float* d, const float* w, const float* b, float* y, int64_t n, float eps);
namespace ref {
TESSERA_NORM_DECLS
}  // namespace ref
namespace avx2 {
TESSERA_NORM_DECLS
}  // namespace avx2
namespace avx512 {
TESSERA_NORM_DECLS
}  // namespace avx512
namespace neon {
TESSERA_NORM_DECLS
}  // namespace neon
#undef TESSERA_NORM_DECLS
// softmax_row and gelu_tanh (PyTorch's approximate="tanh") live in kernels.h: they have SIMD versions.

}  // namespace tessera
