// V16 on x86 (see simd/vec16.h): one zmm register under AVX-512, two ymm registers under
// AVX2+FMA.
#pragma once
#include <immintrin.h>
#include <algorithm>

#include <cmath>
#include <cstdint>
#include <cstring>

// Each ISA build gets its own inline namespace: the same names, different definitions, no
// clash between the object files at link time.
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
#define TESSERA_SIMD_LEVEL v512vnni
#elif defined(__AVX512F__)
#define TESSERA_SIMD_LEVEL v512
#else
#define TESSERA_SIMD_LEVEL v256
#endif

namespace tessera::simd {
inline namespace TESSERA_SIMD_LEVEL {

#if defined(__AVX512F__)

struct V16 {
  __m512 v;
};
constexpr int kRegs = 32;  // vector registers, each a V16
inline V16 zero16() { return {_mm512_setzero_ps()}; }
inline V16 set16(float a) { return {_mm512_set1_ps(a)}; }
inline V16 load16(const float* p) { return {_mm512_loadu_ps(p)}; }
inline uint32_t lanes(int n) { return n >= 16 ? 0xffffu : (1u << n) - 1; }
// The first n lanes from p, the rest zero (nothing past p + n is read).
inline V16 load16_n(const float* p, int n) { return {_mm512_maskz_loadu_ps(static_cast<__mmask16>(lanes(n)), p)}; }
inline void store16(float* p, V16 a) { _mm512_storeu_ps(p, a.v); }
inline void store16_n(float* p, V16 a, int n) { _mm512_mask_storeu_ps(p, static_cast<__mmask16>(lanes(n)), a.v); }
inline V16 fma16(V16 a, V16 b, V16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline V16 mul16(V16 a, V16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline V16 add16(V16 a, V16 b) { return {_mm512_add_ps(a.v, b.v)}; }
inline V16 sub16(V16 a, V16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline V16 div16(V16 a, V16 b) { return {_mm512_div_ps(a.v, b.v)}; }
inline V16 max16(V16 a, V16 b) { return {_mm512_max_ps(a.v, b.v)}; }
inline V16 min16(V16 a, V16 b) { return {_mm512_min_ps(a.v, b.v)}; }
// Lanes < n from a, the rest from b.
inline V16 blend16(V16 a, V16 b, int n) { return {_mm512_mask_blend_ps(static_cast<__mmask16>(lanes(n)), b.v, a.v)}; }
// Lane-wise a < b ? x : y.
inline V16 select_lt16(V16 a, V16 b, V16 x, V16 y) {
  return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ), y.v, x.v)};
}
inline V16 round16(V16 a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
// a * 2^n for integral n in [-126, 0]: exact power of two, one correctly rounded multiply.
inline V16 scale_pow2(V16 a, V16 n) {
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n.v), _mm512_set1_epi32(127)), 23);
  return {_mm512_mul_ps(a.v, _mm512_castsi512_ps(e))};
}
inline V16 f16x16(const uint16_t* p) { return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))}; }
inline void store_f16x16(uint16_t* p, V16 a) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline V16 bf16x16(const uint16_t* p) {
  const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(h, 16))};
}
// 16 int8 in a register, as floats.
inline V16 i8x16(__m128i b) { return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b))}; }
inline V16 i8x16(const int8_t* p) { return i8x16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
// 16 bytes at p: each lane rounded half away from zero (lround's rule), 0 where it is not finite;
// finite lanes must lie within [-127.5, 127.5) (Q8_0's quants).
inline void store_i8x16_round_away(int8_t* p, V16 t) {
  const __m512 r = _mm512_roundscale_ps(t.v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), f = _mm512_sub_ps(t.v, r);  // f exact
  const __mmask16 up = _mm512_cmp_ps_mask(f, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __mmask16 down = _mm512_cmp_ps_mask(f, _mm512_set1_ps(-0.5f), _CMP_LE_OQ);
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_sub_ps(t.v, t.v), _mm512_setzero_ps(), _CMP_EQ_OQ);
  __m512 q = _mm512_mask_add_ps(r, up, r, _mm512_set1_ps(1.0f));
  q = _mm512_mask_sub_ps(q, down, q, _mm512_set1_ps(1.0f));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_maskz_cvttps_epi32(finite, q)));
}
// The largest lane (max is exact, so any order gives the same value; a ±0 tie may keep either zero).
inline float reduce_max16(V16 a) {
  const __m256 m8 = _mm256_max_ps(_mm512_castps512_ps256(a.v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a.v), 1)));
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1)));
}
inline float reduce16(V16 a) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a.v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a.v), 1)));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}
// out lane i = reduce16(v[i]) for 16 vectors at once, with reduce16's addition tree.
inline V16 reduce16x16(const V16 v[16]) {
  __m512 w[8], z[4], u[2];
  for (int n = 0; n < 8; ++n)  // s8: lanes 0..7 + lanes 8..15, two vectors per register
    w[n] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * n].v, v[2 * n + 1].v, 0x44), _mm512_shuffle_f32x4(v[2 * n].v, v[2 * n + 1].v, 0xEE));
  for (int n = 0; n < 4; ++n)  // s4: s8[0..3] + s8[4..7]
    z[n] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * n], w[2 * n + 1], 0x88), _mm512_shuffle_f32x4(w[2 * n], w[2 * n + 1], 0xDD));
  for (int n = 0; n < 2; ++n)  // s2: s4[0,1] + s4[2,3]
    u[n] = _mm512_add_ps(_mm512_shuffle_ps(z[2 * n], z[2 * n + 1], 0x44), _mm512_shuffle_ps(z[2 * n], z[2 * n + 1], 0xEE));
  // position 4k+e now holds reduce16(v[k + 4e]); put v[i]'s sum in lane i
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x88), _mm512_shuffle_ps(u[0], u[1], 0xDD));
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return {_mm512_permutexvar_ps(idx, r)};
}

// Nibble table lookup: lane i gets tab[nibble] for the low (or high) nibble of byte p[i].
// vpermps reads only an index's low 4 bits, so low nibbles need no mask; with a table of the
// block's 16 dequantized values this replaces an int→float convert and an FMA per vector.
inline V16 lookup_nibbles16(const uint8_t* p, bool hi, V16 tab) {
  const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return {_mm512_permutexvar_ps(hi ? _mm512_srli_epi32(q, 4) : q, tab.v)};
}
// 0, 1, ..., 15: the nibble values a lookup table is built over.
inline V16 iota16() { return {_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)}; }

// out[c][i] = rows[i][c0 + c] for the first n rows (0 for the rest) and c < nc ≤ 16: a 16 × 16
// transpose in registers (4 shuffle stages) where the scalar loop moved one value at a time.
#define TESSERA_V16_TRANSPOSE 1
inline void transpose16(const float* const* rows, int n, int c0, int nc, float (*out)[16]) {
  const __mmask16 cols = static_cast<__mmask16>(lanes(nc));
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = i < n ? _mm512_maskz_loadu_ps(cols, rows[i] + c0) : _mm512_setzero_ps();
  for (int i = 0; i < 8; ++i) {  // per 128-bit block: a0 b0 a1 b1 | a2 b2 a3 b3
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // r[4i + k], block j: column 4j + k of rows 4i .. 4i + 3
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int k = 0; k < 4; ++k) {  // column 4j + k: block j of r[k], r[4 + k], r[8 + k], r[12 + k]
    const __m512 lo01 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x44), hi01 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xEE);
    const __m512 lo23 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x44), hi23 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xEE);
    const __m512 col[4] = {_mm512_shuffle_f32x4(lo01, lo23, 0x88), _mm512_shuffle_f32x4(lo01, lo23, 0xDD),
                           _mm512_shuffle_f32x4(hi01, hi23, 0x88), _mm512_shuffle_f32x4(hi01, hi23, 0xDD)};
    for (int j = 0; j < 4; ++j)
      if (4 * j + k < nc) _mm512_store_ps(out[4 * j + k], col[j]);
  }
}

#else  // AVX2 + FMA: lanes 0..7 in lo, 8..15 in hi

struct V16 {
  __m256 lo, hi;
};
constexpr int kRegs = 16;  // ymm registers: 8 V16
inline V16 zero16() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline V16 set16(float a) { return {_mm256_set1_ps(a), _mm256_set1_ps(a)}; }
inline V16 load16(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline __m256i mask8(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}
inline V16 load16_n(const float* p, int n) {
  if (n >= 16) return load16(p);
  return {_mm256_maskload_ps(p, mask8(n)), n > 8 ? _mm256_maskload_ps(p + 8, mask8(n - 8)) : _mm256_setzero_ps()};
}
inline void store16(float* p, V16 a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
inline void store16_n(float* p, V16 a, int n) {
  if (n >= 16) return store16(p, a);
  _mm256_maskstore_ps(p, mask8(n), a.lo);
  if (n > 8) _mm256_maskstore_ps(p + 8, mask8(n - 8), a.hi);
}
inline V16 fma16(V16 a, V16 b, V16 c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
inline V16 mul16(V16 a, V16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline V16 add16(V16 a, V16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline V16 sub16(V16 a, V16 b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline V16 div16(V16 a, V16 b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
inline V16 max16(V16 a, V16 b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
inline V16 min16(V16 a, V16 b) { return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)}; }
inline V16 blend16(V16 a, V16 b, int n) {
  return {_mm256_blendv_ps(b.lo, a.lo, _mm256_castsi256_ps(mask8(n))), _mm256_blendv_ps(b.hi, a.hi, _mm256_castsi256_ps(mask8(n - 8)))};
}
inline V16 select_lt16(V16 a, V16 b, V16 x, V16 y) {
  return {_mm256_blendv_ps(y.lo, x.lo, _mm256_cmp_ps(a.lo, b.lo, _CMP_LT_OQ)),
          _mm256_blendv_ps(y.hi, x.hi, _mm256_cmp_ps(a.hi, b.hi, _CMP_LT_OQ))};
}
// 8 × 8 transpose in registers: r[i][c] -> r[c][i] (unpack, shuffle, then 128-bit halves).
inline void transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}
// out[c][i] = rows[i][c0 + c] for the first n rows (0 for the rest) and c < nc ≤ 16: four 8 × 8
// transposes in registers (the scalar loop moved one value at a time).
#define TESSERA_V16_TRANSPOSE 1
inline void transpose16(const float* const* rows, int n, int c0, int nc, float (*out)[16]) {
  for (int cb = 0; cb < nc; cb += 8) {
    const int m = std::min(8, nc - cb);
    for (int rb = 0; rb < 16; rb += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i)
        r[i] = rb + i >= n ? _mm256_setzero_ps() : m == 8 ? _mm256_loadu_ps(rows[rb + i] + c0 + cb) : _mm256_maskload_ps(rows[rb + i] + c0 + cb, mask8(m));
      transpose8x8(r);
      for (int c = 0; c < m; ++c) _mm256_storeu_ps(&out[cb + c][rb], r[c]);
    }
  }
}
// rows[i][c0 + c] = in[c][i] for i < n and c < nc ≤ 16: transpose16's inverse.
#define TESSERA_V16_UNTRANSPOSE 1
inline void untranspose16(const float (*in)[16], int nc, float* const* rows, int n, int c0) {
  for (int cb = 0; cb < nc; cb += 8) {
    const int m = std::min(8, nc - cb);
    for (int rb = 0; rb < n; rb += 8) {
      __m256 r[8];
      for (int c = 0; c < 8; ++c) r[c] = c < m ? _mm256_loadu_ps(&in[cb + c][rb]) : _mm256_setzero_ps();
      transpose8x8(r);
      for (int i = 0; i < 8 && rb + i < n; ++i) {
        if (m == 8) _mm256_storeu_ps(rows[rb + i] + c0 + cb, r[i]);
        else _mm256_maskstore_ps(rows[rb + i] + c0 + cb, mask8(m), r[i]);
      }
    }
  }
}
inline V16 round16(V16 a) {
  return {_mm256_round_ps(a.lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
          _mm256_round_ps(a.hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
inline __m256 pow2_8(__m256 n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
inline V16 scale_pow2(V16 a, V16 n) { return {_mm256_mul_ps(a.lo, pow2_8(n.lo)), _mm256_mul_ps(a.hi, pow2_8(n.hi))}; }
inline V16 f16x16(const uint16_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
}
inline void store_f16x16(uint16_t* p, V16 a) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(a.lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 8), _mm256_cvtps_ph(a.hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline __m256 bf16x8(const uint16_t* p) {
  const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}
inline V16 bf16x16(const uint16_t* p) { return {bf16x8(p), bf16x8(p + 8)}; }
inline V16 i8x16(__m128i b) {
  return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)))};
}
inline V16 i8x16(const int8_t* p) { return i8x16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 round_away8(__m256 t) {  // as the AVX-512 store_i8x16_round_away, 0 where not finite
  const __m256 r = _mm256_round_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), f = _mm256_sub_ps(t, r), one = _mm256_set1_ps(1.0f);
  const __m256 up = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one);
  const __m256 down = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(-0.5f), _CMP_LE_OQ), one);
  const __m256 finite = _mm256_cmp_ps(_mm256_sub_ps(t, t), _mm256_setzero_ps(), _CMP_EQ_OQ);
  return _mm256_and_ps(_mm256_sub_ps(_mm256_add_ps(r, up), down), finite);
}
inline void store_i8x16_round_away(int8_t* p, V16 t) {  // finite lanes within [-127.5, 127.5): packs do not saturate
  const __m256i lo = _mm256_cvttps_epi32(round_away8(t.lo)), hi = _mm256_cvttps_epi32(round_away8(t.hi));
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
  const __m128i w2 = _mm_packs_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(w, w2));
}
inline float reduce_max16(V16 a) {  // as the AVX-512 one
  const __m256 m8 = _mm256_max_ps(a.lo, a.hi);
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1)));
}
inline float reduce16(V16 a) {
  const __m256 s8 = _mm256_add_ps(a.lo, a.hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

inline V16 reduce16x16(const V16 v[16]) {
  alignas(32) float r[16];
  for (int i = 0; i < 16; ++i) r[i] = reduce16(v[i]);
  return load16(r);
}

#endif

// A block's fp16 scale or min, as fp32 (F16C).
inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 16 nibbles (low ones, or high ones if hi) of the 16 bytes at p, as floats.
inline V16 nibbles16(const uint8_t* p, bool hi) {
#if defined(__AVX512F__)
  const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return {_mm512_cvtepi32_ps(hi ? _mm512_srli_epi32(q, 4) : _mm512_and_si512(q, _mm512_set1_epi32(0xf)))};
#else
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m256i lo = _mm256_cvtepu8_epi32(b), up = _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8));
  if (hi) {
    lo = _mm256_srli_epi32(lo, 4);
    up = _mm256_srli_epi32(up, 4);
  } else {
    lo = _mm256_and_si256(lo, _mm256_set1_epi32(0xf));
    up = _mm256_and_si256(up, _mm256_set1_epi32(0xf));
  }
  return {_mm256_cvtepi32_ps(lo), _mm256_cvtepi32_ps(up)};
#endif
}

}  // namespace TESSERA_SIMD_LEVEL
}  // namespace tessera::simd
