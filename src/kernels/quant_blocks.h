// Block layouts of the quantized weight types, shared by the scalar twins, the SIMD
// dequantizers and the quantizers (facts from ggml-common.h and MLX's affine quantization).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/fp16.h"

namespace tessera {

// The fp16 value stored (little endian) at p.
inline float fp16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_float(h);
}

// IQ4_NL: 32 elements in 18 bytes: fp16 d, 16 bytes of nibbles in Q4_0's order (element i < 16 the
// low nibble of byte i, i >= 16 the high nibble of byte i - 16); x = d·kIq4nlLevels[nibble]
// (ggml-common.h's kvalues_iq4nl).
constexpr int kIq4nlBytes = 18;
inline constexpr int8_t kIq4nlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// The levels + 128 as unsigned bytes (for kernels that multiply unsigned weights, then subtract
// 128·Σx), and the byte table both kinds of kernel look nibbles up in.
inline constexpr uint8_t kIq4nlLevelsBiased[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
static_assert(kIq4nlLevelsBiased[0] == kIq4nlLevels[0] + 128 && kIq4nlLevelsBiased[15] == kIq4nlLevels[15] + 128);
// IQ4_XS: 256 elements in 136 bytes: fp16 d, 16 bits scales_h, 4 bytes scales_l, then 8 blocks of
// 16 bytes of nibbles (IQ4_NL's order). Block j's scale is d·(ls − 32), ls the 6 bits of the
// low (j even) or high (j odd) nibble of scales_l[j / 2] and bits 2j, 2j + 1 of scales_h;
// x = (d·(ls − 32))·kIq4nlLevels[nibble], the product in f32 exact.
constexpr int kIq4xsBytes = 136;
inline int iq4xs_block_scale(const uint8_t* p, int j) {  // ls − 32, in -32..31
  const int scales_h = p[2] | p[3] << 8;
  return (((p[4 + j / 2] >> (4 * (j % 2))) & 0xf) | (((scales_h >> (2 * j)) & 3) << 4)) - 32;
}

// Q4_K: 256 elements in 144 bytes: fp16 d, fp16 dmin, 12 bytes of packed 6-bit sub-block scales
// and mins, 128 bytes of nibbles. Sub-block j (32 elements) uses byte range qs[32*(j/2), +32),
// low nibbles for even j, high nibbles for odd j; x = (d*sc_j) * q - (dmin*m_j).
constexpr int kQ4KBytes = 144;
inline void q4k_scale_min(const uint8_t* scales, int j, int& sc, int& m) {
  if (j < 4) {
    sc = scales[j] & 63;
    m = scales[j + 4] & 63;
  } else {
    sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}
// Sub-block j's scale d·sc and min −dmin·m as f32 (both products exact), from the super-block at p.
inline void q4k_sub_scale_min(const uint8_t* p, int j, float& d, float& m) {
  int sc, mn;
  q4k_scale_min(p + 4, j, sc, mn);
  uint16_t h;
  std::memcpy(&h, p, 2);
  d = fp16_to_float(h) * static_cast<float>(sc);
  std::memcpy(&h, p + 2, 2);
  m = -(fp16_to_float(h) * static_cast<float>(mn));
}
// All 8 sub-block scales and mins of a super-block at once: the same values as q4k_scale_min,
// unpacked four fields at a time from the 12 bytes read as 32-bit words (little endian); byte j
// of `sc` / `mn` is sub-block j's.
inline void q4k_scales_mins8(const uint8_t* scales, uint64_t& sc, uint64_t& mn) {
  uint32_t u[3];
  std::memcpy(u, scales, 12);
  const uint64_t s_lo = u[0] & 0x3f3f3f3fu, s_hi = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  const uint64_t m_lo = u[1] & 0x3f3f3f3fu, m_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
  sc = s_lo | s_hi << 32;
  mn = m_lo | m_hi << 32;
}
inline void q4k_set_scale_min(uint8_t* scales, int j, int sc, int m) {
  if (j < 4) {
    scales[j] = static_cast<uint8_t>((scales[j] & 0xC0) | sc);
    scales[j + 4] = static_cast<uint8_t>((scales[j + 4] & 0xC0) | m);
  } else {
    scales[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    scales[j - 4] = static_cast<uint8_t>((scales[j - 4] & 0x3F) | ((sc >> 4) << 6));
    scales[j] = static_cast<uint8_t>((scales[j] & 0x3F) | ((m >> 4) << 6));
  }
}

// Q5_0 / Q5_1: 32 elements in 22 / 24 bytes: fp16 d (Q5_1: then fp16 m), 4 bytes qh (a
// little-endian word: bit j is element j's fifth bit), 16 bytes of nibbles as Q4_0's (element
// j < 16 in the low nibble of byte j, j >= 16 in the high nibble of byte j - 16).
// Q5_0: x = d * (q - 16); Q5_1: x = d * q + m.
constexpr int kQ5_0Bytes = 22, kQ5_1Bytes = 24;
// The block's 32 quants as int8, minus `offset` (16 for Q5_0, 0 for Q5_1); qh at p, qs at p + 4.
inline void q5_quants(const uint8_t* p, int offset, int8_t q[32]) {
  uint32_t h;
  std::memcpy(&h, p, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(((p[4 + j] & 0xf) | (((h >> j) & 1) << 4)) - offset);
    q[j + 16] = static_cast<int8_t>(((p[4 + j] >> 4) | (((h >> (j + 16)) & 1) << 4)) - offset);
  }
}

// Q5_K: 256 elements in 176 bytes: fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins (as
// Q4_K's), 32 bytes qh, 128 bytes of nibbles (as Q4_K's). Element l of sub-block j: its nibble
// as Q4_K's, its fifth bit bit j of qh[l]; x = (d*sc_j) * q - (dmin*m_j).
constexpr int kQ5KBytes = 176;
inline void q5k_quants(const uint8_t* p, int j, int8_t q[32]) {
  const uint8_t* qh = p + 16;
  const uint8_t* qs = p + 48 + 32 * (j / 2);
  for (int l = 0; l < 32; ++l)
    q[l] = static_cast<int8_t>(((j % 2 ? qs[l] >> 4 : qs[l] & 0xf)) | (((qh[l] >> j) & 1) << 4));
}

// Q6_K: 256 elements in 210 bytes: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8
// sub-block scales (16 elements each), fp16 d at byte 208. Element 128n + 32u + i (i < 32):
// low bits (ql[64n + 32(u%2) + i] >> 4(u/2)) & 15, high bits (qh[32n + i] >> 2u) & 3, scale
// sc[8n + 2u + i/16]; x = (d * sc) * (q - 32), as ggml's dequantize_row_q6_K.
constexpr int kQ6KBytes = 210;
// The 32 quants (minus 32) of 32-element block b (0..7) of the super-block at p; its two
// 16-element halves use scales sc[2b] and sc[2b + 1].
inline void q6k_quants(const uint8_t* p, int b, int8_t q[32]) {
  const int n = b / 4, u = b % 4;
  const uint8_t* ql = p + 64 * n + 32 * (u % 2);
  const uint8_t* qh = p + 128 + 32 * n;
  for (int i = 0; i < 32; ++i)
    q[i] = static_cast<int8_t>((((ql[i] >> (4 * (u / 2))) & 0xf) | (((qh[i] >> (2 * u)) & 3) << 4)) - 32);
}
inline float q6k_scale(const uint8_t* p, int s) { return fp16_at(p + 208) * static_cast<float>(static_cast<int8_t>(p[192 + s])); }

// Q3_K: 256 elements in 110 bytes: hmask[32], qs[64], 12 bytes of 6-bit scales (offset 32, one
// per 16 elements), fp16 d at byte 108 (ggml's block_q3_K). Element 128n + 32j + 16h + l (n < 2,
// j < 4, h < 2, l < 16): low bits (qs[32n + 16h + l] >> 2j) & 3, high bit hmask[16h + l] bit
// 4n + j (clear: −4); sub-block s's scale: low 4 bits the low nibble of scales[s] (s < 8) or the
// high one of scales[s − 8], high 2 bits (scales[8 + s % 4] >> 2(s / 4)) & 3;
// x = (d·(sc − 32))·q with q in −4..3, as ggml's dequantize_row_q3_K.
constexpr int kQ3KBytes = 110;
inline int q3k_scale(const uint8_t* p, int s) {  // sc − 32 of sub-block s (16 elements)
  const uint8_t* sc = p + 96;
  const int lo = s < 8 ? sc[s] & 0xf : sc[s - 8] >> 4;
  const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (lo | hi << 4) - 32;
}
// The 32 quants (−4..3) of 32-element block b (0..7) of the super-block at p; its two 16-element
// halves use q3k_scale(p, 2b) and q3k_scale(p, 2b + 1).
inline void q3k_quants(const uint8_t* p, int b, int8_t q[32]) {
  const int n = b / 4, j = b % 4;
  for (int i = 0; i < 32; ++i) {
    const int h = i / 16, l = i % 16;
    const int low = (p[32 + 32 * n + 16 * h + l] >> (2 * j)) & 3, high = (p[16 * h + l] >> (4 * n + j)) & 1;
    q[i] = static_cast<int8_t>(low - (high ? 0 : 4));
  }
}

// Q2_K: 256 elements in 84 bytes: 16 scale bytes (low nibble sc, high nibble m, one per 16
// elements), 64 bytes of 2-bit quants, fp16 d, fp16 dmin (ggml's block_q2_K). Element
// 128n + 32j + 16h + l (n < 2, j < 4, h < 2, l < 16): q = (qs[32n + 16h + l] >> 2j) & 3, scale
// byte scales[8n + 2j + h]; x = (d·sc)·q − dmin·m (both products exact in f32, so one rounding),
// as ggml's dequantize_row_q2_K.
constexpr int kQ2KBytes = 84;
// Block b (0..7) of the super-block at p: its 32 quants (0..3) and, per 16-element half, the scale
// d·sc and the min −dmin·m (exact products).
inline void q2k_block(const uint8_t* p, int b, int8_t q[32], float d[2], float m[2]) {
  const int n = b / 4, j = b % 4;
  const float dd = fp16_at(p + 80), dmin = fp16_at(p + 82);
  for (int h = 0; h < 2; ++h) {
    const uint8_t sc = p[8 * n + 2 * j + h];
    d[h] = dd * static_cast<float>(sc & 15);
    m[h] = -(dmin * static_cast<float>(sc >> 4));
    for (int l = 0; l < 16; ++l) q[16 * h + l] = static_cast<int8_t>((p[16 + 32 * n + 16 * h + l] >> (2 * j)) & 3);
  }
}

// Block b (32 elements) of a Q5_0, Q5_1, Q5_K, Q6_K or Q3_K row: its quants (Q5_0 minus 16, Q6_K minus
// 32) and constants: Q5_0 d (m = 0), Q5_1 d and m, Q5_K d·sc and −dmin·m, Q6_K and Q3_K the
// scales d·sc of its first (d) and last (m) 16 elements. The scalar twins' one reading of these formats.
inline void q56_block(DType t, const uint8_t* row, int64_t b, int8_t q[32], float& d, float& m) {
  const int j = static_cast<int>(b % 8);
  if (t == DType::Q5_K) {
    const uint8_t* p = row + (b / 8) * kQ5KBytes;
    q4k_sub_scale_min(p, j, d, m);
    q5k_quants(p, j, q);
  } else if (t == DType::Q6_K) {
    const uint8_t* p = row + (b / 8) * kQ6KBytes;
    d = q6k_scale(p, 2 * j);
    m = q6k_scale(p, 2 * j + 1);
    q6k_quants(p, j, q);
  } else if (t == DType::Q3_K) {  // dl = d·(sc − 32), exact in f32, as ggml's
    const uint8_t* p = row + (b / 8) * kQ3KBytes;
    d = fp16_at(p + 108) * static_cast<float>(q3k_scale(p, 2 * j));
    m = fp16_at(p + 108) * static_cast<float>(q3k_scale(p, 2 * j + 1));
    q3k_quants(p, j, q);
  } else {  // fp16 d (Q5_1: and m), the fifth bits, the nibbles
    const bool affine = t == DType::Q5_1;
    const uint8_t* p = row + b * (affine ? kQ5_1Bytes : kQ5_0Bytes);
    d = fp16_at(p);
    m = affine ? fp16_at(p + 2) : 0.0f;
    q5_quants(p + (affine ? 4 : 2), affine ? 0 : 16, q);
  }
}

// A4G64: 64 elements in 36 bytes: fp16 scale, fp16 bias, then two 16-byte halves laid out as
// Q4_1's nibbles (element j < 16 of a half in the low nibble of byte j, j >= 16 in the high
// nibble of byte j - 16); x = scale * q + bias.
constexpr int kA4G64Bytes = 36;

}  // namespace tessera
