// Block layouts of the quantized weight types, shared by the scalar twins, the SIMD
// dequantizers and the quantizers (facts from ggml-common.h and MLX's affine quantization).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/fp16.h"

namespace tessera {

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

// A4G64: 64 elements in 36 bytes: fp16 scale, fp16 bias, then two 16-byte halves laid out as
// Q4_1's nibbles (element j < 16 of a half in the low nibble of byte j, j >= 16 in the high
// nibble of byte j - 16); x = scale * q + bias.
constexpr int kA4G64Bytes = 36;

}  // namespace tessera
