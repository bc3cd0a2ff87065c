// Scalar twin of the 8-bit-activation matmul: ggml's quantize_row_q8_1, and block dot products
// in the order kernels.h defines, read straight from the GGUF rows (not the repacked panels, so
// it checks the packing too). Every SIMD version reproduces it bit for bit.
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/kernels.h"
#include "kernels/q8_panels.h"
#include "kernels/quant_blocks.h"

namespace tessera {

bool supports_q8_activations(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0 || t == DType::Q4_K || t == DType::A4G64 ||
         t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q5_K || t == DType::Q6_K || t == DType::IQ4_NL ||
         t == DType::IQ4_XS || t == DType::Q3_K || t == DType::Q2_K;
}

namespace ref {

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0, sum_lo = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = static_cast<int>(std::nearbyint(xb[i] * id));  // ties to even, as _mm256_round_ps
      y[b].q[i] = static_cast<int8_t>(q);
      sum += q;
      if (i == 15) sum_lo = sum;
    }
    y[b].d = fp16_to_float(float_to_fp16(d));
    y[b].s = fp16_to_float(float_to_fp16(d * static_cast<float>(sum)));
    y[b].sum = sum;
    y[b].sum_lo = sum_lo;
  }
}

namespace {

// A block's fp16 scale d at p, and (with_min) its fp16 min m after it.
void fp16_scale_min(const uint8_t* p, bool with_min, float& d, float& m) {
  d = fp16_at(p);
  m = with_min ? fp16_at(p + 2) : 0.0f;
}

// Weight quants of block b as 32 signed/unsigned ints, plus the block's scale and min (Q6_K: the
// scales d·sc of its first and last 16 elements). Q2_K, with its halves' mins, is read by
// matmul_q8_rows itself (q2k_block).
void weight_block(DType t, const uint8_t* row, int64_t b, int q[32], float& d, float& m) {
  if (t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q5_K || t == DType::Q6_K || t == DType::Q3_K) {
    int8_t q8[32];
    q56_block(t, row, b, q8, d, m);
    for (int i = 0; i < 32; ++i) q[i] = q8[i];
    return;
  }
  if (t == DType::Q8_0) {
    const uint8_t* p = row + 34 * b;
    fp16_scale_min(p, false, d, m);
    for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(p[2 + i]);
    return;
  }
  if (t == DType::IQ4_NL || t == DType::IQ4_XS) {  // levels; d (IQ4_XS: d·(ls − 32), exact)
    const bool xs = t == DType::IQ4_XS;
    const int j = static_cast<int>(b % 8);
    const uint8_t* p = xs ? row + (b / 8) * kIq4xsBytes : row + kIq4nlBytes * b;
    d = xs ? fp16_at(p) * static_cast<float>(iq4xs_block_scale(p, j)) : fp16_at(p);
    m = 0.0f;
    const uint8_t* qs = xs ? p + 8 + 16 * j : p + 2;
    for (int i = 0; i < 16; ++i) {
      q[i] = kIq4nlLevels[qs[i] & 15];
      q[i + 16] = kIq4nlLevels[qs[i] >> 4];
    }
    return;
  }
  if (t == DType::Q4_K) {  // sub-block b % 8 of super-block b / 8, as block_consts/weight_at
    const uint8_t* p = row + (b / 8) * kQ4KBytes;
    const int j = static_cast<int>(b % 8);
    q4k_sub_scale_min(p, j, d, m);
    const uint8_t* qs = p + 16 + 32 * (j / 2);
    for (int i = 0; i < 32; ++i) q[i] = j % 2 ? qs[i] >> 4 : qs[i] & 15;
    return;
  }
  // Q4_0, Q4_1 and A4G64 (each 32-element half of a group: a Q4_1 block with the group's scale
  // and bias): fp16 d (and m), 16 bytes of nibbles in ggml's order
  const bool a4 = t == DType::A4G64, with_min = t != DType::Q4_0;
  const uint8_t* p = a4 ? row + (b / 2) * kA4G64Bytes : row + (with_min ? 20 : 18) * b;
  fp16_scale_min(p, with_min, d, m);
  const uint8_t* qs = a4 ? p + 4 + 16 * (b % 2) : p + (with_min ? 4 : 2);
  const int off = with_min ? 0 : 8;
  for (int i = 0; i < 16; ++i) {
    q[i] = (qs[i] & 15) - off;
    q[i + 16] = (qs[i] >> 4) - off;
  }
}

// Block b of row r of a Q8_0 matrix that keeps only its q8 panels (a float matrix quantized at
// load, Idefics3Vision::quantize_to_q8_0): the panel holds the GGUF block's quants + 128 and its
// fp16 d (q8_panels.h), so these are the bytes the row had.
void q8_0_block_from_panel(const WeightMatrix& w, int64_t r, int64_t b, int q[32], float& d) {
  const uint8_t* panel = w.panels + (r / kPanelRows) * static_cast<int64_t>(w.panel_stride);
  const int64_t lane = r % kPanelRows;
  const uint8_t* qb = panel + b * static_cast<int64_t>(panel_quant_bytes(DType::Q8_0));
  for (int v = 0; v < 8; ++v)
    for (int e = 0; e < 4; ++e) q[4 * v + e] = static_cast<int8_t>(qb[64 * v + 4 * lane + e] ^ 0x80);
  const uint8_t* scales = panel + (w.cols / 32) * static_cast<int64_t>(panel_quant_bytes(DType::Q8_0));
  float unused;
  fp16_scale_min(scales + b * static_cast<int64_t>(panel_scale_bytes(DType::Q8_0)) + 2 * lane, false, d, unused);
}

}  // namespace

void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                    int64_t xq_stride, float* y, int64_t ys) {
  const int64_t nb = w.cols / 32;
  const bool has_min = q8_has_min(w.type);
  if (!w.data && (w.type != DType::Q8_0 || !w.panels)) fail("matmul_q8: %s weights without their rows", dtype_name(w.type));
  int q[32];
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data ? w.data + r * w.row_stride : nullptr;
    for (int64_t t = 0; t < m; ++t) {
      const BlockQ8_1* xb = xq + t * xq_stride;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        if (w.type == DType::Q2_K) {  // two halves, each with its own scale and min
          float dh[2], mh[2];
          int8_t q2[32];
          q2k_block(row + (b / 8) * kQ2KBytes, static_cast<int>(b % 8), q2, dh, mh);
          int lo = 0, hi = 0;
          for (int e = 0; e < 16; ++e) lo += q2[e] * xb[b].q[e];
          for (int e = 16; e < 32; ++e) hi += q2[e] * xb[b].q[e];
          acc = std::fma(static_cast<float>(lo), dh[0] * xb[b].d, acc);
          acc = std::fma(static_cast<float>(hi), dh[1] * xb[b].d, acc);
          acc = std::fma(static_cast<float>(xb[b].sum_lo), mh[0] * xb[b].d, acc);
          acc = std::fma(static_cast<float>(xb[b].sum - xb[b].sum_lo), mh[1] * xb[b].d, acc);
          continue;
        }
        float d, mn;
        if (row) weight_block(w.type, row, b, q, d, mn);
        else q8_0_block_from_panel(w, r, b, q, d), mn = 0.0f;
        if (q8_two_halves(w.type)) {  // Q6_K, Q3_K: two halves, each with its own scale
          int lo = 0, hi = 0;
          for (int e = 0; e < 16; ++e) lo += q[e] * xb[b].q[e];
          for (int e = 16; e < 32; ++e) hi += q[e] * xb[b].q[e];
          acc = std::fma(static_cast<float>(lo), d * xb[b].d, acc);
          acc = std::fma(static_cast<float>(hi), mn * xb[b].d, acc);
          continue;
        }
        int isum = 0;
        for (int e = 0; e < 32; ++e) isum += q[e] * xb[b].q[e];
        acc = std::fma(static_cast<float>(isum), d * xb[b].d, acc);
        if (has_min) acc = std::fma(mn, xb[b].s, acc);
      }
      y[t * ys + r] = acc;
    }
  }
}

}  // namespace ref
}  // namespace tessera
