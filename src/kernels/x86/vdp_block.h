// The inner block of the AVX512-BF16 kernels (gemm_bf16_vdp.cpp, attention_bf16_vdp.cpp): an AMX
// "B" tile's layout read by VDPBF16PS. Built only into translation units with AVX512-BF16 enabled.
#pragma once
#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstring>

namespace tessera::avx512 {

// acc[h · J + j] += Σ over nblocks blocks of 16 pairs: line l of half h (16 lanes × one bf16 pair,
// at w + b · wstep + h · wh + 32 · l) times token j's pair l (at x + b · xstep + j · xs + 2 · l),
// broadcast. Offsets in bf16 elements. Pairs are added in order, one VDPBF16PS each, so every lane's
// sequence of operations is fixed by its own inputs alone.
template <int NH, int J>
inline void vdp_block(__m512* acc, const uint16_t* w, int64_t wh, int64_t wstep, const uint16_t* x, int64_t xs,
                      int64_t xstep, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, w += wstep, x += xstep) {
    for (int l = 0; l < 16; ++l) {
      __m512bh wl[NH];
      for (int h = 0; h < NH; ++h) wl[h] = std::bit_cast<__m512bh>(_mm512_loadu_si512(w + h * wh + 32 * l));
      for (int j = 0; j < J; ++j) {
        uint32_t pair;
        std::memcpy(&pair, x + j * xs + 2 * l, 4);
        const __m512bh xv = std::bit_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
        for (int h = 0; h < NH; ++h) acc[h * J + j] = _mm512_dpbf16_ps(acc[h * J + j], wl[h], xv);
      }
    }
  }
}

}  // namespace tessera::avx512
