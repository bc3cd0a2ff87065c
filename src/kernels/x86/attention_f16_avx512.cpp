// The fp16 attention's packing and softmax steps (attention_f16.h) sixteen lanes at a time, bit for
// bit their scalar twins: conversions by VCVTPS2PH (round to nearest even, as float_to_fp16), the
// exponential by exp2_lanes (exp2_bf16attn's steps), the sums in the twin's order. The two
// products are the fp16 GEMM's kernel (gemm_f16_fma.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention_f16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/x86/bf16_round.h"
#include "kernels/x86/exp2_lanes.h"

namespace tessera::avx512 {

namespace {

constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// 16 floats at x (n of them valid, zero past) as fp16.
inline __m256i f16x16(const float* x, int64_t n) {
  return _mm512_cvtps_ph(_mm512_maskz_loadu_ps(first_lanes(n), x), kRne);
}

}  // namespace

void pack_kv_f16(const float* k, const float* v, int64_t kv_stride, int g, int64_t hd, int64_t n_kv, int64_t j0,
                 int64_t j1, uint16_t* kt, uint16_t* vt) {
  const int64_t nkb_k = bf16_padded_k(hd) / kBf16K, nkb_v = bf16_padded_k(n_kv) / kBf16K;
  // a key's 32 dims of one tile block are 16 pairs, one per line of its tile: a scatter
  const __m512i lines = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(16));
  for (int64_t j = j0; j < j1; ++j) {
    const float* row = k + j * kv_stride + g * hd;
    for (int64_t d0 = 0; d0 < hd; d0 += 32) {
      const __m512i pairs = _mm512_inserti64x4(_mm512_castsi256_si512(f16x16(row + d0, hd - d0)),
                                               f16x16(row + d0 + 16, hd - d0 - 16), 1);
      _mm512_i32scatter_epi32(kt + bf16_weight_index(j, d0, nkb_k), lines, pairs, 4);
    }
  }
  // values: keys j, j + 1 of 16 dims interleave into one line of the transpose's tile
  for (int64_t j = j0; j < j1; j += 2) {
    const float* r0 = v + j * kv_stride + g * hd;
    const float* r1 = r0 + kv_stride;
    const bool two = j + 1 < j1;
    for (int64_t d0 = 0; d0 < hd; d0 += 16) {
      const __m512i a = _mm512_cvtepu16_epi32(f16x16(r0 + d0, hd - d0));
      const __m512i b = two ? _mm512_cvtepu16_epi32(f16x16(r1 + d0, hd - d0)) : _mm512_setzero_si512();
      _mm512_storeu_si512(vt + bf16_weight_index(d0, j, nkb_v), _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
    }
  }
}

void softmax_rows_f16(const float* S, int64_t ss, int64_t rows, int64_t n_kv, float c, uint16_t* P, float* l) {
  const int64_t nkp = bf16_padded_k(n_kv);
  const __m512 C = _mm512_set1_ps(c);
  for (int64_t t = 0; t < rows; ++t) {
    const float* s = S + t * ss;
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n_kv; j += 16)
      mx = _mm512_mask_max_ps(mx, first_lanes(n_kv - j), mx, _mm512_maskz_loadu_ps(first_lanes(n_kv - j), s + j));
    const float m = _mm512_reduce_max_ps(mx);  // max is exact in any order
    const __m512 MC = _mm512_set1_ps(m * c);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < nkp; j += 16) {
      const __mmask16 in = first_lanes(n_kv - j);
      const __m512 e = exp2_lanes(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(in, s + j), C, MC));
      const __m256i p = _mm512_cvtps_ph(_mm512_maskz_mov_ps(in, e), kRne);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(P + bf16_act_index(t, j, nkp)), p);
      sum = _mm512_add_ps(sum, _mm512_cvtph_ps(p));
    }
    alignas(64) float part[16];
    _mm512_store_ps(part, sum);
    for (int w = 8; w >= 1; w /= 2)
      for (int i = 0; i < w; ++i) part[i] += part[i + w];
    l[t] = part[0];
  }
}

}  // namespace tessera::avx512
