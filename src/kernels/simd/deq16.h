// Weight dequantizers over V16 (one source for AVX-512, AVX2 and NEON), with exactly the
// rounding of ref/'s weight_at().
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/vec16.h"

namespace tessera::simd {
inline namespace TESSERA_SIMD_LEVEL {

// Types dequantized 32 elements at a time (block formats); the rest are float types.
constexpr bool is_block32(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q4_K || t == DType::A4G64 ||
         t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q5_K || t == DType::Q6_K;
}

// Bytes per block of the types whose block starts with its fp16 scale (and min).
constexpr int64_t scale_block_bytes(DType t) {
  return t == DType::Q8_0 ? 34 : t == DType::Q4_0 ? 18 : t == DType::Q5_0 ? kQ5_0Bytes : t == DType::Q5_1 ? kQ5_1Bytes : 20;
}
// Block types with a second fp16 constant (the min or bias) after the scale.
constexpr bool has_block_min(DType t) { return t == DType::Q4_1 || t == DType::A4G64 || t == DType::Q5_1; }

// The 16 weights of chunk c (elements 16c .. 16c+15) of a float-typed row (full chunks only).
template <DType t>
inline V16 deq16(const uint8_t* row, int64_t c) {
  if constexpr (t == DType::F32) return load16(reinterpret_cast<const float*>(row) + 16 * c);
  else if constexpr (t == DType::F16) return f16x16(reinterpret_cast<const uint16_t*>(row) + 16 * c);
  else return bf16x16(reinterpret_cast<const uint16_t*>(row) + 16 * c);
}

#if defined(__AVX512BW__)
// A Q5_0 / Q5_1 block's 32 possible weights in two tables for a 2-source permute indexed by the
// 5-bit quant: each entry exactly the value deq32_q5's portable branch (mul16/fma16) gives.
template <DType t>
inline void q5_tables(float dc, float mc, __m512& lo, __m512& hi) {
  const __m512 d = _mm512_set1_ps(dc), iota = iota16().v, sixteen = _mm512_set1_ps(16.0f);
  if constexpr (t == DType::Q5_0) {
    lo = _mm512_mul_ps(d, _mm512_sub_ps(iota, sixteen));  // q - 16 for q < 16
    hi = _mm512_mul_ps(d, iota);                           // ... and for q >= 16
  } else {
    const __m512 m = _mm512_set1_ps(mc);
    lo = _mm512_fmadd_ps(d, iota, m);
    hi = _mm512_fmadd_ps(d, _mm512_add_ps(iota, sixteen), m);
  }
}

// deq32_q5 on a decode panel's block (decode_panels.h: byte e is q[e] plus the low 3 bits of
// q[16 + e], the word after the 16 bytes the top 2 bits of q[16 + e] at bits 2e, 2e + 1). The
// first 16 indices are the bytes themselves (the permute ignores bits above 4); the next 16 are
// the bytes' top 3 bits merged with the word rotated per lane so bits 2e, 2e + 1 land on 3, 4:
// four vector operations for the indices where the GGUF order takes six.
template <DType t>
inline void deq32_q5_panel(const uint8_t* p, float dc, float mc, V16& w0, V16& w1) {
  __m512 lo, hi;
  q5_tables<t>(dc, mc, lo, hi);
  int32_t top;
  std::memcpy(&top, p + 16, 4);
  const __m512i rot = _mm512_setr_epi32(3, 1, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5);  // 3 - 2e mod 32
  const __m512i i0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i i1 = _mm512_ternarylogic_epi32(_mm512_set1_epi32(7), _mm512_srli_epi32(i0, 5),
                                               _mm512_rolv_epi32(_mm512_set1_epi32(top), rot), 0xCA);
  w0 = {_mm512_permutex2var_ps(lo, i0, hi)};
  w1 = {_mm512_permutex2var_ps(lo, i1, hi)};
}
#endif

// Q5_0 / Q5_1 block arithmetic given its constants d (and m) and its qh word and nibbles at qh.
template <DType t>
inline void deq32_q5(const uint8_t* qh, float dc, float mc, V16& w0, V16& w1) {
#if defined(__AVX512BW__)
  // the block's 32 possible weights (q5_tables), looked up by the 5-bit quant (nibble | fifth bit << 4)
  __m512 lo, hi;
  q5_tables<t>(dc, mc, lo, hi);
  // The index of lane e: its nibble in bits 0..3 and its fifth bit in bit 4, which the permute
  // reads as the table select (it ignores higher bits). The qh word, broadcast, is rotated per
  // lane so that bit e (bit 16 + e for the second half) lands on bit 4, and one bit-select
  // (vpternlogd 0xCA: a ? b : c) merges it with the nibble: no mask registers, which cost more.
  int32_t h;
  std::memcpy(&h, qh, 4);
  const __m512i hb = _mm512_set1_epi32(h), low4 = _mm512_set1_epi32(0xf);
  const __m512i rot0 = _mm512_setr_epi32(4, 3, 2, 1, 0, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21);
  const __m512i rot1 = _mm512_setr_epi32(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5);
  const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + 4)));
  const __m512i i0 = _mm512_ternarylogic_epi32(low4, q, _mm512_rolv_epi32(hb, rot0), 0xCA);
  const __m512i i1 = _mm512_ternarylogic_epi32(low4, _mm512_srli_epi32(q, 4), _mm512_rolv_epi32(hb, rot1), 0xCA);
  w0 = {_mm512_permutex2var_ps(lo, i0, hi)};
  w1 = {_mm512_permutex2var_ps(lo, i1, hi)};
#else
  constexpr bool q50 = t == DType::Q5_0;
  int8_t q[32];
  q5_quants(qh, q50 ? 16 : 0, q);
  const V16 d = set16(dc);
  if constexpr (q50) {
    w0 = mul16(d, i8x16(q));
    w1 = mul16(d, i8x16(q + 16));
  } else {
    w0 = fma16(d, i8x16(q), set16(mc));
    w1 = fma16(d, i8x16(q + 16), set16(mc));
  }
#endif
}

// Q5_K sub-block j of the super-block at p, given its scale d·sc and min −dmin·m.
inline void deq32_q5k(const uint8_t* p, int j, float dc, float mc, V16& w0, V16& w1) {
#if defined(__AVX512BW__)
  // as Q5_0: a 32-entry table of fma(d·sc, q, −dmin·m), the fifth bits tested in qh's bytes
  const __m512 d = _mm512_set1_ps(dc), m = _mm512_set1_ps(mc), iota = iota16().v;
  const __m512 lo = _mm512_fmadd_ps(d, iota, m), hi = _mm512_fmadd_ps(d, _mm512_add_ps(iota, _mm512_set1_ps(16.0f)), m);
  const __m128i bit = _mm_set1_epi8(static_cast<char>(1 << j)), b16 = _mm_set1_epi8(16);
  const uint8_t* qs = p + 48 + 32 * (j / 2);
  for (int h = 0; h < 2; ++h) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * h));
    __m128i nib = j % 2 ? _mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0xf)) : _mm_and_si128(raw, _mm_set1_epi8(0xf));
    const __mmask16 k = _mm_test_epi8_mask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 + 16 * h)), bit);
    nib = _mm_or_si128(nib, _mm_maskz_mov_epi8(k, b16));
    (h ? w1 : w0) = V16{_mm512_permutex2var_ps(lo, _mm512_cvtepu8_epi32(nib), hi)};
  }
#else
  int8_t q[32];
  q5k_quants(p, j, q);
  w0 = fma16(set16(dc), i8x16(q), set16(mc));
  w1 = fma16(set16(dc), i8x16(q + 16), set16(mc));
#endif
}

// Q6_K block j's two half scales d·sc[2j], d·sc[2j + 1] (q6k_scale's products, the fp16 d read by F16C).
inline void q6k_half_scales(const uint8_t* p, int j, float& s0, float& s1) {
  const float d = half_at(p + 208);
  s0 = d * static_cast<float>(static_cast<int8_t>(p[192 + 2 * j]));
  s1 = d * static_cast<float>(static_cast<int8_t>(p[193 + 2 * j]));
}

// Q6_K 32-element block j (0..7) of the super-block at p, given its halves' scales d·sc.
inline void deq32_q6k(const uint8_t* p, int j, float sc0, float sc1, V16& w0, V16& w1) {
  const V16 s0 = set16(sc0), s1 = set16(sc1);
#if defined(__AVX2__)
  // q6k_quants on 32 bytes at once: low 4 bits from ql, high 2 from qh, minus 32
  const int n = j / 4, u = j % 4;
  const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * n + 32 * (u % 2)));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * n));
  const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(ql, _mm_cvtsi32_si128(4 * (u / 2))), _mm256_set1_epi8(0x0f));
  const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * u)), _mm256_set1_epi8(3)), 4);
  const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
  w0 = mul16(s0, i8x16(_mm256_castsi256_si128(q)));
  w1 = mul16(s1, i8x16(_mm256_extracti128_si256(q, 1)));
#else
  int8_t q[32];
  q6k_quants(p, j, q);
  w0 = mul16(s0, i8x16(q));
  w1 = mul16(s1, i8x16(q + 16));
#endif
}

// Both 16-weight chunks of 32-element block b: the scale (and min) are converted and broadcast
// once and the packed bytes widened once.
template <DType t>
inline void deq32(const uint8_t* row, int64_t b, V16& w0, V16& w1) {
  if constexpr (t == DType::Q8_0) {
    const uint8_t* p = row + b * 34;
    const V16 d = set16(half_at(p));
    w0 = mul16(d, i8x16(reinterpret_cast<const int8_t*>(p + 2)));
    w1 = mul16(d, i8x16(reinterpret_cast<const int8_t*>(p + 18)));
  } else if constexpr (t == DType::Q4_0) {
    const uint8_t* p = row + b * 18;
    const V16 d = set16(half_at(p)), eight = set16(8.0f);
    w0 = mul16(d, sub16(nibbles16(p + 2, false), eight));  // q - 8 is exact in fp32
    w1 = mul16(d, sub16(nibbles16(p + 2, true), eight));
  } else if constexpr (t == DType::Q4_1) {
    const uint8_t* p = row + b * 20;
    const V16 d = set16(half_at(p)), m = set16(half_at(p + 2));
    w0 = fma16(d, nibbles16(p + 4, false), m);
    w1 = fma16(d, nibbles16(p + 4, true), m);
  } else if constexpr (t == DType::A4G64) {
    const uint8_t* p = row + (b / 2) * kA4G64Bytes;
    const V16 s = set16(half_at(p)), z = set16(half_at(p + 2));
    const uint8_t* q = p + 4 + 16 * (b % 2);
    w0 = fma16(s, nibbles16(q, false), z);
    w1 = fma16(s, nibbles16(q, true), z);
  } else if constexpr (t == DType::Q5_0 || t == DType::Q5_1) {
    const uint8_t* p = row + b * scale_block_bytes(t);
    deq32_q5<t>(p + (t == DType::Q5_0 ? 2 : 4), half_at(p), t == DType::Q5_1 ? half_at(p + 2) : 0.0f, w0, w1);
  } else if constexpr (t == DType::Q5_K) {  // sub-block j of super-block b / 8
    const uint8_t* p = row + (b / 8) * kQ5KBytes;
    float dc, mc;
    q4k_sub_scale_min(p, static_cast<int>(b % 8), dc, mc);
    deq32_q5k(p, static_cast<int>(b % 8), dc, mc, w0, w1);
  } else if constexpr (t == DType::Q6_K) {  // 32-element block b % 8 of super-block b / 8: two scales
    const uint8_t* p = row + (b / 8) * kQ6KBytes;
    const int j = static_cast<int>(b % 8);
    float s0, s1;
    q6k_half_scales(p, j, s0, s1);
    deq32_q6k(p, j, s0, s1, w0, w1);
  } else {  // Q4_K sub-block j of super-block b / 8
    const uint8_t* p = row + (b / 8) * kQ4KBytes;
    const int j = static_cast<int>(b % 8);
    int sc, mn;
    q4k_scale_min(p + 4, j, sc, mn);
    const V16 d1 = set16(half_at(p) * static_cast<float>(sc));
    const V16 m1 = set16(-(half_at(p + 2) * static_cast<float>(mn)));
    const uint8_t* q = p + 16 + 32 * (j / 2);
    w0 = fma16(d1, nibbles16(q, j % 2), m1);
    w1 = fma16(d1, nibbles16(q + 16, j % 2), m1);
  }
}

#if defined(__AVX512BW__)
// Where the fp16 scale words of 16 consecutive blocks sit, counted in 16-bit words from the
// first block's first byte: lane j < 16 is block j's d, lane 16 + j its m (Q4_1, A4G64). The
// words span kVecs 64-byte vectors; window w (vectors 2w, 2w + 1) supplies the lanes set in
// lanes[w], picked by a vpermt2w with idx[w].
template <DType t>
struct ScaleWords {
  static constexpr int word(int lane) {
    const int j = lane % 16, off = lane >= 16 ? 1 : 0;
    if (t == DType::A4G64) return kA4G64Bytes / 2 * (j / 2) + off;
    return static_cast<int>(scale_block_bytes(t) / 2) * j + off;
  }
  static constexpr int kLast = word(has_block_min(t) ? 31 : 15);
  static constexpr int kVecs = kLast / 32 + 1, kWindows = kLast / 64 + 1;
  struct Tables {
    alignas(64) uint16_t idx[kWindows][32];
    __mmask32 lanes[kWindows];
  };
  static constexpr Tables make() {
    Tables tb{};
    for (int lane = 0; lane < 32; ++lane) {
      if (lane >= 16 && !has_block_min(t)) break;
      const int w = word(lane) / 64;
      tb.idx[w][lane] = static_cast<uint16_t>(word(lane) % 64);
      tb.lanes[w] |= __mmask32{1} << lane;
    }
    return tb;
  }
  static constexpr Tables kTables = make();
};
#endif

// Q4_K: the scales d·sc and mins −dmin·m of the 8 sub-blocks of the super-block whose 16-byte
// header (fp16 d, fp16 dmin, 12 bytes of 6-bit fields) is at h0, and with h1 those of a second
// super-block's into d[8..15], m[8..15]. On AVX-512 two headers are converted and multiplied as
// vectors (the same products; the sign flip is exact): scalar, the conversions cost about as much
// as the decode's dot products.
inline void q4k_consts(const uint8_t* h0, const uint8_t* h1, float* d, float* m) {
#if defined(__AVX512F__)
  if (h1) {
    uint64_t sc0, mn0, sc1, mn1;
    q4k_scales_mins8(h0 + 4, sc0, mn0);
    q4k_scales_mins8(h1 + 4, sc1, mn1);
    const __m512 dd = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(half_at(h0)), _mm512_set1_ps(half_at(h1)));
    const __m512 dm = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(half_at(h0 + 2)), _mm512_set1_ps(half_at(h1 + 2)));
    const __m512 scf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi64x(static_cast<int64_t>(sc1), static_cast<int64_t>(sc0))));
    const __m512 mnf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_set_epi64x(static_cast<int64_t>(mn1), static_cast<int64_t>(mn0))));
    _mm512_storeu_ps(d, _mm512_mul_ps(dd, scf));
    _mm512_storeu_ps(m, _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(dm, mnf)),
                                                             _mm512_set1_epi32(static_cast<int>(0x80000000u)))));
    return;
  }
#endif
  for (int k = 0; k < (h1 ? 2 : 1); ++k) {
    const uint8_t* h = k ? h1 : h0;
    uint64_t sc, mn;  // byte j: sub-block j
    q4k_scales_mins8(h + 4, sc, mn);
    const float dd = half_at(h), dm = half_at(h + 2);
    for (int j = 0; j < 8; ++j) {
      d[8 * k + j] = dd * static_cast<float>((sc >> (8 * j)) & 0xff);
      m[8 * k + j] = -(dm * static_cast<float>((mn >> (8 * j)) & 0xff));
    }
  }
}

// The constants deq32 broadcasts for blocks [b0, b0 + n) (n <= 16): scale d[] and offset m[]
// (Q8_0/Q4_0/Q5_0: m unused; Q6_K: d[] and m[] are the scales of the block's two 16-element halves). Computed ahead of the dot-product loop, so the decode kernel reads
// them with broadcast loads; on AVX-512 the fp16 words of 16 blocks come in by word permutes.
template <DType t>
inline void block_consts(const uint8_t* row, int64_t b0, int n, float* d, float* m) {
  constexpr int64_t bs = scale_block_bytes(t);
  if constexpr (t == DType::Q4_K || t == DType::Q5_K) {  // the same 16-byte super-block header
    constexpr int64_t sbb = t == DType::Q4_K ? kQ4KBytes : kQ5KBytes;
    for (int j0 = 0; j0 < n; j0 += 16) {  // b0 is a multiple of 16: whole super-blocks
      const uint8_t* p = row + ((b0 + j0) / 8) * sbb;
      q4k_consts(p, n - j0 >= 16 ? p + sbb : nullptr, d + j0, m + j0);
    }
  } else if constexpr (t == DType::Q6_K) {  // d[j], m[j]: the scales d·sc of block j's two halves
#if defined(__AVX512F__)
    // a super-block's 16 int8 scales widened and multiplied as one vector (the same products),
    // even lanes to d, odd lanes to m
    if (n == 16) {
      const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
      __m512 v[2];
      for (int k = 0; k < 2; ++k) {
        const uint8_t* p = row + (b0 / 8 + k) * kQ6KBytes;
        const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192))));
        v[k] = _mm512_mul_ps(_mm512_set1_ps(half_at(p + 208)), sc);
      }
      _mm512_storeu_ps(d, _mm512_permutex2var_ps(v[0], even, v[1]));
      _mm512_storeu_ps(m, _mm512_permutex2var_ps(v[0], odd, v[1]));
      return;
    }
#endif
    for (int j = 0; j < n; ++j) q6k_half_scales(row + ((b0 + j) / 8) * kQ6KBytes, static_cast<int>((b0 + j) % 8), d[j], m[j]);
  } else {
#if defined(__AVX512BW__)
    // The 16 blocks' fp16 scale (and min) words come in with a few whole-vector loads and one
    // 2-source word permute per 128 bytes (ScaleWords), instead of a gather for every 16 blocks
    // of every row (docs/measurements.md, "Design choices").
    using SW = ScaleWords<t>;
    const uint8_t* p = t == DType::A4G64 ? row + (b0 / 2) * kA4G64Bytes : row + b0 * bs;
    const int64_t words = (t == DType::A4G64 ? (n + 1) / 2 * kA4G64Bytes : n * bs) / 2;  // the group's bytes
    __m512i v[SW::kVecs];
    for (int i = 0; i < SW::kVecs; ++i) {
      const int64_t left = words - 32 * i;  // the loads never reach past the group's last block
      const __mmask32 lk = left >= 32 ? ~__mmask32{0} : left <= 0 ? __mmask32{0} : (__mmask32{1} << left) - 1;
      v[i] = _mm512_maskz_loadu_epi16(lk, p + 64 * i);
    }
    __m512i r = _mm512_setzero_si512();
    for (int w = 0; w < SW::kWindows; ++w) {
      const __m512i idx = _mm512_load_si512(SW::kTables.idx[w]);
      const __m512i tw = 2 * w + 1 < SW::kVecs ? _mm512_permutex2var_epi16(v[2 * w], idx, v[2 * w + 1])
                                                : _mm512_permutexvar_epi16(idx, v[2 * w]);
      r = _mm512_mask_mov_epi16(r, SW::kTables.lanes[w], tw);
    }
    const __mmask16 k = static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1);
    _mm512_mask_storeu_ps(d, k, _mm512_cvtph_ps(_mm512_castsi512_si256(r)));
    if constexpr (has_block_min(t))
      _mm512_mask_storeu_ps(m, k, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(r, 1)));
#else
    for (int j = 0; j < n; ++j) {
      const int64_t b = b0 + j;
      const uint8_t* p = t == DType::A4G64 ? row + (b / 2) * kA4G64Bytes : row + b * bs;
      d[j] = half_at(p);
      if constexpr (has_block_min(t)) m[j] = half_at(p + 2);
    }
#endif
  }
}

// deq32c's arithmetic for Q4_0, Q4_1 and Q8_0, given the block's quant bytes q wherever they are
// stored (a GGUF row, or decode panels: kernels/decode_panels.h).
template <DType t>
inline void deq32q(const uint8_t* q, float dc, float mc, V16& w0, V16& w1) {
  static_assert(t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0);
  const V16 d = set16(dc);
  if constexpr (t == DType::Q8_0) {
    w0 = mul16(d, i8x16(reinterpret_cast<const int8_t*>(q)));
    w1 = mul16(d, i8x16(reinterpret_cast<const int8_t*>(q + 16)));
  } else {
#if defined(__AVX512F__)
    // the block's 16 possible weights, fma(d, j, m) (Q4_0: d·(j−8)), computed once and looked up
    // per nibble; each entry is exactly the value fma16/mul16 gives below
    const V16 tab = t == DType::Q4_0 ? mul16(d, sub16(iota16(), set16(8.0f))) : fma16(d, iota16(), set16(mc));
    w0 = lookup_nibbles16(q, false, tab);
    w1 = lookup_nibbles16(q, true, tab);
#else
    if constexpr (t == DType::Q4_0) {
      const V16 eight = set16(8.0f);
      w0 = mul16(d, sub16(nibbles16(q, false), eight));
      w1 = mul16(d, sub16(nibbles16(q, true), eight));
    } else {
      w0 = fma16(d, nibbles16(q, false), set16(mc));
      w1 = fma16(d, nibbles16(q, true), set16(mc));
    }
#endif
  }
}

// deq32 with the block's constants given (from block_consts): the same values, bit for bit.
template <DType t>
inline void deq32c(const uint8_t* row, int64_t b, float dc, float mc, V16& w0, V16& w1) {
  if constexpr (t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0) {
    constexpr int64_t bs = scale_block_bytes(t);  // d (and m) first, then the quants
    return deq32q<t>(row + b * bs + (t == DType::Q4_1 ? 4 : 2), dc, mc, w0, w1);
  }
  if constexpr (t == DType::Q5_0 || t == DType::Q5_1)
    return deq32_q5<t>(row + b * scale_block_bytes(t) + (t == DType::Q5_1 ? 4 : 2), dc, mc, w0, w1);
  if constexpr (t == DType::Q5_K) return deq32_q5k(row + (b / 8) * kQ5KBytes, static_cast<int>(b % 8), dc, mc, w0, w1);
  if constexpr (t == DType::Q6_K) return deq32_q6k(row + (b / 8) * kQ6KBytes, static_cast<int>(b % 8), dc, mc, w0, w1);
  const V16 d = set16(dc);
#if defined(__AVX512F__)
  // Q4_K and A4G64: the block's 16 possible weights, fma(d, j, m), looked up per nibble (as deq32q)
  {
    const V16 tab = fma16(d, iota16(), set16(mc));
    if constexpr (t == DType::Q4_K) {
      const int j = static_cast<int>(b % 8);
      const uint8_t* q = row + (b / 8) * kQ4KBytes + 16 + 32 * (j / 2);
      w0 = lookup_nibbles16(q, j % 2, tab);
      w1 = lookup_nibbles16(q + 16, j % 2, tab);
    } else {  // A4G64
      const uint8_t* q = row + (b / 2) * kA4G64Bytes + 4 + 16 * (b % 2);
      w0 = lookup_nibbles16(q, false, tab);
      w1 = lookup_nibbles16(q, true, tab);
    }
    return;
  }
#endif
  if constexpr (t == DType::A4G64) {
    const uint8_t* q = row + (b / 2) * kA4G64Bytes + 4 + 16 * (b % 2);
    w0 = fma16(d, nibbles16(q, false), set16(mc));
    w1 = fma16(d, nibbles16(q, true), set16(mc));
  } else {  // Q4_K
    const int j = static_cast<int>(b % 8);
    const uint8_t* q = row + (b / 8) * kQ4KBytes + 16 + 32 * (j / 2);
    w0 = fma16(d, nibbles16(q, j % 2), set16(mc));
    w1 = fma16(d, nibbles16(q + 16, j % 2), set16(mc));
  }
}

// Partial last chunk (float types only): lanes >= rem are zero.
inline V16 deq_tail(DType t, const uint8_t* row, int64_t c, int rem) {
  alignas(64) float tmp[16] = {0};
  for (int l = 0; l < rem; ++l) {
    const int64_t k = 16 * c + l;
    if (t == DType::F32) std::memcpy(&tmp[l], row + 4 * k, 4);
    else if (t == DType::F16) tmp[l] = half_at(row + 2 * k);
    else { uint16_t h; std::memcpy(&h, row + 2 * k, 2); uint32_t u = static_cast<uint32_t>(h) << 16; std::memcpy(&tmp[l], &u, 4); }
  }
  return load16(tmp);
}

// Dequantizes a whole row into fp32 (zero-padded to a multiple of 16).
template <DType T>
void deq_row(const uint8_t* row, int64_t K, float* out) {
  if constexpr (is_block32(T)) {
    for (int64_t b = 0; b < K / 32; ++b) {
      V16 w0, w1;
      deq32<T>(row, b, w0, w1);
      store16(out + 32 * b, w0);
      store16(out + 32 * b + 16, w1);
    }
  } else {
    for (int64_t c = 0; c < K / 16; ++c) store16(out + 16 * c, deq16<T>(row, c));
    if (K % 16) store16(out + K / 16 * 16, deq_tail(T, row, K / 16, static_cast<int>(K % 16)));
  }
}

// Calls f(std::integral_constant<DType, T>{}) for the weight types the kernels specialise;
// returns false for any other type (callers fall back to the scalar twin).
template <typename F>
bool with_weight_type(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(std::integral_constant<DType, DType::F32>{}); return true;
    case DType::F16: f(std::integral_constant<DType, DType::F16>{}); return true;
    case DType::BF16: f(std::integral_constant<DType, DType::BF16>{}); return true;
    case DType::Q8_0: f(std::integral_constant<DType, DType::Q8_0>{}); return true;
    case DType::Q4_0: f(std::integral_constant<DType, DType::Q4_0>{}); return true;
    case DType::Q4_1: f(std::integral_constant<DType, DType::Q4_1>{}); return true;
    case DType::Q4_K: f(std::integral_constant<DType, DType::Q4_K>{}); return true;
    case DType::A4G64: f(std::integral_constant<DType, DType::A4G64>{}); return true;
    case DType::Q5_0: f(std::integral_constant<DType, DType::Q5_0>{}); return true;
    case DType::Q5_1: f(std::integral_constant<DType, DType::Q5_1>{}); return true;
    case DType::Q5_K: f(std::integral_constant<DType, DType::Q5_K>{}); return true;
    case DType::Q6_K: f(std::integral_constant<DType, DType::Q6_K>{}); return true;
    default: return false;
  }
}

}  // namespace TESSERA_SIMD_LEVEL
}  // namespace tessera::simd
