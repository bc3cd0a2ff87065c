// 8-bit-activation matmul with AVX-512 VNNI over the 16-row panels of q8_panels.h. A panel
// vector holds 4 consecutive weights of each of 16 rows; one vpdpbusd against 4 activation
// bytes broadcast to every lane adds them into 16 row sums, so 8 vpdpbusd finish a block for
// 16 rows with nothing left to reduce. The float steps per block (kernels.h) are then 16 lanes
// wide: the scalar twin's, lane for lane, so results are bitwise equal to ref/.
//
// vpdpbusd multiplies unsigned weight bytes by signed activation bytes. Q4_0 feeds q (0..15)
// for q − 8, Q5_0 q (0..31) for q − 16 and Q8_0 w + 128 for w (IQ4_NL/IQ4_XS: their nibble's
// level + 128, looked up), so their block sums start at −8·Σx, −16·Σx and −128·Σx: integers, exact. Q6_K feeds q (0..63) for q − 32, and its two
// 16-element halves, which have their own scales, are two sums per token, each starting at −32
// times its half's Σx. A tile is 16 rows × up to 8 tokens: the block's 8 weight vectors are
// unpacked once and used for every token of the tile.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/q8_panels.h"
#include "kernels/x86/x86_common.h"

namespace tessera::avx512 {

namespace {

typedef int32_t unaligned_i32 __attribute__((may_alias, aligned(1)));

inline int32_t dword_at(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// s += g · (the 4 bytes at p in every lane), read by the instruction's own {1to16} broadcast.
// GCC emits a separate vpbroadcastd instead, one more uop per vpdpbusd: in a prefill tile the
// front end, not the vpdpbusd ports, was then the limit (1.09x from this alone).
inline __m512i dpbusd_bcast(__m512i s, __m512i g, const int8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(g), "m"(*reinterpret_cast<const unaligned_i32*>(p)));
  return s;
}

// One block (8 weight vectors g) against NT tokens' block b: the float steps of kernels.h, token
// after token, with two half-length chains per token so that with one or two tokens a block's
// 8 dependent vpdpbusd do not bound the tile by their latency (Q6_K's halves have their own
// scales). Decode's tiles (one token, weights streamed from L3/DRAM) keep the compiler's broadcasts.
// Q2_K's half mins (−dmin·m of each half), times the half's Σx and d_x: the scalar twin's last two steps.
inline __m512 q2k_min_steps(__m512 acc, const BlockQ8_1& xb, __m512 mlo, __m512 mhi) {
  const __m512 dx = _mm512_set1_ps(xb.d);
  acc = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(xb.sum_lo)), _mm512_mul_ps(mlo, dx), acc);
  return _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(xb.sum - xb.sum_lo)), _mm512_mul_ps(mhi, dx), acc);
}

template <DType T, int NT>
inline void block_tokens_chains(const __m512i g[8], __m512 d, __m512 m, const BlockQ8_1* x, int64_t xs, int64_t b,
                                __m512 acc[NT], __m512 mlo = _mm512_setzero_ps(), __m512 mhi = _mm512_setzero_ps()) {
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
    const BlockQ8_1& xb = x[t * xs + b];
    constexpr int off = q8_offset(T);
    __m512i s = _mm512_set1_epi32(-off * (q8_two_halves(T) ? xb.sum_lo : xb.sum));
    __m512i s2 = _mm512_set1_epi32(q8_two_halves(T) ? -off * (xb.sum - xb.sum_lo) : 0);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      s = _mm512_dpbusd_epi32(s, g[v], _mm512_set1_epi32(dword_at(xb.q + 4 * v)));
      s2 = _mm512_dpbusd_epi32(s2, g[v + 4], _mm512_set1_epi32(dword_at(xb.q + 4 * v + 16)));
    }
    if constexpr (q8_two_halves(T)) {  // d: the first half's d·sc, m: the second's
      const __m512 dx = _mm512_set1_ps(xb.d);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, dx), acc[t]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s2), _mm512_mul_ps(m, dx), acc[t]);
      if constexpr (T == DType::Q2_K) acc[t] = q2k_min_steps(acc[t], xb, mlo, mhi);
      continue;
    }
    s = _mm512_add_epi32(s, s2);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(xb.d)), acc[t]);
    if constexpr (q8_has_min(T)) acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(xb.s), acc[t]);
  }
}

// The same for tiles of 4+ tokens (prefill): one vpdpbusd chain per token, the tokens
// interleaved so that NT independent chains are in flight at each step (token after token, the
// scheduler filled up with a chain's waiting vpdpbusd: 1.05x). Fewer tokens (decode) take
// block_tokens_chains.
template <DType T, int NT>
inline void block_tokens(const __m512i g[8], __m512 d, __m512 m, const BlockQ8_1* x, int64_t xs, int64_t b,
                         __m512 acc[NT], const int32_t* start, __m512 mlo = _mm512_setzero_ps(),
                         __m512 mhi = _mm512_setzero_ps()) {
  if constexpr (NT < 4) {
    block_tokens_chains<T, NT>(g, d, m, x, xs, b, acc, mlo, mhi);
  } else if constexpr (q8_two_halves(T)) {  // two sums per token (the halves' scales): 4 tokens at a time
    static_assert(NT % 4 == 0);
#pragma GCC unroll 2
    for (int t0 = 0; t0 < NT; t0 += 4) {
      __m512i lo[4], hi[4];
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {  // -offset times each half's sum (q8_panels' start table; Q2_K: 0)
        lo[t] = q8_offset(T) ? _mm512_set1_epi32(start[2 * (t0 + t)]) : _mm512_setzero_si512();
        hi[t] = q8_offset(T) ? _mm512_set1_epi32(start[2 * (t0 + t) + 1]) : _mm512_setzero_si512();
      }
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v)
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) {
          const int8_t* q = x[(t0 + t) * xs + b].q;
          lo[t] = dpbusd_bcast(lo[t], g[v], q + 4 * v);
          hi[t] = dpbusd_bcast(hi[t], g[v + 4], q + 4 * v + 16);
        }
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {  // d: the first half's d·sc, m: the second's
        const __m512 dx = _mm512_set1_ps(x[(t0 + t) * xs + b].d);
        acc[t0 + t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo[t]), _mm512_mul_ps(d, dx), acc[t0 + t]);
        acc[t0 + t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi[t]), _mm512_mul_ps(m, dx), acc[t0 + t]);
        if constexpr (T == DType::Q2_K) acc[t0 + t] = q2k_min_steps(acc[t0 + t], x[(t0 + t) * xs + b], mlo, mhi);
      }
    }
  } else {
    __m512i s[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) s[t] = q8_offset(T) ? _mm512_set1_epi32(start[t]) : _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v)
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) s[t] = dpbusd_bcast(s[t], g[v], x[t * xs + b].q + 4 * v);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_1& xb = x[t * xs + b];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(d, _mm512_set1_ps(xb.d)), acc[t]);
      if constexpr (q8_has_min(T)) acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(xb.s), acc[t]);
    }
  }
}

// Block quants of a 5- or 6-bit panel block (q8_panels.h) as 8 weight vectors: the nibbles, and
// each g[G]'s high bits shifted to bits 4.. of its bytes.
template <DType T>
inline void unpack_high_bit_block(const uint8_t* q, __m512i g[8]) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  if constexpr (q8_high_bits(T) == 1) {
    const __m512i h = _mm512_load_si512(q + 256), m5 = _mm512_set1_epi8(0x10);
    // g[v] | (bit v of each byte, moved to bit 4): vpternlogd 0xF8 is a | (b & c)
    const __m512i hs[8] = {_mm512_slli_epi32(h, 4), _mm512_slli_epi32(h, 3), _mm512_slli_epi32(h, 2),
                           _mm512_slli_epi32(h, 1), h, _mm512_srli_epi32(h, 1), _mm512_srli_epi32(h, 2),
                           _mm512_srli_epi32(h, 3)};
    for (int v = 0; v < 4; ++v) {
      const __m512i p = _mm512_load_si512(q + 64 * v);
      g[v] = _mm512_ternarylogic_epi32(_mm512_and_si512(p, m4), hs[v], m5, 0xF8);
      g[v + 4] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(p, 4), m4), hs[v + 4], m5, 0xF8);
    }
  } else {
    const __m512i h0 = _mm512_load_si512(q + 256), h1 = _mm512_load_si512(q + 320), m6 = _mm512_set1_epi8(0x30);
    const __m512i hs[8] = {_mm512_slli_epi32(h0, 4), _mm512_slli_epi32(h0, 2), h0, _mm512_srli_epi32(h0, 2),
                           _mm512_slli_epi32(h1, 4), _mm512_slli_epi32(h1, 2), h1, _mm512_srli_epi32(h1, 2)};
    for (int v = 0; v < 4; ++v) {
      const __m512i p = _mm512_load_si512(q + 64 * v);
      g[v] = _mm512_ternarylogic_epi32(_mm512_and_si512(p, m4), hs[v], m6, 0xF8);
      g[v + 4] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(p, 4), m4), hs[v + 4], m6, 0xF8);
    }
  }
}

// Prefetch distances (bytes) for the one-token case, which streams the panels from L3 or DRAM.
constexpr int64_t kAhead = 4096, kAheadL2 = 16384;

// Decode's prefetch: the panels as one linear stream, kAheadL2 bytes ahead into L2 and kAhead
// into L1, step_bytes (a panel's bytes over its steps, a step being one block or a Q4_K pair)
// per step of panel_tile, in a fixed, unrolled count of instructions. The loop of a general
// stream (PrefetchStream) held a one-token Q4_1 tile to 29 GB/s with its weights in L2, below the
// L3's rate (54 without prefetching, 44 with this); prefetching each block's quants and scales
// at their own distance instead (two streams per panel) cost the K-quants a third of their DRAM
// rate. Lines past the matrix's end are fetched harmlessly. (x86::prefetch_l1/l2 are asm, which
// the compiler cannot drop.)
template <DType T>
constexpr int64_t kPanelStep = T == DType::Q4_K ? 2 : 1;  // blocks per step of panel_tile (a Q4_K pair shares its bytes)

template <DType T>
constexpr int stream_lines() {  // an unaligned span of S bytes touches at most ceil((S + 63) / 64) lines
  constexpr int64_t scale = q8_super_scales(T) ? static_cast<int64_t>(k_scale_super_bytes(T)) / 8 : static_cast<int64_t>(panel_scale_bytes(T));
  return static_cast<int>(((static_cast<int64_t>(panel_quant_bytes(T)) + scale) * kPanelStep<T> + 63 + 63) / 64);
}

template <DType T>
inline void prefetch_step(const uint8_t* stream) {
  constexpr int lines = stream_lines<T>();
#pragma GCC unroll 16
  for (int l = 0; l < lines; ++l) {
    x86::prefetch_l2(stream + kAheadL2 + 64 * l);
    x86::prefetch_l1(stream + kAhead + 64 * l);
  }
}

// All blocks of one panel against NT tokens (x: token t's blocks at x + t*xs).
template <DType T, int NT>
void panel_tile(const uint8_t* panel, int64_t step_bytes, int64_t nb, const BlockQ8_1* x, int64_t xs, __m512 acc[NT],
                const int32_t* start, int64_t start_stride) {
  const uint8_t* quants = panel;
  const uint8_t* scales = panel + nb * static_cast<int64_t>(panel_quant_bytes(T));
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m512 d, m = _mm512_setzero_ps();
  __m512i g[8];
  // decode (one or two tokens): the panels kept in flight into L2 and L1
  constexpr int64_t step = kPanelStep<T>;
  for (int64_t b = 0; b < nb; b += step) {
    const uint8_t* q = quants + b * static_cast<int64_t>(panel_quant_bytes(T));
    if constexpr (NT <= 2) prefetch_step<T>(panel + b / step * step_bytes);
    if constexpr (T == DType::Q8_0) {
      for (int v = 0; v < 8; ++v) g[v] = _mm512_load_si512(q + 64 * v);
      q8_block_scales<T>(scales, b, d, m);
      block_tokens<T, NT>(g, d, m, x, xs, b, acc, start + b * start_stride);
    } else if constexpr (T == DType::Q2_K) {  // 2-bit quants, four weight vectors to a byte
      const __m512i m2 = _mm512_set1_epi8(3), p0 = _mm512_load_si512(q), p1 = _mm512_load_si512(q + 64);
      for (int i = 0; i < 4; ++i) {
        g[i] = _mm512_and_si512(_mm512_srli_epi16(p0, 2 * i), m2);
        g[i + 4] = _mm512_and_si512(_mm512_srli_epi16(p1, 2 * i), m2);
      }
      __m512 mlo, mhi;
      q8_block_scales<T>(scales, b, d, m);
      q2k_block_mins(scales, b, mlo, mhi);
      block_tokens<T, NT>(g, d, m, x, xs, b, acc, start + b * start_stride, mlo, mhi);
    } else if constexpr (is_iq4(T)) {  // nibbles to level + 128: vpshufb looks up within each 128-bit lane
      const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlLevelsBiased)));
      for (int v = 0; v < 4; ++v) {
        const __m512i p = _mm512_load_si512(q + 64 * v);
        g[v] = _mm512_shuffle_epi8(lut, _mm512_and_si512(p, m4));
        g[v + 4] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(p, 4), m4));
      }
      q8_block_scales<T>(scales, b, d, m);
      block_tokens<T, NT>(g, d, m, x, xs, b, acc, start + b * start_stride);
    } else if constexpr (q8_high_bits(T) > 0) {
      unpack_high_bit_block<T>(q, g);
      q8_block_scales<T>(scales, b, d, m);
      block_tokens<T, NT>(g, d, m, x, xs, b, acc, start + b * start_stride);
    } else if constexpr (T == DType::Q4_K) {  // a block pair shares its bytes: low, then high nibbles
      __m512i p[8];
      for (int v = 0; v < 8; ++v) {
        p[v] = _mm512_load_si512(q + 64 * v);
        g[v] = _mm512_and_si512(p[v], m4);
      }
      q8_block_scales<T>(scales, b, d, m);
      block_tokens<T, NT>(g, d, m, x, xs, b, acc, start + b * start_stride);
      for (int v = 0; v < 8; ++v) g[v] = _mm512_and_si512(_mm512_srli_epi16(p[v], 4), m4);
      q8_block_scales<T>(scales, b + 1, d, m);
      block_tokens<T, NT>(g, d, m, x, xs, b + 1, acc, start + (b + 1) * start_stride);
    } else {
      for (int v = 0; v < 4; ++v) {
        const __m512i p = _mm512_load_si512(q + 64 * v);
        g[v] = _mm512_and_si512(p, m4);
        g[v + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), m4);
      }
      q8_block_scales<T>(scales, b, d, m);
      block_tokens<T, NT>(g, d, m, x, xs, b, acc, start + b * start_stride);
    }
  }
}

template <DType T, int NT>
inline void run_tile(const uint8_t* panel, int64_t step_bytes, int64_t nb, const BlockQ8_1* x, int64_t xs, float* y, int64_t ys,
                     __mmask16 keep, const int32_t* start, int64_t start_stride) {
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  panel_tile<T, NT>(panel, step_bytes, nb, x, xs, acc, start, start_stride);
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ys, keep, acc[t]);
}

// Tokens in chunks whose activations stay in L2 while every panel of the range passes over them.
constexpr int64_t kTokenChunk = 256;

template <DType T>
void q8_panels(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m, int64_t xs, float* y,
               int64_t ys) {
  const int64_t nb = w.cols / 32;
  // a panel's bytes per step of panel_tile, for decode's prefetch stream
  const int64_t step_bytes = static_cast<int64_t>(w.panel_stride) * kPanelStep<T> / nb;
  // Prefill tiles (4+ tokens) start each token's block sum at -offset times its activation sum
  // (Q6_K: per half), read from memory: set from a general register, the 8 values of a block step
  // took 8 of the ALU ports' slots the vpdpbusd need (bench/profile/vnni_tile_bound.py). Per
  // token chunk, start[b][token] (Q6_K: two per token).
  constexpr int kPer = q8_two_halves(T) ? 2 : 1;
  thread_local std::vector<int32_t> starts;
  const bool need_starts = q8_offset(T) != 0 && m >= 4;
  const int64_t start_stride = need_starts ? kPer * std::min<int64_t>(m, kTokenChunk) : 0;
  if (need_starts && starts.size() < static_cast<size_t>(nb * start_stride)) starts.resize(static_cast<size_t>(nb * start_stride));
  for (int64_t t0 = 0; t0 < m; t0 += kTokenChunk) {
    const int64_t t1 = std::min(m, t0 + kTokenChunk);
    if (need_starts)
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t t = t0; t < t1; ++t) {
          const BlockQ8_1& xb = xq[t * xs + b];
          int32_t* o = starts.data() + b * start_stride + kPer * (t - t0);
          if constexpr (q8_two_halves(T)) {
            o[0] = -q8_offset(T) * xb.sum_lo;
            o[1] = -q8_offset(T) * (xb.sum - xb.sum_lo);
          } else {
            o[0] = -q8_offset(T) * xb.sum;
          }
        }
    // token t's values, per block start_stride apart (none for the types without an offset)
    const auto start_at = [&](int64_t t) { return need_starts ? starts.data() + kPer * (t - t0) : nullptr; };
    for (int64_t p = r0 / kPanelRows; p * kPanelRows < r1; ++p) {
      const int64_t row = p * kPanelRows;
      const int lo = static_cast<int>(std::max(r0, row) - row), hi = static_cast<int>(std::min(r1, row + kPanelRows) - row);
      const __mmask16 keep = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
      const uint8_t* panel = w.panels + p * static_cast<int64_t>(w.panel_stride);
      float* yp = y + row;
      int64_t t = t0;
      for (; t + 8 <= t1; t += 8)
        run_tile<T, 8>(panel, step_bytes, nb, xq + t * xs, xs, yp + t * ys, ys, keep, start_at(t), start_stride);
      if (t + 4 <= t1) {
        run_tile<T, 4>(panel, step_bytes, nb, xq + t * xs, xs, yp + t * ys, ys, keep, start_at(t), start_stride);
        t += 4;
      }
      if (t + 2 <= t1) {
        run_tile<T, 2>(panel, step_bytes, nb, xq + t * xs, xs, yp + t * ys, ys, keep, nullptr, 0);
        t += 2;
      }
      if (t < t1) run_tile<T, 1>(panel, step_bytes, nb, xq + t * xs, xs, yp + t * ys, ys, keep, nullptr, 0);
    }
  }
}

}  // namespace

bool matmul_q8_rows_vnni(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                         int64_t xq_stride, float* y, int64_t ys) {
  switch (w.type) {
    case DType::Q4_0: q8_panels<DType::Q4_0>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q4_1:
    case DType::A4G64: q8_panels<DType::Q4_1>(w, r0, r1, xq, m, xq_stride, y, ys); return true;  // same panels
    case DType::Q8_0: q8_panels<DType::Q8_0>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q4_K: q8_panels<DType::Q4_K>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q5_0: q8_panels<DType::Q5_0>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q5_1: q8_panels<DType::Q5_1>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q5_K: q8_panels<DType::Q5_K>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q6_K: q8_panels<DType::Q6_K>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::IQ4_NL: q8_panels<DType::IQ4_NL>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::IQ4_XS: q8_panels<DType::IQ4_XS>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q3_K: q8_panels<DType::Q3_K>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q2_K: q8_panels<DType::Q2_K>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    default: return false;
  }
}

}  // namespace tessera::avx512
