// V16 on ARM (see simd/vec16.h): four float32x4 registers, lanes 4i..4i+3 in v[i].
#pragma once
#include <arm_neon.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#define TESSERA_SIMD_LEVEL neon

namespace tessera::simd {
inline namespace TESSERA_SIMD_LEVEL {

struct V16 {
  float32x4_t v[4];
};
constexpr int kRegs = 16;  // 32 q registers: 8 V16

inline V16 zero16() { return {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}}; }
inline V16 set16(float a) { return {{vdupq_n_f32(a), vdupq_n_f32(a), vdupq_n_f32(a), vdupq_n_f32(a)}}; }
inline V16 load16(const float* p) { return {{vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}}; }
inline V16 load16_n(const float* p, int n) {
  if (n >= 16) return load16(p);
  float t[16] = {0};
  for (int i = 0; i < n; ++i) t[i] = p[i];
  return load16(t);
}
inline void store16(float* p, V16 a) {
  for (int i = 0; i < 4; ++i) vst1q_f32(p + 4 * i, a.v[i]);
}
inline void store16_n(float* p, V16 a, int n) {
  if (n >= 16) return store16(p, a);
  float t[16];
  store16(t, a);
  for (int i = 0; i < n; ++i) p[i] = t[i];
}
#define TESSERA_NEON_MAP2(name, op)                                      \
  inline V16 name(V16 a, V16 b) {                                        \
    return {{op(a.v[0], b.v[0]), op(a.v[1], b.v[1]), op(a.v[2], b.v[2]), op(a.v[3], b.v[3])}}; \
  }
TESSERA_NEON_MAP2(mul16, vmulq_f32)
TESSERA_NEON_MAP2(add16, vaddq_f32)
TESSERA_NEON_MAP2(sub16, vsubq_f32)
TESSERA_NEON_MAP2(div16, vdivq_f32)
TESSERA_NEON_MAP2(max16, vmaxq_f32)
TESSERA_NEON_MAP2(min16, vminq_f32)
#undef TESSERA_NEON_MAP2
inline V16 fma16(V16 a, V16 b, V16 c) {  // a * b + c, fused
  return {{vfmaq_f32(c.v[0], a.v[0], b.v[0]), vfmaq_f32(c.v[1], a.v[1], b.v[1]), vfmaq_f32(c.v[2], a.v[2], b.v[2]),
           vfmaq_f32(c.v[3], a.v[3], b.v[3])}};
}
inline uint32x4_t lane_mask(int n, int quarter) {
  const int32x4_t idx = {4 * quarter, 4 * quarter + 1, 4 * quarter + 2, 4 * quarter + 3};
  return vcltq_s32(idx, vdupq_n_s32(n));
}
// Lanes < n from a, the rest from b.
inline V16 blend16(V16 a, V16 b, int n) {
  V16 r;
  for (int i = 0; i < 4; ++i) r.v[i] = vbslq_f32(lane_mask(n, i), a.v[i], b.v[i]);
  return r;
}
// Lane-wise a < b ? x : y.
inline V16 select_lt16(V16 a, V16 b, V16 x, V16 y) {
  V16 r;
  for (int i = 0; i < 4; ++i) r.v[i] = vbslq_f32(vcltq_f32(a.v[i], b.v[i]), x.v[i], y.v[i]);
  return r;
}
inline V16 round16(V16 a) { return {{vrndnq_f32(a.v[0]), vrndnq_f32(a.v[1]), vrndnq_f32(a.v[2]), vrndnq_f32(a.v[3])}}; }
// a * 2^n for integral n in [-126, 0]
inline V16 scale_pow2(V16 a, V16 n) {
  V16 r;
  for (int i = 0; i < 4; ++i) {
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n.v[i]), vdupq_n_s32(127)), 23);
    r.v[i] = vmulq_f32(a.v[i], vreinterpretq_f32_s32(e));
  }
  return r;
}
inline V16 f16x16(const uint16_t* p) {
  V16 r;
  for (int i = 0; i < 4; ++i) r.v[i] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p + 4 * i)));
  return r;
}
// FPCR's rounding, nearest even unless a program changes it (tessera does not)
inline void store_f16x16(uint16_t* p, V16 a) {
  for (int i = 0; i < 4; ++i) vst1_u16(p + 4 * i, vreinterpret_u16_f16(vcvt_f16_f32(a.v[i])));
}
inline V16 bf16x16(const uint16_t* p) {
  V16 r;
  for (int i = 0; i < 4; ++i) r.v[i] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p + 4 * i), 16));
  return r;
}
inline V16 i8x16(const int8_t* p) {
  const int8x16_t q = vld1q_s8(p);
  const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
  return {{vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))),
           vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi)))}};
}
// 16 bytes at p: each lane rounded half away from zero (FCVTAS: lround's rule), 0 where it is not
// finite; finite lanes must lie within [-127.5, 127.5) (Q8_0's quants).
inline void store_i8x16_round_away(int8_t* p, V16 t) {
  int32x4_t q[4];
  for (int i = 0; i < 4; ++i) {
    const uint32x4_t finite = vceqq_f32(vsubq_f32(t.v[i], t.v[i]), vdupq_n_f32(0.0f));
    q[i] = vandq_s32(vcvtaq_s32_f32(t.v[i]), vreinterpretq_s32_u32(finite));
  }
  const int16x8_t lo = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1])), hi = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
  vst1q_s8(p, vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)));
}
// The largest lane (max is exact: any order gives the same value; a ±0 tie may keep either zero).
inline float reduce_max16(V16 a) { return vmaxvq_f32(vmaxq_f32(vmaxq_f32(a.v[0], a.v[1]), vmaxq_f32(a.v[2], a.v[3]))); }
// reduce16's tree: (a[i] + a[i+8]) -> (+ [i+4]) -> (+ [i+2]) -> (+ [i+1])
inline float reduce16(V16 a) {
  const float32x4_t s4 = vaddq_f32(vaddq_f32(a.v[0], a.v[2]), vaddq_f32(a.v[1], a.v[3]));
  const float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
  return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}
inline V16 reduce16x16(const V16 v[16]) {
  float r[16];
  for (int i = 0; i < 16; ++i) r[i] = reduce16(v[i]);
  return load16(r);
}

inline float half_at(const uint8_t* p) {
  float16_t h;
  std::memcpy(&h, p, 2);
  return static_cast<float>(h);
}
inline V16 nibbles16(const uint8_t* p, bool hi) {
  uint8x16_t q = vld1q_u8(p);
  q = hi ? vshrq_n_u8(q, 4) : vandq_u8(q, vdupq_n_u8(0x0f));
  const uint16x8_t lo = vmovl_u8(vget_low_u8(q)), up = vmovl_u8(vget_high_u8(q));
  return {{vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo))), vcvtq_f32_u32(vmovl_u16(vget_high_u16(lo))),
           vcvtq_f32_u32(vmovl_u16(vget_low_u16(up))), vcvtq_f32_u32(vmovl_u16(vget_high_u16(up)))}};
}

}  // namespace TESSERA_SIMD_LEVEL
}  // namespace tessera::simd
