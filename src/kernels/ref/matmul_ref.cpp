// Scalar twin of the matmul kernels. It mirrors the SIMD evaluation order exactly (16 lanes,
// fused multiply-adds over k in order, the same reduction tree), so every ISA level produces
// bit-identical results and this file doubles as their specification.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels/elementwise.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"

namespace tessera {

namespace {

// Weight element k of a row, computed with the same rounding as the SIMD dequantizers.
float weight_at(DType t, const uint8_t* row, int64_t k) {
  switch (t) {
    case DType::F32: { float v; std::memcpy(&v, row + 4 * k, 4); return v; }
    case DType::F16: { uint16_t h; std::memcpy(&h, row + 2 * k, 2); return fp16_to_float(h); }
    case DType::BF16: { uint16_t h; std::memcpy(&h, row + 2 * k, 2); return bf16_to_float(h); }
    case DType::Q8_0: {
      const uint8_t* b = row + (k / 32) * 34;
      uint16_t d; std::memcpy(&d, b, 2);
      return fp16_to_float(d) * static_cast<float>(static_cast<int8_t>(b[2 + k % 32]));
    }
    case DType::Q4_0: {
      const uint8_t* b = row + (k / 32) * 18;
      uint16_t d; std::memcpy(&d, b, 2);
      const int j = static_cast<int>(k % 32);
      const int q = j < 16 ? (b[2 + j] & 0xf) : (b[2 + j - 16] >> 4);
      return fp16_to_float(d) * static_cast<float>(q - 8);
    }
    case DType::Q4_1: {
      const uint8_t* b = row + (k / 32) * 20;
      uint16_t d, m; std::memcpy(&d, b, 2); std::memcpy(&m, b + 2, 2);
      const int j = static_cast<int>(k % 32);
      const int q = j < 16 ? (b[4 + j] & 0xf) : (b[4 + j - 16] >> 4);
      return std::fma(fp16_to_float(d), static_cast<float>(q), fp16_to_float(m));
    }
    case DType::Q4_K: {
      const uint8_t* b = row + (k / 256) * kQ4KBytes;
      uint16_t d, dmin; std::memcpy(&d, b, 2); std::memcpy(&dmin, b + 2, 2);
      const int j = static_cast<int>(k % 256) / 32, l = static_cast<int>(k % 32);
      int sc, mn;
      q4k_scale_min(b + 4, j, sc, mn);
      const uint8_t byte = b[16 + 32 * (j / 2) + l];
      const int q = j % 2 ? byte >> 4 : byte & 0xf;
      const float d1 = fp16_to_float(d) * static_cast<float>(sc), m1 = fp16_to_float(dmin) * static_cast<float>(mn);
      return std::fma(d1, static_cast<float>(q), -m1);
    }
    case DType::IQ4_NL: {  // d·level, as ggml's dequantize_row_iq4_nl
      const uint8_t* b = row + (k / 32) * kIq4nlBytes;
      const int j = static_cast<int>(k % 32);
      const int q = j < 16 ? (b[2 + j] & 0xf) : (b[2 + j - 16] >> 4);
      return fp16_at(b) * static_cast<float>(kIq4nlLevels[q]);
    }
    case DType::IQ4_XS: {  // (d·(ls − 32))·level, as ggml's dequantize_row_iq4_xs
      const uint8_t* b = row + (k / 256) * kIq4xsBytes;
      const int j = static_cast<int>(k % 256) / 32, l = static_cast<int>(k % 32);
      const uint8_t* qs = b + 8 + 16 * j;
      const int q = l < 16 ? (qs[l] & 0xf) : (qs[l - 16] >> 4);
      const float dl = fp16_at(b) * static_cast<float>(iq4xs_block_scale(b, j));
      return dl * static_cast<float>(kIq4nlLevels[q]);
    }
    case DType::A4G64: {
      const uint8_t* b = row + (k / 64) * kA4G64Bytes;
      uint16_t s, z; std::memcpy(&s, b, 2); std::memcpy(&z, b + 2, 2);
      const int h = static_cast<int>(k % 64) / 32, j = static_cast<int>(k % 32);
      const int q = j < 16 ? (b[4 + 16 * h + j] & 0xf) : (b[4 + 16 * h + j - 16] >> 4);
      return std::fma(fp16_to_float(s), static_cast<float>(q), fp16_to_float(z));
    }
    default: return std::nanf("");
  }
}

float reduce16(float a[16]) {
  for (int s = 8; s >= 1; s /= 2)
    for (int i = 0; i < s; ++i) a[i] = a[i] + a[i + s];
  return a[0];
}

}  // namespace

void dequantize_row(DType type, const uint8_t* src, float* dst, int64_t n) {
  if (type == DType::F16 && reinterpret_cast<uintptr_t>(src) % 2 == 0) {  // exact at every level: the
                                                                          // vectorised widening (a float mmproj's load)
    load_f16(reinterpret_cast<const uint16_t*>(src), n, dst);
    return;
  }
  if (type == DType::Q2_K) {  // (d·sc)·q − dmin·m, the products exact: one rounding, as ggml's
    for (int64_t b = 0; b < n / 32; ++b) {
      int8_t q[32];
      float d[2], m[2];
      q2k_block(src + (b / 8) * kQ2KBytes, static_cast<int>(b % 8), q, d, m);
      for (int l = 0; l < 32; ++l) dst[32 * b + l] = std::fma(d[l / 16], static_cast<float>(q[l]), m[l / 16]);
    }
    return;
  }
  if (type == DType::Q5_0 || type == DType::Q5_1 || type == DType::Q5_K || type == DType::Q6_K || type == DType::Q3_K) {
    // the 5- and 6-bit types (and Q3_K) block by block: the quants unpacked once (quant_blocks.h),
    // then Q5_0 d·(q−16), Q5_1 fma(d, q, m), Q5_K fma(d·sc, q, −dmin·m), Q6_K (d·sc)·(q−32), Q3_K
    // (d·(sc − 32))·q
    const bool halves = type == DType::Q6_K || type == DType::Q3_K;
    for (int64_t b = 0; b < n / 32; ++b) {
      int8_t q[32];
      float d, m;
      q56_block(type, src, b, q, d, m);
      float* out = dst + 32 * b;
      for (int l = 0; l < 32; ++l)
        out[l] = halves                ? (l < 16 ? d : m) * static_cast<float>(q[l])
                 : type == DType::Q5_0 ? d * static_cast<float>(q[l])
                                       : std::fma(d, static_cast<float>(q[l]), m);
    }
    return;
  }
  for (int64_t k = 0; k < n; ++k) dst[k] = weight_at(type, src, k);
}

namespace ref {

void matmul_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m,
                 int64_t xs, float* y, int64_t ys) {
  const int64_t K = w.cols;
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_row(w.type, w.data + r * w.row_stride, row.data(), K);
    for (int64_t t = 0; t < m; ++t) {
      const float* xt = x + t * xs;
      float acc[16] = {0};
      for (int64_t k = 0; k < K; ++k) acc[k % 16] = std::fma(row[k], xt[k], acc[k % 16]);
      y[t * ys + r] = reduce16(acc);
    }
  }
}

void gemm_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
               int64_t ys) {
  const int64_t K = w.cols;
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_row(w.type, w.data + r * w.row_stride, row.data(), K);
    for (int64_t t = 0; t < m; ++t) {
      const float* xt = x + t * xs;
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc = std::fma(xt[k], row[k], acc);
      y[t * ys + r] = acc;
    }
  }
}

}  // namespace ref
}  // namespace tessera
