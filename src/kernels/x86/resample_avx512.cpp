// The resampling row combination (kernels/resample.h) on AVX-512 (F, BW): 64 bytes at a time in int32 lanes.
#include <immintrin.h>

#include "kernels/resample.h"

namespace tessera::avx512 {

void combine_rows_u8(const uint8_t* const* rows, const int32_t* k, int n, int64_t len, int precision, uint8_t* out) {
  const __m512i bias = _mm512_set1_epi32(1 << (precision - 1)), zero = _mm512_setzero_si512(), max = _mm512_set1_epi32(255);
  const __m128i shift = _mm_cvtsi32_si128(precision);
  int64_t i = 0;
  for (; i + 64 <= len; i += 64) {
    __m512i a[4] = {bias, bias, bias, bias};
    for (int t = 0; t < n; ++t) {
      const __m512i kt = _mm512_set1_epi32(k[t]);
      for (int v = 0; v < 4; ++v) {
        const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[t] + i + 16 * v)));
        a[v] = _mm512_add_epi32(a[v], _mm512_mullo_epi32(x, kt));
      }
    }
    for (int v = 0; v < 4; ++v)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 16 * v),
                       _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_sra_epi32(_mm512_max_epi32(a[v], zero), shift), max)));
  }
  ref::combine_rows_u8_from(rows, k, n, len, precision, out, i);
}

}  // namespace tessera::avx512
