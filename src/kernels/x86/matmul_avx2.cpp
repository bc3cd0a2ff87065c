// AVX2+FMA kernels (machines without AVX-512, and the `--isa avx2` cap): the generic V16
// matmul/GEMM (two ymm registers per 16-lane vector); results bitwise those of the AVX-512
// and scalar kernels.
#include <algorithm>
#include <cstring>
#include <cmath>
#include <vector>

#include "core/fp16.h"
#include "kernels/decode_panels.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernels.h"
#include "kernels/q8_panels.h"
#include "kernels/simd/deq16.h"
#include "kernels/x86/prefetch_stream.h"

namespace tessera::avx2 {

// The V16 matmul's prefill is replaced here by prefill_rows_own (below).
#define TESSERA_OWN_PREFILL 1
template <DType T>
void prefill_rows_own(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
                      int64_t ys);

#include "kernels/simd/matmul_simd.inc"

// Prefill on AVX2 by k residue. The recipe (every ISA's) keeps, per output, 16 partial sums, lane
// l summing the products of k = l, l + 16, ... in order with FMAs, then adds them by reduce16's
// tree. A V16 accumulator is two ymm per output, so 16 registers hold at most ~6 outputs and the
// 2 × 2 block needed a load per FMA (30-37% of the FMA roof on Zen 3/4). Here a ymm holds one
// residue's partial sum for 8 rows instead: for residue l, 3 groups of 8 rows × 4 tokens are 12
// accumulators, fed per k by 3 weight loads and 4 broadcasts — the same FMAs in the same order per
// partial sum, so the same bits. The 16 partials of the block go to a small buffer, and reduce16's
// tree is then vertical adds across them (lane = row): s8_i = P_i + P_i+8, s4_i = s8_i + s8_i+4,
// s2_i = s4_i + s4_i+2, y = s2_0 + s2_1.
namespace {

// 24 rows × 4 tokens: pp512 536 t/s (median of 5 alternated runs, --isa avx2 on Zen 4) against
// 479 for 32 × 3 and 460 for 16 × 6
constexpr int kResGroups = 3, kResTokens = 4;

// Partial sums of residue l for G groups × TT tokens: wl[g · gstride + 8c + i] is row 8g + i's
// weight at k = 16c + l; token j's activations at x + j · xs.
template <int G, int TT>
inline void residue_pass(const float* wl, int64_t gstride, int64_t n, const float* x, int64_t xs, int l, __m256* part) {
  __m256 acc[G][TT];
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < TT; ++j) acc[g][j] = _mm256_setzero_ps();
  for (int64_t c = 0; c < n; ++c) {
    __m256 wv[G];
    for (int g = 0; g < G; ++g) wv[g] = _mm256_loadu_ps(wl + g * gstride + 8 * c);
    for (int j = 0; j < TT; ++j) {
      const __m256 xb = _mm256_broadcast_ss(x + j * xs + 16 * c + l);
      for (int g = 0; g < G; ++g) acc[g][j] = _mm256_fmadd_ps(wv[g], xb, acc[g][j]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < TT; ++j) part[(g * TT + j) * 16 + l] = acc[g][j];
}

// The block's outputs: part[(g · TT + j) · 16 + l] reduced by reduce16's tree, stored for the
// rows that exist (nr of the block's 8G) to y.
template <int G, int TT>
inline void residue_block(const float* wp, int64_t gstride, int64_t K, const float* x, int64_t xs, float* y, int64_t ys,
                          int64_t nr) {
  alignas(32) __m256 part[G * TT * 16];
  const int64_t chunks = (K + 15) / 16;
  for (int l = 0; l < 16; ++l) {
    const int64_t n = l < K ? (K - l + 15) / 16 : 0;  // the chunks whose k = 16c + l exists
    residue_pass<G, TT>(wp + l * chunks * 8, gstride, n, x, xs, l, part);
  }
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < TT; ++j) {
      const __m256* P = part + (g * TT + j) * 16;
      __m256 s8[8], s4[4];
      for (int i = 0; i < 8; ++i) s8[i] = _mm256_add_ps(P[i], P[i + 8]);
      for (int i = 0; i < 4; ++i) s4[i] = _mm256_add_ps(s8[i], s8[i + 4]);
      const __m256 out = _mm256_add_ps(_mm256_add_ps(s4[0], s4[2]), _mm256_add_ps(s4[1], s4[3]));
      const int64_t rows = std::min<int64_t>(8, nr - 8 * g);
      if (rows <= 0) continue;
      float* dst = y + j * ys + 8 * g;
      if (rows == 8) {
        _mm256_storeu_ps(dst, out);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, out);
        std::memcpy(dst, tmp, static_cast<size_t>(rows) * 4);
      }
    }
}

}  // namespace

// Below this many tokens the residue layout's scalar scatter of each dequantized row costs about as
// much as the FMAs it feeds (callgrind: +74% instructions on an 8-token prompt), so the V16 2 × 2
// kernel runs them: the same bits either way.
constexpr int64_t kResMinTokens = 16;

template <DType T>
void prefill_rows_own(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
                      int64_t ys) {
  if (m < kResMinTokens) return prefill_rows<T>(w, r0, r1, x, m, xs, y, ys);
  constexpr int G = kResGroups;
  constexpr int64_t kPanel = 8 * G;
  const int64_t K = w.cols, chunks = (K + 15) / 16, gstride = 16 * chunks * 8;
  thread_local std::vector<float> wbuf;  // [group][residue][chunk][8 rows]
  thread_local std::vector<float> row;
  wbuf.resize(static_cast<size_t>(G * gstride));
  row.resize(static_cast<size_t>(chunks * 16));
  for (int64_t p0 = r0; p0 < r1; p0 += kPanel) {
    const int64_t np = std::min<int64_t>(kPanel, r1 - p0);
    for (int64_t i = 0; i < kPanel; ++i) {
      if (i < np) dequantized_row<T>(w, p0 + i, row.data());
      else std::fill(row.begin(), row.end(), 0.0f);
      float* base = wbuf.data() + (i / 8) * gstride + i % 8;
      for (int64_t k = 0; k < chunks * 16; ++k) base[((k % 16) * chunks + k / 16) * 8] = row[static_cast<size_t>(k)];
    }
    for (int64_t t = 0; t < m; t += kResTokens) {
      const float* xt = x + t * xs;
      float* yt = y + t * ys + p0;
      switch (std::min<int64_t>(kResTokens, m - t)) {
        case 4: residue_block<G, 4>(wbuf.data(), gstride, K, xt, xs, yt, ys, np); break;
        case 3: residue_block<G, 3>(wbuf.data(), gstride, K, xt, xs, yt, ys, np); break;
        case 2: residue_block<G, 2>(wbuf.data(), gstride, K, xt, xs, yt, ys, np); break;
        default: residue_block<G, 1>(wbuf.data(), gstride, K, xt, xs, yt, ys, np); break;
      }
    }
  }
}

#include "kernels/simd/elementwise_simd.inc"

#include "kernels/x86/matmul_q8_avx2.inc"

namespace {

// Lane i of the result = op over the 8 lanes of v[i] (op associative and commutative on the
// values at hand: max without NaNs, integer sums): 8 reductions in 7 folds of whole vectors.
template <class Op>
inline __m256 reduce8x8(const __m256 v[8], Op op) {
  __m256 w[4];
  for (int i = 0; i < 4; ++i)  // 128-bit lane 0: v[2i]'s partials, lane 1: v[2i+1]'s
    w[i] = op(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20), _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
  const __m256 x0 = op(_mm256_unpacklo_ps(w[0], w[1]), _mm256_unpackhi_ps(w[0], w[1]));
  const __m256 x1 = op(_mm256_unpacklo_ps(w[2], w[3]), _mm256_unpackhi_ps(w[2], w[3]));
  // element e of 128-bit lane L: v[2e + L]
  const __m256 z = op(_mm256_shuffle_ps(x0, x1, 0x44), _mm256_shuffle_ps(x0, x1, 0xEE));
  return _mm256_permutevar8x32_ps(z, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline __m256 max_ps(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
inline __m256 add_epi32_ps(__m256 a, __m256 b) {
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b)));
}

}  // namespace

// ref::quantize_row_q8_1 for 8 blocks at a time: the same max (exact in any order; max(|x|, acc)
// keeps acc where |x| is NaN, as std::fmax), the same divisions (eight lanes of them), products
// rounded half to even by vcvtps2dq (MXCSR's default, as nearbyint), exact integer sums. The
// blocks' maxima and sums are reduced side by side (reduce8x8) rather than each block's in a
// chain of its own. The int32 quants (|q| <= 127) narrow through two saturating packs; the
// permute undoes their 128-bit lane interleave.
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const int64_t nb = k / 32;
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    const int n = static_cast<int>(std::min<int64_t>(8, nb - b0));
    const float* xb = x + 32 * b0;
    __m256 am[8];
    for (int i = 0; i < 8; ++i) {
      am[i] = _mm256_setzero_ps();
      if (i < n)
        for (int j = 0; j < 4; ++j) am[i] = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 32 * i + 8 * j)), am[i]);
    }
    const __m256 amax = reduce8x8(am, max_ps);
    const __m256 d = _mm256_div_ps(amax, _mm256_set1_ps(127.0f));
    const __m256 nz = _mm256_cmp_ps(amax, _mm256_setzero_ps(), _CMP_NEQ_UQ);
    const __m256 id = _mm256_and_ps(nz, _mm256_div_ps(_mm256_set1_ps(127.0f), amax));  // 0 where amax is 0
    alignas(32) float ids[8];
    _mm256_store_ps(ids, id);
    __m256 lo[8], all[8];  // the int32 quants of each block's first half and of both, for the sums
    for (int i = 0; i < 8; ++i) {
      if (i >= n) {
        lo[i] = all[i] = _mm256_setzero_ps();
        continue;
      }
      const __m256 idv = _mm256_set1_ps(ids[i]);
      __m256i q[4];
      for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 32 * i + 8 * j), idv));
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b0 + i].q), _mm256_permutevar8x32_epi32(bytes, order));
      const __m256i l = _mm256_add_epi32(q[0], q[1]);
      lo[i] = _mm256_castsi256_ps(l);
      all[i] = _mm256_castsi256_ps(_mm256_add_epi32(l, _mm256_add_epi32(q[2], q[3])));
    }
    const __m256i sum_lo = _mm256_castps_si256(reduce8x8(lo, add_epi32_ps));
    const __m256i sum = _mm256_castps_si256(reduce8x8(all, add_epi32_ps));
    const __m256 dh = _mm256_cvtph_ps(_mm256_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256 sh = _mm256_cvtph_ps(
        _mm256_cvtps_ph(_mm256_mul_ps(d, _mm256_cvtepi32_ps(sum)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    alignas(32) float ds[8], ss[8];
    alignas(32) int32_t sums[8], los[8];
    _mm256_store_ps(ds, dh);
    _mm256_store_ps(ss, sh);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums), sum);
    _mm256_store_si256(reinterpret_cast<__m256i*>(los), sum_lo);
    set_q8_1_scales(y + b0, n, ds, ss, sums, los);
  }
}

void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m, int64_t xq_stride,
                    float* y, int64_t ys) {
  matmul_q8_rows_256(w, r0, r1, xq, m, xq_stride, y, ys);
}

}  // namespace tessera::avx2
