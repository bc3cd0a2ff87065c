// The fp16 GEMM (f16_tiles.h) on AVX512-FP16 (Intel Sapphire Rapids and later): VFMADD231PH over
// bf16_tiles.h's tile layout holding fp16. A tile line is one zmm of 32 fp16 lanes: 16 rows × the
// pair of k (2i, 2i + 1); a token's pair of activations is one 32-bit broadcast (a load-port
// broadcast, no shuffle); so lane 2n + p sums row n's products of parity p.
//
// A step is 32 rows (the group's two tile halves) × 8 tokens: 16 fp16 accumulators, emptied every
// kF16ChunkK values of k into 32 fp32 ones kept in L1 (each fp16 accumulator's low and high 16
// lanes widened: VCVTPH2PSX), 2 weight loads and 8 broadcasts per 16 FMAs, so the weights come
// from L2 at half the rate of 4 tokens with register sums (440 -> 560 GFLOP/s on 2 Xeon cores;
// chunks of 64 instead of 128: 500). At the end the parities are added (even lanes, which started
// from the bias, plus odd lanes) into 16 rows per zmm.
// Numerics: the scalar twin's, bit for bit (f16_tiles.h): AVX512-FP16 arithmetic rounds to nearest
// even and keeps fp16 subnormals whatever MXCSR's DAZ/FTZ say.
#include <immintrin.h>

#include <algorithm>

#include "kernels/bf16_tiles.h"
#include "kernels/f16_tiles.h"
#include "kernels/x86/bf16_round.h"

namespace tessera::avx512 {

namespace {

constexpr int kTok = 8;                          // tokens per step
constexpr int64_t kChunkBlocks = kF16ChunkK / kBf16K;  // tile blocks per fp16 partial sum
static_assert(kF16ChunkK % kBf16K == 0);

// The step's sums for tokens x0 + j·32 (j < kTok, one 16-token activation tile), group tiles wt:
// acc[(h · 2 + part) · kTok + j] holds rows 16h + 8·part .. + 7 of token j, two lanes (even k, odd
// k) per row.
inline void step(__m512* acc, const uint16_t* wt, const uint16_t* x0, int64_t nkb) {
  for (int64_t cb = 0; cb < nkb; cb += kChunkBlocks) {
    __m512h c[2 * kTok];
    for (__m512h& v : c) v = _mm512_setzero_ph();
    const int64_t nb = std::min(kChunkBlocks, nkb - cb);
    for (int64_t b = cb; b < cb + nb; ++b) {
      const uint16_t* w = wt + b * 1024;
      const uint16_t* x = x0 + b * 512;
      for (int l = 0; l < 16; ++l) {
        const __m512h w0 = _mm512_castsi512_ph(_mm512_loadu_si512(w + 32 * l));
        const __m512h w1 = _mm512_castsi512_ph(_mm512_loadu_si512(w + 512 + 32 * l));
        for (int j = 0; j < kTok; ++j) {
          int pair;
          __builtin_memcpy(&pair, x + j * kBf16K + 2 * l, 4);
          const __m512h xv = _mm512_castsi512_ph(_mm512_set1_epi32(pair));
          c[j] = _mm512_fmadd_ph(w0, xv, c[j]);
          c[kTok + j] = _mm512_fmadd_ph(w1, xv, c[kTok + j]);
        }
      }
    }
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < kTok; ++j) {
        const __m512i v = _mm512_castph_si512(c[h * kTok + j]);
        __m512* lo = acc + (2 * h) * kTok + j;
        __m512* hi = acc + (2 * h + 1) * kTok + j;
        *lo = _mm512_add_ps(*lo, _mm512_cvtxph_ps(_mm256_castsi256_ph(_mm512_castsi512_si256(v))));
        *hi = _mm512_add_ps(*hi, _mm512_cvtxph_ps(_mm256_castsi256_ph(_mm512_extracti64x4_epi64(v, 1))));
      }
  }
}

}  // namespace

void round_rows_f16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp) {
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t k0 = 0; k0 < kp; k0 += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(first_lanes(k - k0), x + t * xs + k0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + bf16_act_index(t, k0, kp)),
                          _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
}

void gemm_f16_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xh, int64_t m, int64_t kp, float* y,
                   int64_t ys, const float* bias) {
  const int64_t nkb = kp / kBf16K;
  const uint16_t* tiles = reinterpret_cast<const uint16_t*>(w.f16_tiles);
  // even lanes (parity 0) of the two halves' parts take 8 rows each, interleaved with zeros
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  constexpr int64_t block = 64;  // tokens per pass over the groups: their activations stay in L2
  for (int64_t t0 = 0; t0 < m; t0 += block)
    for (int64_t g = r0 / 32; g * 32 < r1; ++g) {
      const uint16_t* wt = tiles + g * nkb * 1024;
      const int64_t r = g * 32, nr = std::min<int64_t>(32, r1 - r);
      __m512 start[4];  // (h, part): the bias in even lanes
      for (int q = 0; q < 4; ++q) {
        const int64_t rq = r + 8 * q;
        const __m256 b8 = bias ? _mm256_maskz_loadu_ps(static_cast<__mmask8>(first_lanes(w.rows - rq)), bias + rq)
                               : _mm256_setzero_ps();
        start[q] = _mm512_maskz_expand_ps(0x5555, _mm512_castps256_ps512(b8));
      }
      for (int64_t tc = t0; tc < std::min(m, t0 + block); tc += kTok) {
        const uint16_t* x0 = xh + (tc / 16) * nkb * 512 + (tc % 16) * kBf16K;
        __m512 acc[4 * kTok];
        for (int q = 0; q < 4; ++q)
          for (int j = 0; j < kTok; ++j) acc[q * kTok + j] = start[q];
        step(acc, wt, x0, nkb);
        const __mmask16 k0 = first_lanes(nr), k1 = first_lanes(nr - 16);
        for (int j = 0; j < kTok && tc + j < m; ++j)
          for (int h = 0; h < 2; ++h) {
            const __m512 lo = acc[(2 * h) * kTok + j], hi = acc[(2 * h + 1) * kTok + j];
            const __m512 s = _mm512_add_ps(_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi));
            _mm512_mask_storeu_ps(y + (tc + j) * ys + r + 16 * h, h ? k1 : k0, s);
          }
      }
    }
}

}  // namespace tessera::avx512
