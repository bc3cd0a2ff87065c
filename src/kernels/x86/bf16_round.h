// fp32 → bf16 sixteen lanes at a time with the same integer steps as float_to_bf16 (core/fp16.h):
// round to nearest even by adding 0x7fff + the kept lsb; NaNs quieted. The bf16 bits land in the
// low half of each 32-bit lane; and the lane mask both it and the bf16 attention use. Built only
// into AVX-512 translation units.
#pragma once
#include <immintrin.h>

namespace tessera::avx512 {

// The first n lanes of 16 (none for n <= 0, all for n >= 16).
inline __mmask16 first_lanes(int64_t n) {
  return n <= 0 ? 0 : n >= 16 ? 0xffff : static_cast<__mmask16>((1u << n) - 1);
}

inline __m512i round_bf16_lanes(__m512i v) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(v, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(v, abs_mask), inf);
  return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(v, 16), _mm512_set1_epi32(0x40)));
}

// The first n (0..16) floats at p, rounded; lanes past n are zero.
inline __m512i round_bf16_lanes_n(const float* p, int64_t n) {
  return round_bf16_lanes(_mm512_maskz_loadu_epi32(first_lanes(n), p));
}

}  // namespace tessera::avx512
