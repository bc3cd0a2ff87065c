// 8-bit-activation matmul (W4A8/W8A8 over repacked panels) at the AVX-512 level: the 256-bit
// maddubs kernel shared with AVX2 (the VNNI level adds matmul_q8_vnni.cpp), and the vectorised
// activation quantizer.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/q8_panels.h"
#include "kernels/x86/x86_common.h"

namespace tessera::avx512 {

#include "kernels/x86/matmul_q8_avx2.inc"

namespace {

// Lane i of the result = op over the 16 lanes of v[i] (op associative and commutative on the
// values at hand: max without NaNs, integer sums): halves of 256, 128, 64 and 32 bits folded
// pairwise, so 16 reductions take 15 folds of whole vectors instead of one chain each.
template <class Op>
inline __m512 reduce16x16(const __m512 v[16], Op op) {
  __m512 w[8], x[4];
  for (int i = 0; i < 8; ++i)  // 128-bit lanes 0-1: v[2i]'s partials, 2-3: v[2i+1]'s
    w[i] = op(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44), _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  for (int j = 0; j < 4; ++j)  // 128-bit lane L: v[4j + L]'s four partials
    x[j] = op(_mm512_shuffle_f32x4(w[2 * j], w[2 * j + 1], 0x88), _mm512_shuffle_f32x4(w[2 * j], w[2 * j + 1], 0xDD));
  const __m512 y0 = op(_mm512_unpacklo_ps(x[0], x[1]), _mm512_unpackhi_ps(x[0], x[1]));
  const __m512 y1 = op(_mm512_unpacklo_ps(x[2], x[3]), _mm512_unpackhi_ps(x[2], x[3]));
  // element e of 128-bit lane L: v[4e + L]
  const __m512 z = op(_mm512_shuffle_ps(y0, y1, 0x44), _mm512_shuffle_ps(y0, y1, 0xEE));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), z);
}

inline __m512 max_ps(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
inline __m512 add_epi32_ps(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

}  // namespace

// ref::quantize_row_q8_1 for 16 blocks at a time: the same max, the same divisions (sixteen
// lanes of them), products rounded half to even by vcvtps2dq (MXCSR's default mode, as
// nearbyint), exact integer sums. The blocks' maxima and sums are reduced side by side
// (reduce16x16): one block at a time, each block's three horizontal reductions and two scalar
// divisions were a dependency chain of ~40 cycles (0.36 ns an element on Zen 4).
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k) {
  const int64_t nb = k / 32;
  // after the packs, 128-bit lane L holds q0[4L..4L+3] in dword 0 and q1[4L..4L+3] in dword 1
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (int64_t b0 = 0; b0 < nb; b0 += 16) {
    const int n = static_cast<int>(std::min<int64_t>(16, nb - b0));
    const float* xb = x + 32 * b0;
    __m512 am[16];
    for (int i = 0; i < 16; ++i) {
      if (i >= n) {
        am[i] = _mm512_setzero_ps();
        continue;
      }
      const __m512 v0 = _mm512_loadu_ps(xb + 32 * i), v1 = _mm512_loadu_ps(xb + 32 * i + 16);
      // max(|x|, acc) keeps acc where |x| is NaN, as std::fmax does
      am[i] = _mm512_max_ps(_mm512_abs_ps(v1), _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps()));
    }
    const __m512 amax = reduce16x16(am, max_ps);
    const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
    const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_UQ), _mm512_set1_ps(127.0f), amax);
    alignas(64) float ids[16];
    _mm512_store_ps(ids, id);
    __m512 lo[16], all[16];  // the int32 quants of each block's first half and of both, for the sums
    for (int i = 0; i < 16; ++i) {
      if (i >= n) {
        lo[i] = all[i] = _mm512_setzero_ps();
        continue;
      }
      const __m512 idv = _mm512_set1_ps(ids[i]);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 32 * i), idv));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 32 * i + 16), idv));
      // |q| <= 127: two saturating packs (single-uop shuffles, where vpmovdb is two uops on
      // Intel), then the permute undoes their 128-bit lane interleave
      const __m512i bytes = _mm512_packs_epi16(_mm512_packs_epi32(q0, q1), _mm512_setzero_si512());
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b0 + i].q),
                          _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, bytes)));
      lo[i] = _mm512_castsi512_ps(q0);
      all[i] = _mm512_castsi512_ps(_mm512_add_epi32(q0, q1));
    }
    const __m512i sum_lo = _mm512_castps_si512(reduce16x16(lo, add_epi32_ps));
    const __m512i sum = _mm512_castps_si512(reduce16x16(all, add_epi32_ps));
    const __m512 dh = _mm512_cvtph_ps(_mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512 sh = _mm512_cvtph_ps(
        _mm512_cvtps_ph(_mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    alignas(64) float ds[16], ss[16];
    alignas(64) int32_t sums[16], los[16];
    _mm512_store_ps(ds, dh);
    _mm512_store_ps(ss, sh);
    _mm512_store_si512(sums, sum);
    _mm512_store_si512(los, sum_lo);
    set_q8_1_scales(y + b0, n, ds, ss, sums, los);
  }
}

// The AVX-512 level's kernel is the 256-bit one (the VNNI level's table tries vpdpbusd first).
void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                    int64_t xq_stride, float* y, int64_t ys) {
  matmul_q8_rows_256(w, r0, r1, xq, m, xq_stride, y, ys);
}

}  // namespace tessera::avx512
