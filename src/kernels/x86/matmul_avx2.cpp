// AVX2+FMA kernels (machines without AVX-512, and the `--isa avx2` cap): the generic V16
// matmul/GEMM (two ymm registers per 16-lane vector); results bitwise those of the AVX-512
// and scalar kernels.
#include <algorithm>
#include <cstring>
#include <cmath>
#include <vector>

#include "kernels/decode_panels.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernels.h"
#include "kernels/q8_panels.h"
#include "kernels/simd/deq16.h"

namespace tessera::avx2 {

#include "kernels/simd/matmul_simd.inc"

#include "kernels/simd/elementwise_simd.inc"

#include "kernels/x86/matmul_q8_avx2.inc"

// ref::quantize_row_q8_1 eight lanes at a time: the same max (exact in any order; max(|x|, acc)
// keeps acc where |x| is NaN, as std::fmax), the same division, products rounded half to even by
// vcvtps2dq (MXCSR's default, as nearbyint), exact integer sums. The int32 quants (|q| <= 127)
// narrow through two saturating packs; the permute undoes their 128-bit lane interleave.
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const auto hsum = [](__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1)));
  };
  for (int64_t b = 0; b < k / 32; ++b) {
    __m256 v[4], am = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 32 * b + 8 * i);
      am = _mm256_max_ps(_mm256_andnot_ps(sign, v[i]), am);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], idv));
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].q), _mm256_permutevar8x32_epi32(bytes, order));
    const int sum_lo = hsum(_mm256_add_epi32(q[0], q[1])), sum = sum_lo + hsum(_mm256_add_epi32(q[2], q[3]));
    y[b].d = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    y[b].s = _cvtsh_ss(_cvtss_sh(d * static_cast<float>(sum), _MM_FROUND_TO_NEAREST_INT));
    y[b].sum = sum;
    y[b].sum_lo = sum_lo;
  }
}

void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m, int64_t xq_stride,
                    float* y, int64_t ys) {
  matmul_q8_rows_256(w, r0, r1, xq, m, xq_stride, y, ys);
}

}  // namespace tessera::avx2
