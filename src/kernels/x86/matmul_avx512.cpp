// AVX-512 matmul over fp32 activations and block-quantized weights.
// Decode (m == 1): 8 weight rows are dequantized on the fly and dotted with x, giving 8
// independent FMA chains and 8 weight streams in flight. Prefill (m > 1): rows are
// dequantized once per panel into a buffer, then a 6-row × 4-token register block runs over
// the tokens. Both compute each output with the same instruction sequence as ref/.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/decode_panels.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernels.h"
#include "kernels/simd/deq16.h"
#include "kernels/x86/x86_common.h"

namespace tessera::avx512 {

namespace {

using simd::deq16;
using simd::deq32;
using simd::deq_tail;
using simd::is_block32;
using simd::V16;

// Decode: R rows against one token, weights dequantized on the fly, with software prefetch
// of [pf, pf + pf_bytes) into L1 and of the same range kPrefetchL2Bytes on into L2, spread over
// the row (x86_common.h).
template <DType T, int R>
void rows_x1(const WeightMatrix& w, int64_t r, const float* x, float* y, const uint8_t* pf = nullptr,
             int64_t pf_bytes = 0) {
  const int64_t K = w.cols, full = K / 16;
  const int rem = static_cast<int>(K % 16);
  const uint8_t* pf_l2 = pf ? pf + kPrefetchL2Bytes : nullptr;
  const int64_t steps = is_block32(T) ? K / 32 : full;
  PrefetchStream<_MM_HINT_T0> pf_l1s(pf, pf_bytes, steps);
  PrefetchStream<_MM_HINT_T1> pf_l2s(pf_l2, pf_bytes, steps);
  __m512 acc[R];
  const uint8_t* rows[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = _mm512_setzero_ps();
    rows[i] = w.data + (r + i) * w.row_stride;
  }
  if constexpr (is_block32(T)) {
    // blocks in groups of 16: their scales/offsets first (one gather per row), then the dots
    alignas(64) float dc[R][16], mc[R][16];
    const int64_t nb = K / 32;
    for (int64_t b0 = 0; b0 < nb; b0 += 16) {
      const int n = static_cast<int>(std::min<int64_t>(16, nb - b0));
      for (int i = 0; i < R; ++i) simd::block_consts<T>(rows[i], b0, n, dc[i], mc[i]);
      for (int j = 0; j < n; ++j) {
        const int64_t b = b0 + j;
        pf_l1s.step();
        pf_l2s.step();
        const __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
        for (int i = 0; i < R; ++i) {
          V16 w0, w1;
          simd::deq32c<T>(rows[i], b, dc[i][j], mc[i][j], w0, w1);
          acc[i] = _mm512_fmadd_ps(w0.v, x0, acc[i]);
          acc[i] = _mm512_fmadd_ps(w1.v, x1, acc[i]);
        }
      }
    }
  } else {
    for (int64_t c = 0; c < full; ++c) {
      pf_l1s.step();
      pf_l2s.step();
      const __m512 xv = _mm512_loadu_ps(x + 16 * c);
      for (int i = 0; i < R; ++i) acc[i] = _mm512_fmadd_ps(deq16<T>(rows[i], c).v, xv, acc[i]);
    }
  }
  if (rem) {
    const __mmask16 mk = static_cast<__mmask16>((1u << rem) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(mk, x + 16 * full);
    for (int i = 0; i < R; ++i)
      acc[i] = _mm512_mask3_fmadd_ps(deq_tail(w.type, rows[i], full, rem).v, xv, acc[i], mk);
  }
  for (int i = 0; i < R; ++i) y[r + i] = simd::reduce16(V16{acc[i]});
}

// Decode on decode panels (decode_panels.h): the 8-row group at r, the same arithmetic as rows_x1
// (deq32q is deq32c's), its bytes read as one linear stream and prefetched kPanelPrefetchBytes
// ahead into L1 (against the GGUF row order: docs/kernels.md, docs/measurements.md).
constexpr int64_t kPanelPrefetchBytes = 4096;

// Q4_K and Q5_K panels: each row's 16 sub-block scales and mins of a chunk (ns super-blocks)
// from its 16-byte headers, as block_consts computes them from a GGUF row.
inline void chunk_k_consts(const uint8_t* chunk, int64_t ns, float dc[][16], float mc[][16]) {
  for (int i = 0; i < kDecodeGroupRows; ++i) {
    const uint8_t* h = chunk + i * ns * 16;
    simd::q4k_consts(h, ns == 2 ? h + 16 : nullptr, dc[i], mc[i]);
  }
}

// Q4_K on decode panels: per chunk the rows' headers become 16 scales and mins each (q4k_consts);
// then each 32-byte run serves two sub-blocks, its low nibbles the first and its high nibbles the
// second, as deq32c reads them from a GGUF row.
void group_x1_panels_q4k(const WeightMatrix& w, int64_t r, const float* x, float* y) {
  constexpr int R = kDecodeGroupRows;
  constexpr int64_t bb = decode_scale_bytes(DType::Q4_K) + decode_quant_bytes(DType::Q4_K);
  const int64_t nb = w.cols / 32;
  const uint8_t* g = w.row_panels + (r / R) * nb * R * bb;
  const uint8_t* pf = g + kPanelPrefetchBytes;
  const __m512 iota = simd::iota16().v;
  __m512 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  alignas(64) float dc[R][16], mc[R][16];
  for (int64_t b0 = 0; b0 < nb; b0 += kDecodeChunkBlocks) {
    const int64_t n = std::min<int64_t>(kDecodeChunkBlocks, nb - b0), ns = n / 8;
    const uint8_t* chunk = g + b0 * R * bb;
    chunk_k_consts(chunk, ns, dc, mc);
    const uint8_t* q = chunk + R * ns * 16;
    for (int64_t j = 0; j < n; j += 2, q += R * 32) {
      for (int64_t o = 0; o < R * 2 * bb; o += 64) _mm_prefetch(reinterpret_cast<const char*>(pf + o), _MM_HINT_T0);
      pf += R * 2 * bb;
      const float* xb = x + 32 * (b0 + j);
      const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16), x2 = _mm512_loadu_ps(xb + 32),
                   x3 = _mm512_loadu_ps(xb + 48);
      for (int i = 0; i < R; ++i) {
        const uint8_t* qi = q + i * 32;
        const V16 lo{_mm512_fmadd_ps(_mm512_set1_ps(dc[i][j]), iota, _mm512_set1_ps(mc[i][j]))};
        const V16 hi{_mm512_fmadd_ps(_mm512_set1_ps(dc[i][j + 1]), iota, _mm512_set1_ps(mc[i][j + 1]))};
        acc[i] = _mm512_fmadd_ps(simd::lookup_nibbles16(qi, false, lo).v, x0, acc[i]);
        acc[i] = _mm512_fmadd_ps(simd::lookup_nibbles16(qi + 16, false, lo).v, x1, acc[i]);
        acc[i] = _mm512_fmadd_ps(simd::lookup_nibbles16(qi, true, hi).v, x2, acc[i]);
        acc[i] = _mm512_fmadd_ps(simd::lookup_nibbles16(qi + 16, true, hi).v, x3, acc[i]);
      }
    }
  }
  for (int i = 0; i < R; ++i) y[r + i] = simd::reduce16(V16{acc[i]});
}

// One panel block's weights from its constants dc, mc (the chunk's, as group_x1_panels reads
// them): the values deq32 gives from the GGUF row. Q5_0/Q5_1/Q5_K: the 5-bit tables on the panel
// order (Q5_K's sub-blocks are Q5_1-shaped with d·sc and −dmin·m); Q6_K: its halves' scales
// times the q − 32 bytes; the others as deq32c.
template <DType Q>
inline void deq32_panel_q(const uint8_t* q, float dc, float mc, V16& w0, V16& w1) {
  if constexpr (Q == DType::Q5_0 || Q == DType::Q5_1) simd::deq32_q5_panel<Q>(q, dc, mc, w0, w1);
  else if constexpr (Q == DType::Q5_K) simd::deq32_q5_panel<DType::Q5_1>(q, dc, mc, w0, w1);
  else if constexpr (Q == DType::Q6_K) {
    w0 = simd::mul16(simd::set16(dc), simd::i8x16(reinterpret_cast<const int8_t*>(q)));
    w1 = simd::mul16(simd::set16(mc), simd::i8x16(reinterpret_cast<const int8_t*>(q + 16)));
  } else simd::deq32q<Q>(q, dc, Q == DType::Q4_1 ? mc : 0.0f, w0, w1);
}

template <DType T>
void group_x1_panels(const WeightMatrix& w, int64_t r, const float* x, float* y) {
  constexpr int R = kDecodeGroupRows;
  constexpr int64_t sb = decode_scale_bytes(T), qb = decode_quant_bytes(T), bb = sb + qb;
  const int64_t nb = w.cols / 32;
  const uint8_t* g = w.row_panels + (r / R) * nb * R * bb;
  const uint8_t* pf = g + kPanelPrefetchBytes;
  __m512 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  alignas(64) float dc[R][16], mc[R][16];
  for (int64_t b0 = 0; b0 < nb; b0 += kDecodeChunkBlocks) {
    const int n = static_cast<int>(std::min<int64_t>(kDecodeChunkBlocks, nb - b0));
    const uint8_t* chunk = g + b0 * R * bb;
    if constexpr (T == DType::A4G64) {  // one scale and bias per pair of blocks, each widened to both
      const int ns = n / 2;
      const __mmask16 k = static_cast<__mmask16>((1u << ns) - 1);
      const __m512i pairs = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
      for (int i = 0; i < R; ++i) {
        _mm512_store_ps(dc[i], _mm512_permutexvar_ps(pairs, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, chunk + i * ns * 2))));
        _mm512_store_ps(mc[i], _mm512_permutexvar_ps(pairs, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, chunk + (R + i) * ns * 2))));
      }
    } else if constexpr (T == DType::Q5_K) {  // Q4_K's headers
      chunk_k_consts(chunk, n / 8, dc, mc);
    } else if constexpr (T == DType::Q6_K) {  // the halves' scales d·sc as q6k_half_scales: evens to dc, odds to mc
      const __m512i split = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
      for (int i = 0; i < R; ++i)
        for (int s = 0; s < n / 8; ++s) {
          const uint8_t* h = chunk + (i * (n / 8) + s) * kQ6KPanelHeader;
          const __m512 sc = _mm512_mul_ps(_mm512_set1_ps(simd::half_at(h + 16)),
                                          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)))));
          const __m512 v = _mm512_permutexvar_ps(split, sc);
          _mm256_storeu_ps(dc[i] + 8 * s, _mm512_castps512_ps256(v));
          _mm256_storeu_ps(mc[i] + 8 * s, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        }
    } else {
      const __mmask16 k = static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1);
      for (int i = 0; i < R; ++i) {
        _mm512_store_ps(dc[i], _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, chunk + i * n * 2)));
        if constexpr (simd::has_block_min(T))  // Q4_1, Q5_1 (A4G64 above)
          _mm512_store_ps(mc[i], _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, chunk + (R + i) * n * 2)));
      }
    }
    // an A4G64 block is a Q4_1 block with its group's scale and bias (deq32c reads it so)
    constexpr DType Q = T == DType::A4G64 ? DType::Q4_1 : T;
    const uint8_t* q = chunk + R * n * sb;
    for (int j = 0; j < n; ++j, q += R * qb) {
      for (int64_t o = 0; o < R * bb; o += 64) _mm_prefetch(reinterpret_cast<const char*>(pf + o), _MM_HINT_T0);
      pf += R * bb;
      const int64_t b = b0 + j;
      const __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
      for (int i = 0; i < R; ++i) {
        V16 w0, w1;
        deq32_panel_q<Q>(q + i * qb, dc[i][j], mc[i][j], w0, w1);
        acc[i] = _mm512_fmadd_ps(w0.v, x0, acc[i]);
        acc[i] = _mm512_fmadd_ps(w1.v, x1, acc[i]);
      }
    }
  }
  for (int i = 0; i < R; ++i) y[r + i] = simd::reduce16(V16{acc[i]});
}

// Block b of a Q5_0/Q5_1/Q5_K/Q6_K row read from its decode panel (panel_block): its constants
// from the panel, then deq32_panel_q (the weights deq32 gives from the GGUF row).
template <DType T>
inline void deq32_panel(const PanelBlock& p, int64_t b, V16& w0, V16& w1) {
  float dc, mc = 0.0f;
  if constexpr (T == DType::Q5_0 || T == DType::Q5_1) {
    dc = simd::half_at(p.d);
    if constexpr (T == DType::Q5_1) mc = simd::half_at(p.m);
  } else if constexpr (T == DType::Q5_K) {  // the header is the file's: Q4_K's scales and mins
    q4k_sub_scale_min(p.d, static_cast<int>(b % 8), dc, mc);
  } else {  // Q6_K: header sc[16], d
    const int j = static_cast<int>(b % 8);
    const float d = simd::half_at(p.d + 16);
    dc = d * static_cast<float>(static_cast<int8_t>(p.d[2 * j]));
    mc = d * static_cast<float>(static_cast<int8_t>(p.d[2 * j + 1]));
  }
  deq32_panel_q<T>(p.q, dc, mc, w0, w1);
}

// Prefill micro-kernel on packed operands: R rows x TT tokens, both stored chunk-interleaved
// ([chunk][R or TT][16] floats) so each operand is one sequential stream. The last chunk is
// masked to K's tail, so padded lanes leave the accumulators untouched, exactly as ref/ does.
template <int R, int TT>
inline void block_packed(const float* wp, const float* xp, int64_t chunks, __mmask16 last_mask, float out[R][TT]) {
  __m512 acc[R][TT];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < TT; ++j) acc[i][j] = _mm512_setzero_ps();
  const int64_t full = last_mask == 0xffff ? chunks : chunks - 1;
  for (int64_t c = 0; c < full; ++c) {
    const float* xc = xp + c * 16 * TT;
    const float* wc = wp + c * 16 * R;
    __m512 xv[TT];
    for (int j = 0; j < TT; ++j) xv[j] = _mm512_loadu_ps(xc + 16 * j);
    for (int i = 0; i < R; ++i) {
      const __m512 wv = _mm512_loadu_ps(wc + 16 * i);
      for (int j = 0; j < TT; ++j) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
    }
  }
  if (full < chunks) {
    const float* xc = xp + full * 16 * TT;
    const float* wc = wp + full * 16 * R;
    __m512 xv[TT];
    for (int j = 0; j < TT; ++j) xv[j] = _mm512_loadu_ps(xc + 16 * j);
    for (int i = 0; i < R; ++i) {
      const __m512 wv = _mm512_loadu_ps(wc + 16 * i);
      for (int j = 0; j < TT; ++j) acc[i][j] = _mm512_mask3_fmadd_ps(wv, xv[j], acc[i][j], last_mask);
    }
  }
  // out[i][j] = reduce16(acc[i][j]), 16 at a time with one shuffle tree
  constexpr int kOut = R * TT;
  for (int n0 = 0; n0 < kOut; n0 += 16) {
    V16 v[16];
    for (int n = 0; n < 16; ++n) v[n] = V16{n0 + n < kOut ? acc[(n0 + n) / TT][(n0 + n) % TT] : _mm512_setzero_ps()};
    alignas(64) float r[16];
    simd::store16(r, simd::reduce16x16(v));
    for (int n = 0; n < 16 && n0 + n < kOut; ++n) out[(n0 + n) / TT][(n0 + n) % TT] = r[n];
  }
}

// 6 rows x 4 tokens: 24 accumulators + 4 x + 1 w of the 32 zmm registers. Each x vector (streamed
// from L2) serves 6 rows; the best of the register blocks tried (docs/measurements.md, "Design
// choices").
constexpr int kMmRows = 6, kMmTokens = 4;

// Prefill: rows dequantized per panel into wbuf, tokens packed per L2-sized chunk, then the
// R x TT register block over every (row group, token group).
template <DType T>
void prefill_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y, int64_t ys) {
  const int64_t K = w.cols;
  const int64_t full = K / 16, rem = K % 16, chunks = full + (rem ? 1 : 0);
  const __mmask16 last_mask = rem ? static_cast<__mmask16>((1u << rem) - 1) : static_cast<__mmask16>(0xffff);
  constexpr int64_t R = kMmRows, TT = kMmTokens;
  // Cache blocking: a panel of up to kPanel dequantized rows and a chunk of tokens together
  // stay within L2. Rows and tokens are padded to multiples of R and TT with zeros; padded
  // results are never stored.
  constexpr int64_t kPanel = 64 / R * R;
  const int64_t tokens_per_chunk = std::max<int64_t>(TT, (256 * 1024 / 4) / (chunks * 16) / TT * TT);
  thread_local std::vector<float> wbuf, xbuf;
  wbuf.resize(static_cast<size_t>(kPanel * chunks * 16));
  xbuf.resize(static_cast<size_t>((tokens_per_chunk + TT - 1) / TT * TT * chunks * 16));
  for (int64_t p0 = r0; p0 < r1; p0 += kPanel) {
    const int64_t np = std::min<int64_t>(kPanel, r1 - p0), npR = (np + R - 1) / R * R;
    // pack: wbuf[group][chunk][row in group][16]
    for (int64_t i = 0; i < npR; ++i) {
      float* base = wbuf.data() + (i / R) * chunks * 16 * R + (i % R) * 16;
      if (i >= np) {
        for (int64_t c = 0; c < chunks; ++c) _mm512_storeu_ps(base + c * 16 * R, _mm512_setzero_ps());
        continue;
      }
      const uint8_t* row = w.data + (p0 + i) * w.row_stride;
      if constexpr (T == DType::Q5_0 || T == DType::Q5_1 || T == DType::Q5_K || T == DType::Q6_K) {
        if (w.row_panels) {  // dequantized from the panels in place (cheaper than rebuilding GGUF bytes)
          for (int64_t b = 0; b < K / 32; ++b) {
            V16 w0, w1;
            deq32_panel<T>(panel_block(w, p0 + i, b), b, w0, w1);
            _mm512_storeu_ps(base + (2 * b) * 16 * R, w0.v);
            _mm512_storeu_ps(base + (2 * b + 1) * 16 * R, w1.v);
          }
          continue;
        }
      }
      if (w.row_panels) {  // the row rebuilt from the panels, so the GGUF bytes stay untouched
        thread_local std::vector<uint8_t> rowbuf;
        rowbuf.resize(w.row_stride);
        decode_panel_row(w, p0 + i, rowbuf.data());
        row = rowbuf.data();
      }
      if constexpr (is_block32(T)) {
        for (int64_t b = 0; b < K / 32; ++b) {
          V16 w0, w1;
          deq32<T>(row, b, w0, w1);
          _mm512_storeu_ps(base + (2 * b) * 16 * R, w0.v);
          _mm512_storeu_ps(base + (2 * b + 1) * 16 * R, w1.v);
        }
      } else {
        for (int64_t c = 0; c < full; ++c) _mm512_storeu_ps(base + c * 16 * R, deq16<T>(row, c).v);
      }
      if (rem) _mm512_storeu_ps(base + full * 16 * R, deq_tail(w.type, row, full, static_cast<int>(rem)).v);
    }
    for (int64_t t0 = 0; t0 < m; t0 += tokens_per_chunk) {
      const int64_t tc = std::min(tokens_per_chunk, m - t0), tcT = (tc + TT - 1) / TT * TT;
      // pack: xbuf[token group][chunk][token in group][16]
      for (int64_t t = 0; t < tcT; ++t) {
        float* base = xbuf.data() + (t / TT) * chunks * 16 * TT + (t % TT) * 16;
        if (t >= tc) {
          for (int64_t c = 0; c < chunks; ++c) _mm512_storeu_ps(base + c * 16 * TT, _mm512_setzero_ps());
          continue;
        }
        const float* xr = x + (t0 + t) * xs;
        for (int64_t c = 0; c < full; ++c) _mm512_storeu_ps(base + c * 16 * TT, _mm512_loadu_ps(xr + 16 * c));
        if (rem) _mm512_storeu_ps(base + full * 16 * TT, _mm512_maskz_loadu_ps(last_mask, xr + 16 * full));
      }
      for (int64_t g = 0; g < npR / R; ++g) {
        const float* wp = wbuf.data() + g * chunks * 16 * R;
        for (int64_t tg = 0; tg < tcT / TT; ++tg) {
          float out[R][TT];
          block_packed<R, TT>(wp, xbuf.data() + tg * chunks * 16 * TT, chunks, last_mask, out);
          for (int i = 0; i < R && R * g + i < np; ++i)
            for (int j = 0; j < TT && TT * tg + j < tc; ++j) y[(t0 + TT * tg + j) * ys + p0 + R * g + i] = out[i][j];
        }
      }
    }
  }
}

template <DType T>
void matmul_rows_t(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m,
                   int64_t xs, float* y, int64_t ys) {
  if (m == 1) {
    int64_t r = r0;
    if constexpr (supports_decode_panels(T)) {
      if (w.row_panels && r0 % kDecodeGroupRows == 0) {
        for (; r + kDecodeGroupRows <= r1; r += kDecodeGroupRows) {
          if constexpr (T == DType::Q4_K) group_x1_panels_q4k(w, r, x, y);
          else group_x1_panels<T>(w, r, x, y);
        }
        for (; r < r1; ++r) rows_x1<T, 1>(w, r, x, y);  // a range ending inside a group: the GGUF rows
        return;
      }
    }
    prefetch_first_rows(w, r0, r1);
    for (; r + 8 <= r1; r += 8) {
      const RowsAhead pf = rows_ahead(w, r, r1);
      rows_x1<T, 8>(w, r, x, y, pf.data, pf.bytes);
    }
    for (; r + 4 <= r1; r += 4) rows_x1<T, 4>(w, r, x, y);
    for (; r < r1; ++r) rows_x1<T, 1>(w, r, x, y);
    return;
  }
  prefill_rows<T>(w, r0, r1, x, m, xs, y, ys);
}

// In-register 16x16 transpose: r[i] lane j becomes r[j] lane i (unpack, 64-bit unpack, then two
// rounds of 128-bit lane shuffles).
inline void transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 2]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 1]), d = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  for (int j = 0; j < 4; ++j) {  // u[4g + j], 128-bit lane L: rows 4g..4g+3 at column j + 4L
    const __m512 v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), w = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88), w2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_f32x4(v, v2, 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(v, v2, 0xDD);
    r[j + 4] = _mm512_shuffle_f32x4(w, w2, 0x88);
    r[j + 12] = _mm512_shuffle_f32x4(w, w2, 0xDD);
  }
}

// GEMM micro-kernel: 32 weight rows (two registers, packed k-major) x MT tokens over one k block
// [k0, k0 + kc); every output lane is one FMA chain over k, as ref::gemm_rows. The chain runs on
// across k blocks through y: the first block starts from zero, later ones reload the partial
// sums (exact floats), so blocking k changes no bit.
template <int MT>
void gemm_kernel(const float* wp, const float* x, int64_t xs, int64_t kc, float* y, int64_t ys, __mmask16 m0,
                 __mmask16 m1, bool first) {
  __m512 a0[MT], a1[MT];
  for (int i = 0; i < MT; ++i) {
    a0[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, y + i * ys);
    a1[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, y + i * ys + 16);
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 w0 = _mm512_loadu_ps(wp + 32 * k), w1 = _mm512_loadu_ps(wp + 32 * k + 16);
    for (int i = 0; i < MT; ++i) {
      const __m512 xb = _mm512_set1_ps(x[i * xs + k]);
      a0[i] = _mm512_fmadd_ps(xb, w0, a0[i]);
      a1[i] = _mm512_fmadd_ps(xb, w1, a1[i]);
    }
  }
  for (int i = 0; i < MT; ++i) {
    _mm512_mask_storeu_ps(y + i * ys, m0, a0[i]);
    _mm512_mask_storeu_ps(y + i * ys + 16, m1, a1[i]);
  }
}

template <int... MT>
void gemm_kernel_n(int mt, std::integer_sequence<int, MT...>, const float* wp, const float* x, int64_t xs, int64_t kc,
                   float* y, int64_t ys, __mmask16 m0, __mmask16 m1, bool first) {
  (void)((mt == MT + 1 && (gemm_kernel<MT + 1>(wp, x, xs, kc, y, ys, m0, m1, first), true)) || ...);
}

// Cache blocking: the rows of a call are taken kRowBlock at a time and packed whole (32-row
// panels, k-major, 16 rows per in-register transpose); then each group of 12 tokens runs past all
// panels of the block, so its x rows (12 x kKBlock floats, 36 KiB) stay in L1 while the panels
// stream from L2. k runs in blocks of kKBlock only for longer rows (fc2's K = 3072), whose x rows
// would not fit. Measured on this machine's shapes: blocks of 192 or 384 lose 5-15% to the
// per-block reload of the accumulators and to L2 traffic, running all panels per token group beats
// all token groups per panel (W panel in L1) by 5-25%.
constexpr int64_t kGemmTokens = 12, kRowBlock = 256, kKBlock = 768;

template <DType T>
void gemm_rows_t(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
                 int64_t ys) {
  const int64_t K = w.cols, K16 = (K + 15) / 16 * 16;
  // Panels repacked at load (gemm_panels.h) hold exactly the layout built below, in the weights'
  // type: f32 panels are used in place, f16/bf16 ones widened in one sequential pass.
  constexpr bool dense = supports_gemm_panels(T);
  const bool prepacked = dense && w.gemm_panels && r0 % 32 == 0;
  thread_local std::vector<float> rows16, wp;
  if (!prepacked) rows16.resize(static_cast<size_t>(16 * K16));
  if (!prepacked || T != DType::F32) wp.resize(static_cast<size_t>(kRowBlock * K));
  for (int64_t b0 = r0; b0 < r1; b0 += kRowBlock) {
    const int64_t nrows = std::min(kRowBlock, r1 - b0), panels = (nrows + 31) / 32;
    const float* wblock = wp.data();
    if (prepacked) {
      const uint8_t* src = w.gemm_panels + b0 * K * (T == DType::F32 ? 4 : 2);
      if constexpr (T == DType::F32) {
        wblock = reinterpret_cast<const float*>(src);
      } else if constexpr (dense) {
        for (int64_t c = 0; c < panels * 2 * K; ++c) _mm512_storeu_ps(wp.data() + 16 * c, deq16<T>(src, c).v);
      }
    } else {
      // pack 16 rows at a time: dequantize them into rows16, then 16x16 transposes into the panel
      for (int64_t g = 0; g < panels * 2; ++g) {
        for (int64_t i = 0; i < 16; ++i) {
          float* row = rows16.data() + i * K16;
          if (16 * g + i >= nrows) {
            std::fill(row, row + K16, 0.0f);
            continue;
          }
          simd::deq_row<T>(w.data + (b0 + 16 * g + i) * w.row_stride, K, row);
        }
        float* dst = wp.data() + (g / 2) * 32 * K + (g % 2) * 16;
        for (int64_t c = 0; c < K16 / 16; ++c) {
          __m512 v[16];
          for (int i = 0; i < 16; ++i) v[i] = _mm512_loadu_ps(rows16.data() + i * K16 + 16 * c);
          transpose16x16(v);
          for (int64_t j = 0; j < 16 && 16 * c + j < K; ++j) _mm512_storeu_ps(dst + (16 * c + j) * 32, v[j]);
        }
      }
    }
    for (int64_t k0 = 0; k0 < K; k0 += kKBlock) {
      const int64_t kc = std::min(kKBlock, K - k0);
      for (int64_t t0 = 0; t0 < m; t0 += kGemmTokens) {
        const int mt = static_cast<int>(std::min(kGemmTokens, m - t0));
        for (int64_t p = 0; p < panels; ++p) {
          const int np = static_cast<int>(std::min<int64_t>(32, nrows - 32 * p));
          const __mmask16 m0 = static_cast<__mmask16>(np >= 16 ? 0xffff : (1u << np) - 1);
          const __mmask16 m1 = static_cast<__mmask16>(np <= 16 ? 0 : np >= 32 ? 0xffff : (1u << (np - 16)) - 1);
          const float* wb = wblock + p * 32 * K + k0 * 32;
          gemm_kernel_n(mt, std::make_integer_sequence<int, kGemmTokens>{}, wb, x + t0 * xs + k0, xs, kc,
                        y + t0 * ys + b0 + 32 * p, ys, m0, m1, k0 == 0);
        }
      }
    }
  }
}

}  // namespace

void gemm_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
               int64_t ys) {
  if (!simd::with_weight_type(w.type, [&](auto T) { gemm_rows_t<decltype(T)::value>(w, r0, r1, x, m, xs, y, ys); }))
    ref::gemm_rows(w, r0, r1, x, m, xs, y, ys);
}

void matmul_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m,
                 int64_t xs, float* y, int64_t ys) {
  if (!simd::with_weight_type(w.type, [&](auto T) { matmul_rows_t<decltype(T)::value>(w, r0, r1, x, m, xs, y, ys); }))
    ref::matmul_rows(w, r0, r1, x, m, xs, y, ys);
}

}  // namespace tessera::avx512
