// What one call of a kernel does, for the profiler's roofline (profile/profiler.h): the
// floating-point operations and the bytes it must move at least (weights once, activations read
// and written). The formulas live beside the kernels so that every caller counts an op the same
// way; callers pass the result to prof::OpScope.
#pragma once
#include <cstdint>

#include "kernels/kernels.h"

namespace tessera {

struct OpCost {
  double flops = 0, bytes = 0;
};

// y = x W^T over n rows (matmul, gemm, matmul_q8, gemm_bf16): a multiply and an add per weight
// and row; the weights once in their stored type, x read and y written in fp32.
inline OpCost matmul_cost(const WeightMatrix& w, int64_t n) {
  return {2.0 * static_cast<double>(n) * static_cast<double>(w.rows) * static_cast<double>(w.cols),
          static_cast<double>(w.rows) * static_cast<double>(w.row_stride) +
              4.0 * static_cast<double>(n) * static_cast<double>(w.rows + w.cols)};
}

// Attention over `pairs` (query, visible key) pairs, summed over the queries, `width` = heads ×
// head_dim: q·k and p·v, two flops each per dimension. Bytes: the K and V rows of `kv_positions`
// positions read once (kv_row_bytes: one position's K or V over every kv head), q read and the
// output written in fp32.
inline OpCost attention_cost(double pairs, int64_t width, int64_t n_q, int64_t kv_positions, double kv_row_bytes) {
  return {4.0 * pairs * static_cast<double>(width),
          2.0 * static_cast<double>(kv_positions) * kv_row_bytes + 8.0 * static_cast<double>(n_q) * static_cast<double>(width)};
}

// rms_norm / layer_norm over n rows of `width` (residual: add_*_norm, the residual read too);
// out_bytes: each output element's size (4: fp32; 2: rounded straight into bf16 tiles).
inline OpCost rms_norm_cost(int64_t n, int64_t width, bool residual) {
  const double e = static_cast<double>(n) * static_cast<double>(width);
  return {4.0 * e, (residual ? 12.0 : 8.0) * e};
}
inline OpCost layer_norm_cost(int64_t n, int64_t width, bool residual, int out_bytes = 4) {
  const double e = static_cast<double>(n) * static_cast<double>(width);
  return {8.0 * e, (residual ? 12.0 : 8.0) * e - (4.0 - out_bytes) * e};
}

// A pass over n × width results after a GEMM: bias add and/or GELU-tanh (about 9 flops an element
// with its exp), read in fp32 and written back in fp32 or as bf16.
inline OpCost bias_gelu_cost(int64_t n, int64_t width, bool gelu, bool out_bf16) {
  const double e = static_cast<double>(n) * static_cast<double>(width);
  return {(gelu ? 9.0 : 1.0) * e, (out_bf16 ? 6.0 : 8.0) * e};
}

// swiglu over n elements: g and u read, g written.
inline OpCost swiglu_cost(int64_t n) { return {4.0 * static_cast<double>(n), 12.0 * static_cast<double>(n)}; }

// RoPE on n tokens' q (width q_width) and k (kv_width), then k and v stored into the cache
// (kv_row_bytes per position for each of K and V).
inline OpCost rope_kv_store_cost(int64_t n, int64_t q_width, int64_t kv_width, double kv_row_bytes) {
  const double t = static_cast<double>(n);
  return {6.0 * t * static_cast<double>(q_width + kv_width),
          4.0 * t * static_cast<double>(2 * q_width + 2 * kv_width) + 2.0 * t * kv_row_bytes};
}

// n rows of `width` floats moved once (token embeddings, logits read by the sampler): bytes only.
inline OpCost float_rows_cost(int64_t n, int64_t width) {
  return {0.0, 4.0 * static_cast<double>(n) * static_cast<double>(width)};
}

}  // namespace tessera
