// 8-bit-activation matmul with ARMv8.2 dot products (SDOT), built with +dotprod and used only
// when the CPU reports it. Each SDOT lane sums 4 int8 products: exactly the 8 integer lane sums
// per 32-element block of ref/matmul_q8_ref.cpp, so the float steps that follow (fma into 8
// lanes, ggml's hsum_float_8, + min * sum) give bitwise the scalar twin's results.
// i8mm's SMMLA sums 8 products per lane, which would merge two of those lanes: not used here.
#include <arm_neon.h>

#include <cstring>

#include "core/fp16.h"
#include "kernels/kernels.h"

namespace tessera::neon {

namespace {

inline float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_float(h);
}

// The block's 32 weight quants as int8 (Q4_0: q - 8; Q4_1: q; Q8_0: as stored).
inline void weight_quants(DType t, const uint8_t* p, int8x16_t& lo, int8x16_t& hi, float& d, float& m) {
  d = half(p);
  m = 0.0f;
  if (t == DType::Q8_0) {
    lo = vld1q_s8(reinterpret_cast<const int8_t*>(p + 2));
    hi = vld1q_s8(reinterpret_cast<const int8_t*>(p + 18));
    return;
  }
  const bool q41 = t == DType::Q4_1;
  if (q41) m = half(p + 2);
  const uint8x16_t q = vld1q_u8(p + (q41 ? 4 : 2));
  int8x16_t l = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), h = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
  if (!q41) {
    l = vsubq_s8(l, vdupq_n_s8(8));
    h = vsubq_s8(h, vdupq_n_s8(8));
  }
  lo = l;
  hi = h;
}

}  // namespace

void matmul_q8_rows_dotprod(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                            int64_t xq_stride, float* y, int64_t ys) {
  const int64_t nb = w.cols / 32;
  const size_t bb = w.type == DType::Q8_0 ? 34 : w.type == DType::Q4_1 ? 20 : 18;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + r * w.row_stride;
    for (int64_t t = 0; t < m; ++t) {
      const BlockQ8_1* xb = xq + t * xq_stride;
      float32x4_t acc_lo = vdupq_n_f32(0.0f), acc_hi = vdupq_n_f32(0.0f);
      float summs = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int8x16_t wl, wh;
        float d, mn;
        weight_quants(w.type, row + b * bb, wl, wh, d, mn);
        const float dx = fp16_to_float(xb[b].d);
        if (w.type == DType::Q4_1) summs += mn * fp16_to_float(xb[b].s);
        const float dd = d * dx;
        const int32x4_t s_lo = vdotq_s32(vdupq_n_s32(0), wl, vld1q_s8(xb[b].q));
        const int32x4_t s_hi = vdotq_s32(vdupq_n_s32(0), wh, vld1q_s8(xb[b].q + 16));
        acc_lo = vfmaq_f32(acc_lo, vdupq_n_f32(dd), vcvtq_f32_s32(s_lo));
        acc_hi = vfmaq_f32(acc_hi, vdupq_n_f32(dd), vcvtq_f32_s32(s_hi));
      }
      // hsum_float_8: r[i] = a[i+4] + a[i]; (r0 + r2) + (r1 + r3)
      const float32x4_t s4 = vaddq_f32(acc_hi, acc_lo);
      const float v0 = vgetq_lane_f32(s4, 0) + vgetq_lane_f32(s4, 2), v1 = vgetq_lane_f32(s4, 1) + vgetq_lane_f32(s4, 3);
      y[t * ys + r] = (v0 + v1) + summs;
    }
  }
}

}  // namespace tessera::neon
