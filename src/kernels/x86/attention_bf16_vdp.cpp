// The bf16 attention (attention_bf16.h) on CPUs with AVX512-BF16 but no AMX: the AMX kernel's
// steps (attention_bf16_steps.h) with its two tile products done by VDPBF16PS over the same packed
// tiles (vdp_block.h):
//  - scores: a key tile's line is one dim pair of 16 keys, so 32 keys (two tiles) × 8 query rows
//    per block, each query's dim pair a broadcast;
//  - outputs: a value tile's line is one key pair of 16 dims, so 32 dims × 8 query rows per block,
//    each row's pair of weights a broadcast.
// Numerics as the AMX kernel's bound (docs/numerics.md); a row's operations depend on its own
// inputs alone, so the result is the same whatever the other rows and the thread count.
#include <immintrin.h>

#include <algorithm>

#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/x86/attention_bf16_steps.h"
#include "kernels/x86/vdp_block.h"

namespace tessera::avx512 {

namespace {

constexpr int kRows = 8;  // query rows per block: 16 accumulators with two halves (12 rows, 24
                          // accumulators, measured 0.96-0.99x on Zen 4)

// One of the two tile products for the call's rows (a multiple of kRows computed; the buffers hold
// 32): row r's 16 · NH lanes = Σ over nb blocks of vdp_block's pairs, from row r's pairs at x + r ·
// xs, into dst + r · ds.
template <int NH>
inline void rows_product(int64_t rows, const uint16_t* w, int64_t wh, int64_t wstep, const uint16_t* x, int64_t xs,
                         int64_t nb, float* dst, int64_t ds) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    __m512 acc[NH * kRows];
    std::fill_n(acc, NH * kRows, _mm512_setzero_ps());
    vdp_block<NH, kRows>(acc, w, wh, wstep, x + r0 * xs, xs, 32, nb);
    for (int j = 0; j < kRows; ++j)
      for (int h = 0; h < NH; ++h) _mm512_storeu_ps(dst + (r0 + j) * ds + 16 * h, acc[h * kRows + j]);
  }
}

}  // namespace

void attention_bf16_rows_vdp(const Bf16AttnDims& D, const Bf16AttnBuffers& b, int64_t h, int64_t i0, float* out,
                             int64_t out_stride, uint16_t* out_b16) {
  constexpr int64_t KB = Bf16AttnRows::KB, ss = Bf16AttnRows::ss, ps = Bf16AttnRows::ps;
  const int64_t ndk = D.hdk / 32, hdv = D.hdv, rows = std::min<int64_t>(kBf16AttnRows, D.n_q - i0);
  const int64_t g = h / (D.n_head / D.n_head_kv);
  Bf16AttnRows st(hdv);
  const uint16_t* q = b.q + bf16_attn_q_index(D, h, i0, 0);
  for (int64_t j0 = 0; j0 < D.n_kv; j0 += KB) {
    const int64_t kbn = std::min(KB, D.nkp - j0);  // keys in this block, a multiple of 32
    for (int64_t jj = 0; jj < kbn; jj += 32) {
      // keys jj..jj+15 in one tile per 32 dims, jj+16.. in the next key group's
      const uint16_t* k0 = b.k + bf16_attn_k_index(D, g, j0 + jj, 0);
      rows_product<2>(rows, k0, ndk * 512, 512, q, D.hdk, ndk, st.S + jj, ss);
    }
    st.softmax_block(rows, kbn, j0, D.n_kv, D.c);
    for (int64_t dc = 0; dc < hdv; dc += 32) {
      const bool two = dc + 16 < hdv;  // a second value tile in this step
      const uint16_t* v0 = b.v + bf16_attn_v_index(D, g, j0, dc);
      const int64_t vstep = (hdv / 16) * 512;  // the next 32 keys' tile of the same dims
      if (two) rows_product<2>(rows, v0, 512, vstep, st.P, ps, kbn / 32, st.Ob + dc, hdv);
      else rows_product<1>(rows, v0, 512, vstep, st.P, ps, kbn / 32, st.Ob + dc, hdv);
    }
    st.rescale_add(rows, hdv);
  }
  st.finish(D, rows, i0, h, out, out_stride, out_b16);
}

}  // namespace tessera::avx512
