// exp2_bf16attn (attention_bf16.h) sixteen lanes at a time, bit for bit, for the bf16 and fp16
// attentions' softmax. Built only into AVX-512 translation units (VREDUCEPS is AVX512DQ).
#pragma once
#include <immintrin.h>

#include "kernels/attention_bf16.h"

namespace tessera::avx512 {

// 2^t sixteen lanes at a time: exp2_bf16attn's steps. VREDUCEPS with imm 8
// (round to nearest even, precision exception suppressed) gives f = t -
// round(t), exact for |f| <= 1/2; t - f is then round(t) exactly, and VSCALEFPS
// multiplies by 2^round(t) exactly. (Rounding down would save the subtraction,
// since VSCALEFPS floors its exponent, but t - floor(t) has to round for small
// negative t, and VREDUCEPS's rounding of it differed from a scalar
// subtraction's.)
inline __m512 exp2_lanes(__m512 t) {
  t = _mm512_max_ps(t, _mm512_set1_ps(-126.0f));
  const __m512 f = _mm512_reduce_ps(t, 8);
  __m512 p = _mm512_set1_ps(kExp2Poly[4]);
  for (int i = 3; i >= 0; --i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2Poly[i]));
  return _mm512_scalef_ps(p, _mm512_sub_ps(t, f));
}

}  // namespace tessera::avx512
