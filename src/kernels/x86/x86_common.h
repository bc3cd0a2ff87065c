// Small helpers shared by the AVX-512 kernel files (compiled with their ISA flags).
#pragma once
#include <immintrin.h>

#include <algorithm>

#include "kernels/kernels.h"
#include "kernels/q8_panels.h"
#include "kernels/simd/deq16.h"
#include "kernels/x86/prefetch_stream.h"

namespace tessera::avx512 {
using simd::half_at;

// Decode kernels read short rows 8 at a time, an access order the hardware prefetchers do not
// run far enough ahead of DRAM on; they prefetch the group kPrefetchRows further on instead.
constexpr int64_t kPrefetchRows = 16;
// ... and, into L2, the same bytes this much further on (rows are stored back to back, so a
// thread's row range is one linear stream).
constexpr int64_t kPrefetchL2Bytes = 16384;

using x86::PrefetchStream;

// The rows to prefetch while the 8-row group at r runs (up to 8 rows, kPrefetchRows ahead,
// within [.., r1)).
struct RowsAhead {
  const uint8_t* data;
  int64_t bytes;
};
inline RowsAhead rows_ahead(const WeightMatrix& w, int64_t r, int64_t r1) {
  const int64_t pr = std::min(r + kPrefetchRows, r1), pn = std::min<int64_t>(8, r1 - pr);
  return {w.data + pr * w.row_stride, pn * static_cast<int64_t>(w.row_stride)};
}

// The first rows of the range [r0, r1), which no earlier group prefetches.
inline void prefetch_first_rows(const WeightMatrix& w, int64_t r0, int64_t r1) {
  PrefetchStream(w.data + r0 * w.row_stride, std::min(kPrefetchRows, r1 - r0) * static_cast<int64_t>(w.row_stride), 1).step();
}

// Scale (and min; Q6_K: second half's scale) vectors of block b of a q8 panel (q8_panels.h) as
// 16 lanes, one per row.
template <DType T>
inline void q8_block_scales(const uint8_t* scales, int64_t b, __m512& d, __m512& m) {
  if constexpr (T == DType::Q2_K) {  // the halves' d·sc (unsigned 4-bit sc), exact
    const KScales k = q8_k_scales(T, scales, b);
    const __m512 dd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.d)));
    d = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k.sc)))));
    m = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k.sc + 16)))));
  } else if constexpr (T == DType::IQ4_XS) {  // d·(ls − 32), exact
    const KScales k = q8_k_scales(T, scales, b);
    const __m512 dd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.d)));
    d = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k.sc)))));
  } else if constexpr (q8_super_scales(T)) {  // the file's scales multiplied out: d·sc, −dmin·m (Q6_K, Q3_K: both halves' d·sc)
    const KScales k = q8_k_scales(T, scales, b);
    const __m512 dd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.d)));
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k.sc)), mn = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k.mn));
    if constexpr (q8_two_halves(T)) {
      d = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)));
      m = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(mn)));
    } else {
      const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.dmin)));
      d = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)));
      m = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(dm, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mn)))),
                                               _mm512_set1_epi32(static_cast<int>(0x80000000u))));
    }
  } else {
    const uint8_t* s = scales + b * static_cast<int64_t>(panel_scale_bytes(T));
    d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s)));
    if constexpr (q8_has_min(T)) m = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s + 32)));
  }
}

// Q2_K block b's half mins −dmin·m (exact products), 16 lanes each.
inline void q2k_block_mins(const uint8_t* scales, int64_t b, __m512& lo, __m512& hi) {
  const KScales k = q8_k_scales(DType::Q2_K, scales, b);
  const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.dmin)));
  const __m512 neg = _mm512_set1_ps(-1.0f);
  lo = _mm512_mul_ps(_mm512_mul_ps(dm, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k.mn))))), neg);
  hi = _mm512_mul_ps(_mm512_mul_ps(dm, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k.mn + 16))))), neg);
}

}  // namespace tessera::avx512
