// 8-bit-activation matmul with ARMv8.2 dot products (SDOT) over the 16-row panels of
// q8_panels.h, built with +dotprod and used only when the CPU reports it. 16 bytes of a panel
// vector are 4 consecutive weights of 4 rows; SDOT by lane against the block's activations adds
// them into 4 row sums, so each lane ends with its row's exact block sum and the float steps
// (kernels.h) are the scalar twin's: results are bitwise equal to ref/.
// SDOT is signed × signed: 4- to 6-bit quants (0..63) are used as they are (Q4_0, Q5_0 and Q6_K
// then subtract 8, 16 or 32 times Σx; Q6_K per 16-element half, each half its own sum and scale)
// and Q8_0's stored w + 128 goes back to w.
#include <arm_neon.h>

#include <algorithm>

#include "kernels/kernels.h"
#include "kernels/q8_panels.h"
#include "kernels/quant_blocks.h"

namespace tessera::neon {

namespace {

template <DType T>
void q8_panels_dotprod(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m, int64_t xs,
                       float* y, int64_t ys) {
  const int64_t nb = w.cols / 32;
  const uint8x16_t m4 = vdupq_n_u8(0x0f);
  for (int64_t p = r0 / kPanelRows; p * kPanelRows < r1; ++p) {
    const uint8_t* quants = w.panels + p * static_cast<int64_t>(w.panel_stride);
    const uint8_t* scales = quants + nb * static_cast<int64_t>(panel_quant_bytes(T));
    for (int quad = 0; quad < 4; ++quad) {
      const int64_t row = p * kPanelRows + 4 * quad;
      if (row + 4 <= r0 || row >= r1) continue;
      for (int64_t t = 0; t < m; ++t) {
        const BlockQ8_1* xb = xq + t * xs;
        float32x4_t acc = vdupq_n_f32(0.0f);
        for (int64_t b = 0; b < nb; ++b) {
          int8x16_t g[8];
          if constexpr (T == DType::Q8_0) {
            const uint8_t* q = quants + b * 512 + 16 * quad;
            for (int v = 0; v < 8; ++v) g[v] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(q + 64 * v), vdupq_n_u8(0x80)));
          } else if constexpr (q8_high_bits(T) > 0) {  // nibbles, then each g[G]'s high bits to bits 4..
            const uint8_t* q = quants + b * static_cast<int64_t>(panel_quant_bytes(T)) + 16 * quad;
            const uint8x16_t hm = vdupq_n_u8(q8_high_bits(T) == 1 ? 0x10 : 0x30);
            for (int v = 0; v < 4; ++v) {
              const uint8x16_t pk = vld1q_u8(q + 64 * v);
              g[v] = vreinterpretq_s8_u8(vandq_u8(pk, m4));
              g[v + 4] = vreinterpretq_s8_u8(vshrq_n_u8(pk, 4));
            }
            for (int G = 0; G < 8; ++G) {
              const int from = q8_high_bits(T) == 1 ? G : 2 * (G % 4);
              const uint8x16_t h = vld1q_u8(q + 256 + (q8_high_bits(T) == 1 ? 0 : 64 * (G / 4)));
              // per byte: the high bits at `from` moved to bit 4 (shifts by a run-time count)
              const uint8x16_t sh = vshlq_u8(h, vdupq_n_s8(static_cast<int8_t>(4 - from)));
              g[G] = vorrq_s8(g[G], vreinterpretq_s8_u8(vandq_u8(sh, hm)));
            }
          } else if constexpr (T == DType::Q2_K) {  // 2-bit quants, four weight vectors to a byte
            const uint8_t* q = quants + b * 128 + 16 * quad;
            const uint8x16_t m2 = vdupq_n_u8(3), p0 = vld1q_u8(q), p1 = vld1q_u8(q + 64);
            g[0] = vreinterpretq_s8_u8(vandq_u8(p0, m2));
            g[1] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(p0, 2), m2));
            g[2] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(p0, 4), m2));
            g[3] = vreinterpretq_s8_u8(vshrq_n_u8(p0, 6));
            g[4] = vreinterpretq_s8_u8(vandq_u8(p1, m2));
            g[5] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(p1, 2), m2));
            g[6] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(p1, 4), m2));
            g[7] = vreinterpretq_s8_u8(vshrq_n_u8(p1, 6));
          } else if constexpr (is_iq4(T)) {  // nibbles to their signed levels (TBL)
            const uint8_t* q = quants + b * 256 + 16 * quad;
            const int8x16_t lut = vld1q_s8(kIq4nlLevels);
            for (int v = 0; v < 4; ++v) {
              const uint8x16_t pk = vld1q_u8(q + 64 * v);
              g[v] = vqtbl1q_s8(lut, vandq_u8(pk, m4));
              g[v + 4] = vqtbl1q_s8(lut, vshrq_n_u8(pk, 4));
            }
          } else if constexpr (T == DType::Q4_K) {
            const uint8_t* q = quants + (b / 2) * 512 + 16 * quad;
            for (int v = 0; v < 8; ++v) {
              const uint8x16_t pk = vld1q_u8(q + 64 * v);
              g[v] = vreinterpretq_s8_u8(b % 2 ? vshrq_n_u8(pk, 4) : vandq_u8(pk, m4));
            }
          } else {
            const uint8_t* q = quants + b * 256 + 16 * quad;
            for (int v = 0; v < 4; ++v) {
              const uint8x16_t pk = vld1q_u8(q + 64 * v);
              g[v] = vreinterpretq_s8_u8(vandq_u8(pk, m4));
              g[v + 4] = vreinterpretq_s8_u8(vshrq_n_u8(pk, 4));
            }
          }
          const int8x16_t xlo = vld1q_s8(xb[b].q), xhi = vld1q_s8(xb[b].q + 16);
          constexpr int off = q8_signed_weights(T) ? 0 : q8_offset(T);  // Q8_0 is signed again here, the levels too
          int32x4_t s = vdupq_n_s32(-off * (q8_two_halves(T) ? xb[b].sum_lo : xb[b].sum));
          int32x4_t s2 = vdupq_n_s32(q8_two_halves(T) ? -off * (xb[b].sum - xb[b].sum_lo) : 0);
          s = vdotq_laneq_s32(s, g[0], xlo, 0);
          s = vdotq_laneq_s32(s, g[1], xlo, 1);
          s = vdotq_laneq_s32(s, g[2], xlo, 2);
          s = vdotq_laneq_s32(s, g[3], xlo, 3);
          s2 = vdotq_laneq_s32(s2, g[4], xhi, 0);
          s2 = vdotq_laneq_s32(s2, g[5], xhi, 1);
          s2 = vdotq_laneq_s32(s2, g[6], xhi, 2);
          s2 = vdotq_laneq_s32(s2, g[7], xhi, 3);
          float32x4_t d, mn = vdupq_n_f32(0.0f), mins[2];
          if constexpr (T == DType::Q2_K) {  // the halves' d·sc; their mins −dmin·m
            const KScales k = q8_k_scales(T, scales, b);
            const float32x4_t dd = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(k.d) + 4 * quad)));
            const float32x4_t dm = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(k.dmin) + 4 * quad)));
            float f[4][4];
            for (int i = 0; i < 4; ++i) {
              f[0][i] = static_cast<float>(k.sc[4 * quad + i]), f[1][i] = static_cast<float>(k.sc[16 + 4 * quad + i]);
              f[2][i] = static_cast<float>(k.mn[4 * quad + i]), f[3][i] = static_cast<float>(k.mn[16 + 4 * quad + i]);
            }
            d = vmulq_f32(dd, vld1q_f32(f[0]));
            mn = vmulq_f32(dd, vld1q_f32(f[1]));
            mins[0] = vnegq_f32(vmulq_f32(dm, vld1q_f32(f[2])));
            mins[1] = vnegq_f32(vmulq_f32(dm, vld1q_f32(f[3])));
          } else if constexpr (T == DType::IQ4_XS) {  // d·(ls − 32), exact
            const KScales k = q8_k_scales(T, scales, b);
            const float32x4_t dd = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(k.d) + 4 * quad)));
            float scf[4];
            for (int i = 0; i < 4; ++i) scf[i] = static_cast<float>(static_cast<int8_t>(k.sc[4 * quad + i]));
            d = vmulq_f32(dd, vld1q_f32(scf));
          } else if constexpr (q8_super_scales(T)) {  // d·sc, −dmin·m (Q6_K, Q3_K: both halves' d·sc), exact products
            const KScales k = q8_k_scales(T, scales, b);
            const float32x4_t dd = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(k.d) + 4 * quad)));
            float scf[4], mnf[4];
            for (int i = 0; i < 4; ++i) {
              scf[i] = q8_two_halves(T) ? static_cast<float>(static_cast<int8_t>(k.sc[4 * quad + i])) : static_cast<float>(k.sc[4 * quad + i]);
              mnf[i] = q8_two_halves(T) ? static_cast<float>(static_cast<int8_t>(k.mn[4 * quad + i])) : static_cast<float>(k.mn[4 * quad + i]);
            }
            d = vmulq_f32(dd, vld1q_f32(scf));
            if constexpr (q8_two_halves(T)) {
              mn = vmulq_f32(dd, vld1q_f32(mnf));
            } else {
              const float32x4_t dm = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(k.dmin) + 4 * quad)));
              mn = vnegq_f32(vmulq_f32(dm, vld1q_f32(mnf)));
            }
          } else {
            const uint8_t* sb = scales + b * static_cast<int64_t>(panel_scale_bytes(T));
            d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(sb) + 4 * quad)));
            if constexpr (q8_has_min(T))
              mn = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(sb + 32) + 4 * quad)));
          }
          if constexpr (q8_two_halves(T)) {  // d, mn: the halves' d·sc
            acc = vfmaq_f32(acc, vcvtq_f32_s32(s), vmulq_n_f32(d, xb[b].d));
            acc = vfmaq_f32(acc, vcvtq_f32_s32(s2), vmulq_n_f32(mn, xb[b].d));
            if constexpr (T == DType::Q2_K) {  // the halves' mins times their Σx
              acc = vfmaq_f32(acc, vdupq_n_f32(static_cast<float>(xb[b].sum_lo)), vmulq_n_f32(mins[0], xb[b].d));
              acc = vfmaq_f32(acc, vdupq_n_f32(static_cast<float>(xb[b].sum - xb[b].sum_lo)), vmulq_n_f32(mins[1], xb[b].d));
            }
            continue;
          }
          s = vaddq_s32(s, s2);
          acc = vfmaq_f32(acc, vcvtq_f32_s32(s), vmulq_n_f32(d, xb[b].d));
          if constexpr (q8_has_min(T)) acc = vfmaq_n_f32(acc, mn, xb[b].s);
        }
        float out[4];
        vst1q_f32(out, acc);
        for (int i = 0; i < 4; ++i)
          if (row + i >= r0 && row + i < r1) y[t * ys + row + i] = out[i];
      }
    }
  }
}

}  // namespace

void matmul_q8_rows_dotprod(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                            int64_t xq_stride, float* y, int64_t ys) {
  switch (w.type) {
    case DType::Q4_0: return q8_panels_dotprod<DType::Q4_0>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::Q4_1:
    case DType::A4G64: return q8_panels_dotprod<DType::Q4_1>(w, r0, r1, xq, m, xq_stride, y, ys);  // same panels
    case DType::Q8_0: return q8_panels_dotprod<DType::Q8_0>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::Q4_K: return q8_panels_dotprod<DType::Q4_K>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::Q5_0: return q8_panels_dotprod<DType::Q5_0>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::Q5_1: return q8_panels_dotprod<DType::Q5_1>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::Q5_K: return q8_panels_dotprod<DType::Q5_K>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::Q6_K: return q8_panels_dotprod<DType::Q6_K>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::IQ4_NL: return q8_panels_dotprod<DType::IQ4_NL>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::IQ4_XS: return q8_panels_dotprod<DType::IQ4_XS>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::Q3_K: return q8_panels_dotprod<DType::Q3_K>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::Q2_K: return q8_panels_dotprod<DType::Q2_K>(w, r0, r1, xq, m, xq_stride, y, ys);
    default: return ref::matmul_q8_rows(w, r0, r1, xq, m, xq_stride, y, ys);
  }
}

}  // namespace tessera::neon
