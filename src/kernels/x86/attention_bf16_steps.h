// The steps of the bf16 attention (attention_bf16.h) shared by its AMX and
// AVX512-BF16 kernels: per 32 query rows, the buffers of one key block, the
// online softmax over a block's scores, the rescaled sum of the blocks' outputs
// and the final division. The kernels differ only in how they form the scores
// (Q·Kᵀ) and the block outputs (P·V) from the packed tiles. Built only into
// translation units with AVX512-BF16 enabled.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/x86/bf16_round.h"
#include "kernels/x86/exp2_lanes.h"

namespace tessera::avx512 {

template <class T>
T* align64(T* p) {
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

inline __m512bh ones_bf16() { return std::bit_cast<__m512bh>(_mm512_set1_epi16(0x3f80)); }

// One call's state: per row the scores and weights of one key block (rows a
// cache line longer than they need, so they do not all map to the same cache
// sets), the block's output and the running output, max, rescale factor and
// sum.
struct Bf16AttnRows {
  static constexpr int64_t R = kBf16AttnRows, KB = kBf16AttnKeys, ss = KB + 16, ps = KB + 32;
  float* S;
  uint16_t* P;
  float* O;
  float* Ob;
  alignas(64) float m[R], a[R], mc[R], mn[R] = {};  // mn: rows past `rows` stay 0
  __m512 l[R];                                      // the running sums, as 16 partial sums (added up at the end)

  explicit Bf16AttnRows(int64_t hdv) {
    thread_local std::vector<float> sbuf(R * ss + 16);  // + 16: room to align to 64 bytes
    thread_local std::vector<uint16_t> pbuf(R * ps + 32);
    thread_local std::vector<float> obuf, obuf_blk;
    S = align64(sbuf.data());
    P = align64(pbuf.data());
    obuf.assign(static_cast<size_t>(R * hdv), 0.0f);
    obuf_blk.resize(static_cast<size_t>(R * hdv));
    O = obuf.data();
    Ob = obuf_blk.data();
    std::fill_n(m, R, -INFINITY);
    std::fill_n(l, R, _mm512_setzero_ps());
  }

  // The softmax step over the scores S of keys [j0, j0 + kbn) (n_kv keys in
  // all): weights into P.
  void softmax_block(int64_t rows, int64_t kbn, int64_t j0, int64_t n_kv, float c) {
    // every row's new max and rescale factor first, then the weights: the exp
    // loops do not wait on the reductions. Each row's max is a tree over two
    // chains (max is exact: any order gives the same bits), and the rescale
    // factors are exp2_lanes of 16 rows at once: a row's chain holds no scalar
    // exp2, so the out-of-order core overlaps the rows (this pass was
    // latency-bound).
    for (int64_t r = 0; r < rows; ++r) {
      const float* s = S + r * ss;
      __m512 mx0 = _mm512_set1_ps(m[r]), mx1 = mx0;
      for (int64_t j = 0; j < kbn; j += 32) {
        mx0 = _mm512_mask_max_ps(mx0, first_lanes(n_kv - j0 - j), mx0, _mm512_load_ps(s + j));
        mx1 = _mm512_mask_max_ps(mx1, first_lanes(n_kv - j0 - j - 16), mx1, _mm512_load_ps(s + j + 16));
      }
      mn[r] = _mm512_reduce_max_ps(_mm512_max_ps(mx0, mx1));
    }
    for (int64_t r = 0; r < rows; r += 16) {
      const __m512 vm = _mm512_load_ps(m + r), vmn = _mm512_load_ps(mn + r);
      const __m512 vmc = _mm512_mul_ps(vmn, _mm512_set1_ps(c));
      const __mmask16 seen = _mm512_cmp_ps_mask(vm, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);  // a = 0 before any key
      _mm512_store_ps(mc + r, vmc);
      _mm512_store_ps(a + r, _mm512_maskz_mov_ps(seen, exp2_lanes(_mm512_fmsub_ps(vm, _mm512_set1_ps(c), vmc))));
      _mm512_store_ps(m + r, vmn);
    }
    const __m512 vc = _mm512_set1_ps(c);
    for (int64_t r = 0; r < rows; ++r) {
      const float* s = S + r * ss;
      const __m512 vmc = _mm512_set1_ps(mc[r]);
      __m512 sum = _mm512_mul_ps(l[r], _mm512_set1_ps(a[r]));
      for (int64_t j = 0; j < kbn; j += 32) {
        __m512 e0 = exp2_lanes(_mm512_fmsub_ps(_mm512_load_ps(s + j), vc, vmc));
        __m512 e1 = exp2_lanes(_mm512_fmsub_ps(_mm512_load_ps(s + j + 16), vc, vmc));
        if (j0 + j + 32 > n_kv) {  // keys past n_kv weigh nothing
          e0 = _mm512_maskz_mov_ps(first_lanes(n_kv - j0 - j), e0);
          e1 = _mm512_maskz_mov_ps(first_lanes(n_kv - j0 - j - 16), e1);
        }
        // exp2 never returns a denormal (t >= -126), so this rounds exactly as
        // float_to_bf16
        const __m512bh p = _mm512_cvtne2ps_pbh(e1, e0);  // keys j..j+15 in the low half
        sum = _mm512_dpbf16_ps(sum, p, ones_bf16());
        _mm512_store_si512(P + r * ps + j, std::bit_cast<__m512i>(p));
      }
      l[r] = sum;
    }
  }

  // O = O · a + Ob: the running output rescaled to the new max, plus this
  // block's.
  void rescale_add(int64_t rows, int64_t hdv) {
    for (int64_t r = 0; r < rows; ++r) {
      const __m512 va = _mm512_set1_ps(a[r]);
      for (int64_t d = 0; d < hdv; d += 16)
        _mm512_storeu_ps(O + r * hdv + d,
                         _mm512_fmadd_ps(_mm512_loadu_ps(O + r * hdv + d), va, _mm512_loadu_ps(Ob + r * hdv + d)));
    }
  }

  // The rows divided by their sums, into out (or rounded into out_b16).
  void finish(const Bf16AttnDims& D, int64_t rows, int64_t i0, int64_t h, float* out, int64_t out_stride,
              uint16_t* out_b16) const {
    const int64_t hdv = D.hdv;
    for (int64_t r = 0; r < rows; ++r) {
      const __m512 vl = _mm512_set1_ps(_mm512_reduce_add_ps(l[r]));
      if (out_b16) {  // rounded as round_row_bf16 rounds the fp32 row; each 16
                      // values one head's
        const int64_t kp = bf16_padded_k(D.n_head * D.hd);
        for (int64_t d = 0; d < D.hd; d += 16) {
          const __m512 o = _mm512_div_ps(_mm512_loadu_ps(O + r * hdv + d), vl);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_b16 + bf16_act_index(i0 + r, h * D.hd + d, kp)),
                              _mm512_cvtepi32_epi16(round_bf16_lanes(_mm512_castps_si512(o))));
        }
        continue;
      }
      float* dst = out + (i0 + r) * out_stride + h * D.hd;
      for (int64_t d = 0; d < D.hd; d += 16)
        _mm512_mask_storeu_ps(dst + d, first_lanes(D.hd - d), _mm512_div_ps(_mm512_loadu_ps(O + r * hdv + d), vl));
    }
  }
};

}  // namespace tessera::avx512
