// The bf16 GEMM's epilogues (bf16_tiles.h: gemm_bf16_rounded with gelu_b16 or a
// Bf16QkvTarget), shared by its AMX and AVX512-BF16 kernels: one step of 32
// tokens × 32 rows of results, already in a token-major buffer, goes into the
// next op's bf16 layout. Built only into translation units with AVX512-BF16
// enabled.
#pragma once
#include <immintrin.h>

#include <algorithm>

#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/kernels.h"
#include "kernels/x86/bf16_round.h"

namespace tessera::avx512 {

// gemm_bf16_rounded's GELU epilogue for one step, buf holding its 32 tokens ×
// 32 rows token-major (tokens t.., rows r.., nr of them valid): gelu_tanh per
// token, rounded into the token's line of the next GEMM's activations (zero
// past nr).
inline void gelu_round_step(float* buf, int64_t t, int64_t m, int64_t r, int64_t nr, uint16_t* out, int64_t kpo) {
  for (int64_t i = 0; i < 32 && t + i < m; ++i) {
    float* row = buf + 32 * i;
    gelu_tanh(row, nr);
    uint16_t* dst = out + bf16_act_index(t + i, r, kpo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(round_bf16_lanes_n(row, nr)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16),
                        _mm512_cvtepi32_epi16(round_bf16_lanes_n(row + 16, nr - 16)));
  }
}

// The q/k/v epilogue (Bf16QkvTarget) for one step in buf (as above): tokens t..
// (m in all), rows r.. (32 dims of one head of q, k or v), rounded into the
// attention's layouts exactly as pack_attn_bf16 does.
inline void qkv_round_step(const float* buf, int64_t t, int64_t m, int64_t r, const Bf16QkvTarget& T) {
  const Bf16AttnDims& D = *T.dims;
  const int64_t nt = std::min<int64_t>(32, m - t), hq = D.n_head * D.hd, hkv = D.n_head_kv * D.hd;
  auto half = [&](int64_t i, int h) {
    return _mm512_cvtepi32_epi16(round_bf16_lanes(_mm512_castps_si512(_mm512_load_ps(buf + 32 * i + 16 * h))));
  };
  if (r < hq) {  // a query row holds its head's dims contiguously
    const int64_t h = r / D.hd, d0 = r % D.hd;
    for (int64_t i = 0; i < nt; ++i) {
      uint16_t* dst = T.bufs.q + bf16_attn_q_index(D, h, t + i, d0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), half(i, 0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16), half(i, 1));
    }
  } else if (r < hq + hkv) {  // a key's 16 dim pairs go one per line of its
                              // tile: a scatter
    const int64_t g = (r - hq) / D.hd, d0 = (r - hq) % D.hd;
    const __m512i lines = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32(16));
    for (int64_t i = 0; i < nt; ++i) {
      const __m512i pairs = _mm512_inserti64x4(_mm512_castsi256_si512(half(i, 0)), half(i, 1), 1);
      _mm512_i32scatter_epi32(T.bufs.k + bf16_attn_k_index(D, g, t + i, d0), lines, pairs, 4);
    }
  } else {  // two keys' values interleave in one tile line
    const int64_t g = (r - hq - hkv) / D.hd, d0 = (r - hq - hkv) % D.hd;
    for (int64_t i = 0; i < nt; i += 2)
      for (int h = 0; h < 2; ++h) {
        const __m512i a = _mm512_cvtepu16_epi32(half(i, h));
        const __m512i c = i + 1 < nt ? _mm512_cvtepu16_epi32(half(i + 1, h)) : _mm512_setzero_si512();
        _mm512_storeu_si512(T.bufs.v + bf16_attn_v_index(D, g, t + i, d0 + 16 * h),
                            _mm512_or_si512(a, _mm512_slli_epi32(c, 16)));
      }
  }
}

}  // namespace tessera::avx512
