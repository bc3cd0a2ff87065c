// NEON matmul (Apple Silicon's and other ARMv8 CPUs' baseline). The 16 lanes of the scalar
// twin are four float32x4 registers; fused multiply-adds over k in order and the same
// reduction tree, so results are bitwise those of ref/ and the x86 kernels.
#include <arm_neon.h>

#include <cstring>

#include "kernels/kernels.h"

namespace tessera::neon {

namespace {

struct V16 {
  float32x4_t v[4];
};

inline float half_at(const uint8_t* p) {
  float16_t h;
  std::memcpy(&h, p, 2);
  return static_cast<float>(h);
}

// Weights 16c .. 16c+15 of a row (full chunks), with ref/weight_at()'s rounding.
inline V16 deq16(DType t, const uint8_t* row, int64_t c) {
  V16 w;
  switch (t) {
    case DType::F32:
      for (int i = 0; i < 4; ++i) w.v[i] = vld1q_f32(reinterpret_cast<const float*>(row) + 16 * c + 4 * i);
      break;
    case DType::F16:
      for (int i = 0; i < 4; ++i) w.v[i] = vcvt_f32_f16(vld1_f16(reinterpret_cast<const float16_t*>(row) + 16 * c + 4 * i));
      break;
    case DType::BF16:
      for (int i = 0; i < 4; ++i)
        w.v[i] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(row) + 16 * c + 4 * i), 16));
      break;
    case DType::Q8_0: {
      const uint8_t* b = row + (c / 2) * 34;
      const float32x4_t d = vdupq_n_f32(half_at(b));
      const int8x16_t q = vld1q_s8(reinterpret_cast<const int8_t*>(b + 2 + 16 * (c % 2)));
      const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
      const int16x4_t parts[4] = {vget_low_s16(lo), vget_high_s16(lo), vget_low_s16(hi), vget_high_s16(hi)};
      for (int i = 0; i < 4; ++i) w.v[i] = vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(parts[i])));
      break;
    }
    case DType::Q4_0:
    case DType::Q4_1: {
      const bool q41 = t == DType::Q4_1;
      const uint8_t* b = row + (c / 2) * (q41 ? 20 : 18);
      const float32x4_t d = vdupq_n_f32(half_at(b));
      const float32x4_t m = vdupq_n_f32(q41 ? half_at(b + 2) : 0.0f);
      uint8x16_t q = vld1q_u8(b + (q41 ? 4 : 2));
      q = (c % 2) ? vshrq_n_u8(q, 4) : vandq_u8(q, vdupq_n_u8(0x0f));
      const uint16x8_t lo = vmovl_u8(vget_low_u8(q)), hi = vmovl_u8(vget_high_u8(q));
      const uint16x4_t parts[4] = {vget_low_u16(lo), vget_high_u16(lo), vget_low_u16(hi), vget_high_u16(hi)};
      for (int i = 0; i < 4; ++i) {
        int32x4_t qi = vreinterpretq_s32_u32(vmovl_u16(parts[i]));
        if (!q41) qi = vsubq_s32(qi, vdupq_n_s32(8));
        const float32x4_t qf = vcvtq_f32_s32(qi);
        w.v[i] = q41 ? vfmaq_f32(m, d, qf) : vmulq_f32(d, qf);  // fma(d, q, m) / d * (q - 8)
      }
      break;
    }
    default:
      for (auto& x : w.v) x = vdupq_n_f32(0.0f);
  }
  return w;
}

// reduce16's tree: (a[i] + a[i+8]) -> (+ [i+4]) -> (+ [i+2]) -> (+ [i+1])
inline float reduce16(const V16& a) {
  const float32x4_t s8a = vaddq_f32(a.v[0], a.v[2]), s8b = vaddq_f32(a.v[1], a.v[3]);
  const float32x4_t s4 = vaddq_f32(s8a, s8b);
  const float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
  return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

}  // namespace

void matmul_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
                 int64_t ys) {
  const int64_t K = w.cols, full = K / 16;
  if (K % 16 != 0) {  // float types with a tail: the scalar twin (rare shapes)
    ref::matmul_rows(w, r0, r1, x, m, xs, y, ys);
    return;
  }
  constexpr int R = 4;
  for (int64_t r = r0; r < r1; r += R) {
    const int nr = static_cast<int>(std::min<int64_t>(R, r1 - r));
    for (int64_t t = 0; t < m; ++t) {
      const float* xt = x + t * xs;
      V16 acc[R];
      for (int i = 0; i < nr; ++i)
        for (auto& v : acc[i].v) v = vdupq_n_f32(0.0f);
      for (int64_t c = 0; c < full; ++c) {
        float32x4_t xv[4];
        for (int l = 0; l < 4; ++l) xv[l] = vld1q_f32(xt + 16 * c + 4 * l);
        for (int i = 0; i < nr; ++i) {
          const V16 wv = deq16(w.type, w.data + (r + i) * w.row_stride, c);
          for (int l = 0; l < 4; ++l) acc[i].v[l] = vfmaq_f32(acc[i].v[l], wv.v[l], xv[l]);
        }
      }
      for (int i = 0; i < nr; ++i) y[t * ys + r + i] = reduce16(acc[i]);
    }
  }
}

void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m, int64_t xq_stride,
                    float* y, int64_t ys) {
  ref::matmul_q8_rows(w, r0, r1, xq, m, xq_stride, y, ys);
}

void gemm_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
               int64_t ys) {
  ref::gemm_rows(w, r0, r1, x, m, xs, y, ys);
}

void softmax_row(float* x, int64_t n, float scale) { ref::softmax_row(x, n, scale); }
void gelu_tanh(float* x, int64_t n) { ref::gelu_tanh(x, n); }

void attention(const float* q, const void* k, const void* v, DType kv_type, int64_t n_kv, int64_t kv_stride,
               int head_dim, float scale, float* out, float* scratch) {
  ref::attention(q, k, v, kv_type, n_kv, kv_stride, head_dim, scale, out, scratch);
}

}  // namespace tessera::neon
