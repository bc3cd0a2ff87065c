// The bf16 GEMM (bf16_tiles.h) on CPUs with AVX512-BF16 but no AMX (AMD Zen 4 and 5, Intel Cooper
// Lake): VDPBF16PS over the same packed tiles the AMX kernel reads. A weight tile's line i holds,
// for its 16 rows, the pair of k (2i, 2i + 1): one zmm, whose 16 fp32 lanes are 16 rows of y. Each
// token's pair of activations at the same k is one 32-bit broadcast. So a step of 32 rows × 8
// tokens keeps 16 accumulators and reads per pair of k two weight lines and 8 broadcasts (VDPBF16PS
// takes the broadcast as its memory operand). Zen 4 runs VDPBF16PS at twice the fp32 FMA rate in
// multiply-adds (docs/measurements.md); on the Xeon it is half, and AMX wins there.
//
// Numerics: each output sums its products pair by pair in k order, each VDPBF16PS adding two exact
// bf16 × bf16 products to the fp32 lane, odd then even (denormal inputs and sums flushed): the
// scalar twin's order, so bit for bit the twin where VDPBF16PS follows its specification (checked
// on Zen 4), else held to the AMX kernel's bound (docs/numerics.md). Per output the
// sequence of operations does not depend on the batch, the token's place in it, the row range or
// the thread count, so results are invariant in all four, as on AMX.
#include <immintrin.h>

#include <algorithm>

#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/kernels.h"
#include "kernels/x86/bf16_epilogues.h"
#include "kernels/x86/bf16_round.h"
#include "kernels/x86/vdp_block.h"

namespace tessera::avx512 {

namespace {

constexpr int kTok = 8;  // tokens per block (16 accumulators with the group's two row halves)

}  // namespace

void gemm_bf16_rows_vdp(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xb, int64_t m, int64_t kp,
                        float* y, int64_t ys, const float* bias, uint16_t* gelu_b16, const Bf16QkvTarget* qkv) {
  const int64_t nkb = kp / kBf16K, kpo = bf16_padded_k(w.rows);
  const uint16_t* tiles = reinterpret_cast<const uint16_t*>(w.bf16_tiles);
  // Tokens in blocks of 64 as on AMX: a row group's weights (nkb · 2 KiB) are reread from L2 once
  // per 8 tokens; a block's activations (64 tokens × kp) stay in L2 across the groups.
  constexpr int64_t block = 64;
  alignas(64) float buf[32 * 32];  // one 32 × 32 step for the epilogues
  for (int64_t t0 = 0; t0 < m; t0 += block)
    for (int64_t g = r0 / 32; g * 32 < r1; ++g) {
      const uint16_t* wt = tiles + g * nkb * 1024;
      const int64_t r = g * 32, nr = std::min<int64_t>(32, r1 - r);
      __m512 b0 = _mm512_setzero_ps(), b1 = b0;  // the group's biases (zero past the matrix)
      if (bias) {
        b0 = _mm512_maskz_loadu_ps(first_lanes(w.rows - r), bias + r);
        b1 = _mm512_maskz_loadu_ps(first_lanes(w.rows - r - 16), bias + r + 16);
      }
      for (int64_t t = t0; t < std::min(m, t0 + block); t += 32) {
        for (int64_t tc = t; tc < std::min(m, t + 32); tc += kTok) {
          // tokens tc..tc+7 lie in one 16-token activation tile (padding tokens are zeros)
          const uint16_t* x0 = xb + (tc / 16) * nkb * 512 + (tc % 16) * kBf16K;
          __m512 acc[2 * kTok];
          for (int j = 0; j < kTok; ++j) {
            acc[j] = b0;
            acc[kTok + j] = b1;
          }
          vdp_block<2, kTok>(acc, wt, 512, 1024, x0, kBf16K, 512, nkb);
          if (gelu_b16 || qkv) {
            for (int j = 0; j < kTok; ++j) {
              _mm512_store_ps(buf + 32 * (tc - t + j), acc[j]);
              _mm512_store_ps(buf + 32 * (tc - t + j) + 16, acc[kTok + j]);
            }
            continue;
          }
          const __mmask16 k0 = first_lanes(nr), k1 = first_lanes(nr - 16);
          for (int j = 0; j < kTok && tc + j < m; ++j) {
            _mm512_mask_storeu_ps(y + (tc + j) * ys + r, k0, acc[j]);
            _mm512_mask_storeu_ps(y + (tc + j) * ys + r + 16, k1, acc[kTok + j]);
          }
        }
        if (gelu_b16) gelu_round_step(buf, t, m, r, nr, gelu_b16, kpo);
        else if (qkv) qkv_round_step(buf, t, m, r, *qkv);
      }
    }
}

}  // namespace tessera::avx512
