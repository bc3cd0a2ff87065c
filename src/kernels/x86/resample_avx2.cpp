// The resampling row combination (kernels/resample.h) on AVX2: 32 bytes at a time in int32 lanes.
#include <immintrin.h>

#include "kernels/resample.h"

namespace tessera::avx2 {

void combine_rows_u8(const uint8_t* const* rows, const int32_t* k, int n, int64_t len, int precision, uint8_t* out) {
  const __m256i bias = _mm256_set1_epi32(1 << (precision - 1)), zero = _mm256_setzero_si256(), max = _mm256_set1_epi32(255);
  const __m128i shift = _mm_cvtsi32_si128(precision);
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    __m256i a[4] = {bias, bias, bias, bias};
    for (int t = 0; t < n; ++t) {
      const __m256i kt = _mm256_set1_epi32(k[t]);
      for (int v = 0; v < 4; ++v) {
        const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows[t] + i + 8 * v)));
        a[v] = _mm256_add_epi32(a[v], _mm256_mullo_epi32(x, kt));
      }
    }
    for (int v = 0; v < 4; ++v) a[v] = _mm256_min_epi32(_mm256_sra_epi32(_mm256_max_epi32(a[v], zero), shift), max);
    // packs interleave 128-bit halves: bytes come out as dwords 0,4,1,5,2,6,3,7 of the 8 groups
    const __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(a[0], a[1]), _mm256_packus_epi32(a[2], a[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  ref::combine_rows_u8_from(rows, k, n, len, precision, out, i);
}

}  // namespace tessera::avx2
