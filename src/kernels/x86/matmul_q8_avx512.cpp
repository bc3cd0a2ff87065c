// 8-bit-activation matmul (W4A8/W8A8 over repacked panels) at the AVX-512 level: the 256-bit
// maddubs kernel shared with AVX2 (the VNNI level adds matmul_q8_vnni.cpp), and the vectorised
// activation quantizer.
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/q8_panels.h"
#include "kernels/x86/x86_common.h"

namespace tessera::avx512 {

#include "kernels/x86/matmul_q8_avx2.inc"

// ref::quantize_row_q8_1 sixteen lanes at a time: the same max, the same divisions, products
// rounded half to even by vcvtps2dq (MXCSR's default mode, as nearbyint), exact integer sums.
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
    // max(|x|, acc) keeps acc where |x| is NaN, as std::fmax does
    const __m512 am = _mm512_max_ps(_mm512_abs_ps(v1), _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps()));
    const float amax = _mm512_reduce_max_ps(am);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m512 idv = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, idv)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, idv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].q), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].q + 16), _mm512_cvtepi32_epi8(q1));
    const int sum_lo = _mm512_reduce_add_epi32(q0), sum = sum_lo + _mm512_reduce_add_epi32(q1);
    y[b].d = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    y[b].s = _cvtsh_ss(_cvtss_sh(d * static_cast<float>(sum), _MM_FROUND_TO_NEAREST_INT));
    y[b].sum = sum;
    y[b].sum_lo = sum_lo;
  }
}

// The AVX-512 level's kernel is the 256-bit one (the VNNI level's table tries vpdpbusd first).
void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                    int64_t xq_stride, float* y, int64_t ys) {
  matmul_q8_rows_256(w, r0, r1, xq, m, xq_stride, y, ys);
}

}  // namespace tessera::avx512
