// 8-bit-activation matmul (ggml's W4A8/W8A8 numerics) with AVX-512 VNNI. A zmm register holds
// the same 32-element block of two weight rows, one per 256-bit half, against the block's 32
// activation quants repeated in both halves. One vpdpbusd then yields both rows' 8 integer lane
// sums (lane j = products of elements 4j..4j+3), exactly ref/matmul_q8_ref.cpp's; the float
// steps after it (fma(d_w*d_x, lane, acc) per block in order, ggml's hsum_float_8, + the Q4_1
// min term summed block by block) are the scalar twin's too, so results are bitwise equal.
//
// vpdpbusd multiplies unsigned by signed bytes, so signed weights are shifted into 0..255:
// Q4_0 uses q (0..15) for q-8 and Q8_0 uses w+128 (w ^ 0x80), and the accumulator starts at
// -8 (or -128) times the activations' 4-element sums, computed once per call: integer sums,
// exact, so the lanes equal the signed dot products.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/x86/x86_common.h"

namespace tessera::avx512 {

namespace {

constexpr int64_t block_bytes(DType t) { return t == DType::Q8_0 ? 34 : t == DType::Q4_1 ? 20 : 18; }
// Types with unsigned quants (0..15) and a min term: Q4_1, and Q4_K's sub-blocks.
constexpr bool has_min(DType t) { return t == DType::Q4_1 || t == DType::Q4_K; }

// Block b's scale and min as the scalar twin computes them (Q4_K: d·sc and −(dmin·m)).
template <DType T>
inline void block_dm(const uint8_t* row, int64_t b, float& d, float& m) {
  if constexpr (T == DType::Q4_K) {
    const uint8_t* p = row + (b / 8) * kQ4KBytes;
    int sc, mn;
    q4k_scale_min(p + 4, static_cast<int>(b % 8), sc, mn);
    d = half_at(p) * static_cast<float>(sc);
    m = -(half_at(p + 2) * static_cast<float>(mn));
  } else {
    const uint8_t* p = row + b * block_bytes(T);
    d = half_at(p);
    m = T == DType::Q4_1 ? half_at(p + 2) : 0.0f;
  }
}

// Activations of one call in the layout the kernels read, built once per thread chunk.
struct Activations {
  int64_t m = 0, nb = 0, mpad = 0;
  std::vector<int8_t> x2;      // [t][b][64]: the block's quants in both 256-bit halves (+128 when
                               // `shifted`: prefill of signed weights, see PrefillPanel)
  std::vector<int32_t> start;  // [t][b][16]: decode's accumulator start (Q4_0/Q8_0: -c * 4-element sums)
  std::vector<float> dx;       // [t][nb + 16]: activation block scales (padded for 16-wide loads)
  std::vector<float> sx_t;     // [b][mpad]: Q4_1/Q4_K only, d*sum per block, token-major for vectors

  template <DType T>
  void build(const BlockQ8_1* xq, int64_t m_, int64_t nb_, int64_t stride, bool shifted) {
    m = m_;
    nb = nb_;
    mpad = (m + 15) / 16 * 16;
    x2.resize(static_cast<size_t>(m * nb * 64));
    const bool with_start = !has_min(T) && !shifted;
    if (with_start) start.resize(static_cast<size_t>(m * nb * 16));
    dx.assign(static_cast<size_t>(m * (nb + 16)), 0.0f);
    if constexpr (has_min(T)) sx_t.assign(static_cast<size_t>(nb * mpad), 0.0f);
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t t = 0; t < m; ++t) {
      const BlockQ8_1* xb = xq + t * stride;
      for (int64_t b = 0; b < nb; ++b) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].q));
        const __m512i q2 = _mm512_inserti64x4(_mm512_castsi256_si512(q), q, 1);
        _mm512_storeu_si512(x2.data() + (t * nb + b) * 64,
                            shifted ? _mm512_xor_si512(q2, _mm512_set1_epi8(static_cast<char>(0x80))) : q2);
        if (with_start) {
          const __m512i sum4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, q2);
          const __m512i s = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum4, T == DType::Q8_0 ? 7 : 3));
          _mm512_storeu_si512(start.data() + (t * nb + b) * 16, s);
        }
        dx[static_cast<size_t>(t * (nb + 16) + b)] = _cvtsh_ss(xb[b].d);
        if constexpr (has_min(T)) sx_t[static_cast<size_t>(b * mpad + t)] = _cvtsh_ss(xb[b].s);
      }
    }
  }
  const int8_t* x2_at(int64_t t, int64_t b) const { return x2.data() + (t * nb + b) * 64; }
  __m512i start_at(int64_t t, int64_t b) const {
    return _mm512_loadu_si512(start.data() + (t * nb + b) * 16);
  }
};

// Block b of rows A (low half) and B (high half) as the unsigned bytes vpdpbusd takes.
template <DType T>
inline __m512i pair_quants(const uint8_t* a, const uint8_t* bq) {
  if constexpr (T == DType::Q8_0) {
    const __m512i v = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 2))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq + 2)), 1);
    return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    constexpr int off = T == DType::Q4_1 ? 4 : 2;
    // each 16 nibble bytes twice: the low nibbles (elements 0..15) then, shifted, the high ones
    const __m256i pa = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + off)));
    const __m256i pb = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bq + off)));
    const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(pa), pb, 1);
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    return _mm512_and_si512(_mm512_srlv_epi64(v, shifts), _mm512_set1_epi8(0x0f));
  }
}

// One Q4_K super-block's 8 sub-block scales d·sc and mins −(dmin·m), as vectors. The fields are
// unpacked as q4k_scales_mins8 does, written out here: calling the helper measured 30% slower in
// this loop (7.8 vs 11.2 GB/s), for reasons of code generation rather than work.
inline void q4k_dm8(const uint8_t* p, __m256& d8, __m256& m8) {
  uint32_t u[3];
  std::memcpy(u, p + 4, 12);
  const uint32_t sc_lo = u[0] & 0x3f3f3f3fu, mn_lo = u[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  const uint32_t mn_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
  const __m128i sc = _mm_cvtsi64_si128(static_cast<int64_t>(static_cast<uint64_t>(sc_hi) << 32 | sc_lo));
  const __m128i mn = _mm_cvtsi64_si128(static_cast<int64_t>(static_cast<uint64_t>(mn_hi) << 32 | mn_lo));
  d8 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)), _mm256_set1_ps(half_at(p)));
  const __m256 mm = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn)), _mm256_set1_ps(half_at(p + 2)));
  m8 = _mm256_xor_ps(mm, _mm256_set1_ps(-0.0f));
}

// Q4_K block b (sub-block b % 8) of rows a and b: 32 bytes of nibbles, low or high.
inline __m512i pair_quants_k(const uint8_t* ra, const uint8_t* rb, int64_t b) {
  const int64_t off = (b / 8) * kQ4KBytes + 16 + 32 * ((b % 8) / 2);
  __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra + off))),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb + off)), 1);
  if (b % 2) v = _mm512_srli_epi16(v, 4);
  return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}

// Two 8-lane halves [d_a x 8 | d_b x 8].
inline __m512 halves(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
inline __m512 pair_scale(const float* da, const float* db) {
  return halves(_mm256_broadcast_ss(da), _mm256_broadcast_ss(db));
}

// ggml's hsum_float_8 of both 8-lane halves at once: r[i] = a[i+4] + a[i]; (r0 + r2) + (r1 + r3);
// the results land in lanes 0 (row A) and 8 (row B).
inline void hsum8_pair(__m512 v, float& ra, float& rb) {
  const __m512 r = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));  // swap the 128-bit halves of each 256
  const __m512 h = _mm512_add_ps(r, _mm512_permute_ps(r, 0x4E));         // lane 0: r0 + r2, lane 1: r1 + r3
  const __m512 f = _mm512_add_ps(h, _mm512_permute_ps(h, 0xB1));         // lane 0: (r0 + r2) + (r1 + r3)
  ra = _mm512_cvtss_f32(f);
  rb = _mm256_cvtss_f32(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
}

// Decode: 2P rows (P pairs, P <= 4) against one token, weights read straight from their
// blocks. rows[] may repeat a row to fill the last pair; only the first n_out results are
// stored. Each block's scales (and Q4_1 mins) of all the rows are converted as one vector and
// spread over the pairs with a permute; the Q4_1 min terms run as 8 lanes, one row each. Q4_K
// takes its scales per super-block instead (below).
template <DType T, int P>
void pairs_x1(const uint8_t* const* rows, const Activations& a, int64_t t, float* y, int n_out,
              const uint8_t* pf = nullptr, int64_t pf_bytes = 0) {
  constexpr int R = 2 * P;
  constexpr int64_t bs = block_bytes(T);
  const int64_t nb = a.nb;
  const float* dx = a.dx.data() + t * (nb + 16);
  __m512i spread[P];  // lanes 0..7 <- row 2p, lanes 8..15 <- row 2p+1
  __m512 acc[P];
  for (int p = 0; p < P; ++p) {
    spread[p] = _mm512_inserti64x4(_mm512_set1_epi32(2 * p), _mm256_set1_epi32(2 * p + 1), 1);
    acc[p] = _mm512_setzero_ps();
  }
  __m256 summs = _mm256_setzero_ps();
  if constexpr (T == DType::Q4_K) {  // scales per super-block
    // per super-block: each row's 8 sub-block scales and mins, times d_x and s_x with vectors;
    // the min terms summed row by row in block order
    float sk[8] = {};
    for (int64_t s0 = 0; s0 < nb; s0 += 8) {
      prefetch_part(pf, pf_bytes, s0 / 8, nb / 8);
      alignas(32) float dk[8][8], mk[8][8], sx[8];
      for (int j = 0; j < 8; ++j) sx[j] = a.sx_t[static_cast<size_t>((s0 + j) * a.mpad + t)];
      const __m256 dxv = _mm256_loadu_ps(dx + s0), sxv = _mm256_load_ps(sx);
      for (int i = 0; i < R; ++i) {
        __m256 d8, m8;
        q4k_dm8(rows[i] + (s0 / 8) * kQ4KBytes, d8, m8);
        _mm256_store_ps(dk[i], _mm256_mul_ps(d8, dxv));
        _mm256_store_ps(mk[i], _mm256_mul_ps(m8, sxv));
      }
      for (int j = 0; j < 8; ++j) {
        const int64_t b = s0 + j;
        const __m512i xv = _mm512_loadu_si512(a.x2_at(t, b));
        for (int p = 0; p < P; ++p) {
          const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), pair_quants_k(rows[2 * p], rows[2 * p + 1], b), xv);
          acc[p] = _mm512_fmadd_ps(pair_scale(&dk[2 * p][j], &dk[2 * p + 1][j]), _mm512_cvtepi32_ps(s), acc[p]);
        }
        for (int i = 0; i < R; ++i) sk[i] += mk[i][j];
      }
    }
    summs = _mm256_loadu_ps(sk);
  } else {
    for (int64_t b = 0; b < nb; ++b) {
      prefetch_part(pf, pf_bytes, b, nb);  // rows further on (x86_common.h)
      int32_t gi[8];  // fp16 scale | fp16 min << 16 (scalar loads: faster here than vpgatherdd)
      for (int i = 0; i < 8; ++i) std::memcpy(&gi[i], rows[i < R ? i : 0] + b * bs, 4);
      const __m256i g = _mm256_setr_epi32(gi[0], gi[1], gi[2], gi[3], gi[4], gi[5], gi[6], gi[7]);
      const __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(g)), _mm256_set1_ps(dx[b]));  // d_w*d_x
      if constexpr (has_min(T)) {
        const __m256 mn = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(g, 16)));
        summs = _mm256_add_ps(summs, _mm256_mul_ps(mn, _mm256_set1_ps(a.sx_t[static_cast<size_t>(b * a.mpad + t)])));
      }
      const __m512 dd16 = _mm512_castps256_ps512(dd);
      const __m512i xv = _mm512_loadu_si512(a.x2_at(t, b));
      const __m512i s0 = has_min(T) ? _mm512_setzero_si512() : a.start_at(t, b);
      for (int p = 0; p < P; ++p) {
        const __m512i wv = pair_quants<T>(rows[2 * p] + b * bs, rows[2 * p + 1] + b * bs);
        const __m512i s = _mm512_dpbusd_epi32(s0, wv, xv);
        acc[p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(spread[p], dd16), _mm512_cvtepi32_ps(s), acc[p]);
      }
    }
  }
  float h[2 * P];
  alignas(32) float sm[8];
  for (int p = 0; p < P; ++p) hsum8_pair(acc[p], h[2 * p], h[2 * p + 1]);
  _mm256_store_ps(sm, summs);
  for (int i = 0; i < n_out; ++i) y[i] = h[i] + sm[i];
}

// Prefill: 8 rows (4 pairs) are unpacked once per panel: [pair][block][64] quants, [pair][block][16]
// scales [d_a x 8 | d_b x 8]. Q4_1's quants (0..15) are the unsigned operand against signed
// activations; Q4_0/Q8_0 keep their signed quants (q-8, w) against activations shifted to x+128,
// with the accumulator started at -128 times the weights' 4-element sums ([pair][block][16]): the
// same exact integers as decode's form, and only 64 bytes of activations per token and block.
struct PrefillPanel {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> c;  // Q4_0/Q8_0 accumulator starts
  std::vector<float> m;    // [b]: one row's Q4_1 mins
};

template <DType T>
inline __m512i pair_signed(const uint8_t* a, const uint8_t* bq) {
  static_assert(T != DType::Q4_K, "Q4_K blocks come from pair_quants_k");
  if constexpr (T == DType::Q4_1) return pair_quants<T>(a, bq);
  else return _mm512_sub_epi8(pair_quants<T>(a, bq), _mm512_set1_epi8(static_cast<char>(T == DType::Q8_0 ? 0x80 : 8)));
}

// 8 rows x TT tokens over all blocks; out[row][token] = hsum8 of the row's lanes.
template <DType T, int TT>
void panel_tokens(const int8_t* q, const float* d, const int32_t* c, const Activations& a, int64_t t0, float out[8][4]) {
  constexpr int P = 4;
  const int64_t nb = a.nb;
  __m512 acc[P][TT];
  for (int p = 0; p < P; ++p)
    for (int j = 0; j < TT; ++j) acc[p][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i wv[P];
    __m512 dw[P];
    for (int p = 0; p < P; ++p) {
      wv[p] = _mm512_loadu_si512(q + (p * nb + b) * 64);
      dw[p] = _mm512_loadu_ps(d + (p * nb + b) * 16);
    }
    for (int j = 0; j < TT; ++j) {
      const int64_t t = t0 + j;
      const __m512i xv = _mm512_loadu_si512(a.x2_at(t, b));
      const __m512 dxv = _mm512_set1_ps(a.dx[static_cast<size_t>(t * (nb + 16) + b)]);
      for (int p = 0; p < P; ++p) {
        __m512i s;
        if constexpr (has_min(T)) s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[p], xv);
        else s = _mm512_dpbusd_epi32(_mm512_loadu_si512(c + (p * nb + b) * 16), xv, wv[p]);
        acc[p][j] = _mm512_fmadd_ps(_mm512_mul_ps(dw[p], dxv), _mm512_cvtepi32_ps(s), acc[p][j]);
      }
    }
  }
  for (int p = 0; p < P; ++p)
    for (int j = 0; j < TT; ++j) hsum8_pair(acc[p][j], out[2 * p][j], out[2 * p + 1][j]);
}

template <DType T>
void q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m, int64_t xq_stride,
             float* y, int64_t ys) {
  constexpr int64_t bs = block_bytes(T);
  const int64_t nb = w.cols / 32;
  thread_local Activations a;
  a.build<T>(xq, m, nb, xq_stride, m >= 4 && !has_min(T));
  auto row = [&](int64_t r) { return w.data + r * w.row_stride; };
  if (m < 4) {
    for (int64_t t = 0; t < m; ++t) {
      float* yt = y + t * ys;
      int64_t r = r0;
      if (t == 0) prefetch_first_rows(w, r0, r1);
      for (; r + 8 <= r1; r += 8) {
        const uint8_t* rows[8] = {row(r), row(r + 1), row(r + 2), row(r + 3), row(r + 4), row(r + 5), row(r + 6), row(r + 7)};
        const RowsAhead pf = rows_ahead(w, r, r1);
        pairs_x1<T, 4>(rows, a, t, yt + r, 8, pf.data, pf.bytes);
      }
      for (; r < r1; r += 2) {
        const int n = static_cast<int>(std::min<int64_t>(2, r1 - r));
        const uint8_t* rows[2] = {row(r), row(r + n - 1)};
        pairs_x1<T, 1>(rows, a, t, yt + r, n);
      }
    }
    return;
  }
  // Cache blocking: a panel of up to 8 unpacked 8-row groups, swept by chunks of tokens whose
  // prepared activations (64 bytes per block) stay in L2 meanwhile.
  constexpr int64_t kGroups = 8;
  const int64_t tokens_per_chunk = std::max<int64_t>(3, (512 * 1024) / (nb * 64) / 3 * 3);
  thread_local PrefillPanel pp;
  pp.q.resize(static_cast<size_t>(kGroups * 4 * nb * 64));
  pp.d.resize(static_cast<size_t>(kGroups * 4 * nb * 16));
  if constexpr (!has_min(T)) pp.c.resize(static_cast<size_t>(kGroups * 4 * nb * 16));
  pp.m.resize(static_cast<size_t>(nb));
  thread_local std::vector<float> summs;  // [row in panel][mpad]
  summs.resize(static_cast<size_t>(kGroups * 8 * a.mpad));
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t p0 = r0; p0 < r1; p0 += 8 * kGroups) {
    const int64_t ng = (std::min(8 * kGroups, r1 - p0) + 7) / 8;
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t r = p0 + 8 * g;
      const int np = static_cast<int>(std::min<int64_t>(8, r1 - r));
      const uint8_t* rows[8];
      for (int i = 0; i < 8; ++i) rows[i] = row(r + std::min(i, np - 1));
      for (int p = 0; p < 4; ++p)
        for (int64_t b = 0; b < nb; ++b) {
          const size_t at = static_cast<size_t>((g * 4 + p) * nb + b);
          __m512i wq;
          if constexpr (T == DType::Q4_K) wq = pair_quants_k(rows[2 * p], rows[2 * p + 1], b);
          else wq = pair_signed<T>(rows[2 * p] + b * bs, rows[2 * p + 1] + b * bs);
          _mm512_storeu_si512(pp.q.data() + at * 64, wq);
          float da, db, ma, mb;
          block_dm<T>(rows[2 * p], b, da, ma);
          block_dm<T>(rows[2 * p + 1], b, db, mb);
          _mm512_storeu_ps(pp.d.data() + at * 16, halves(_mm256_set1_ps(da), _mm256_set1_ps(db)));
          if constexpr (!has_min(T)) {
            const __m512i sum4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, wq);
            _mm512_storeu_si512(pp.c.data() + at * 16, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum4, 7)));
          }
        }
      if constexpr (has_min(T)) {
        // the min term, token-parallel: summs[i][t] = sum over b in order of m_i[b] * s_x[t][b]
        for (int i = 0; i < np; ++i) {
          for (int64_t b = 0; b < nb; ++b) {
            float dd;
            block_dm<T>(rows[i], b, dd, pp.m[static_cast<size_t>(b)]);
          }
          for (int64_t t = 0; t < a.mpad; t += 16) {
            __m512 sv = _mm512_setzero_ps();
            for (int64_t b = 0; b < nb; ++b)
              sv = _mm512_add_ps(sv, _mm512_mul_ps(_mm512_set1_ps(pp.m[static_cast<size_t>(b)]),
                                                   _mm512_loadu_ps(a.sx_t.data() + b * a.mpad + t)));
            _mm512_storeu_ps(summs.data() + (8 * g + i) * a.mpad + t, sv);
          }
        }
      }
    }
    for (int64_t c0 = 0; c0 < m; c0 += tokens_per_chunk) {
      const int64_t c1 = std::min(m, c0 + tokens_per_chunk);
      for (int64_t g = 0; g < ng; ++g) {
        const int64_t r = p0 + 8 * g;
        const int np = static_cast<int>(std::min<int64_t>(8, r1 - r));
        const int8_t* q = pp.q.data() + g * 4 * nb * 64;
        const float* d = pp.d.data() + g * 4 * nb * 16;
        const int32_t* c = has_min(T) ? nullptr : pp.c.data() + g * 4 * nb * 16;
        for (int64_t t0 = c0; t0 < c1; t0 += 3) {
          float out[8][4];
          const int tt = static_cast<int>(std::min<int64_t>(3, c1 - t0));
          switch (tt) {
            case 3: panel_tokens<T, 3>(q, d, c, a, t0, out); break;
            case 2: panel_tokens<T, 2>(q, d, c, a, t0, out); break;
            default: panel_tokens<T, 1>(q, d, c, a, t0, out); break;
          }
          for (int i = 0; i < np; ++i)
            for (int j = 0; j < tt; ++j) {
              const float sm = has_min(T) ? summs[static_cast<size_t>((8 * g + i) * a.mpad + t0 + j)] : 0.0f;
              y[(t0 + j) * ys + r + i] = out[i][j] + sm;
            }
        }
      }
    }
  }
}

}  // namespace

bool matmul_q8_rows_vnni(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                         int64_t xq_stride, float* y, int64_t ys) {
  switch (w.type) {
    case DType::Q4_0: q8_rows<DType::Q4_0>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q4_1: q8_rows<DType::Q4_1>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q4_K: q8_rows<DType::Q4_K>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    case DType::Q8_0: q8_rows<DType::Q8_0>(w, r0, r1, xq, m, xq_stride, y, ys); return true;
    default: return false;
  }
}

}  // namespace tessera::avx512
