// The bf16 attention (attention_bf16.h) on AMX tiles, 32 query rows of one head per call, keys
// in blocks of kBf16AttnKeys (1024: a whole vision tile) whose scores (32 × 1024 fp32) and
// weights stay in L2. Per block:
//  1. scores: 32 queries × 32 keys per step in four accumulator tiles, fed by two query tiles
//     (16 rows × 32 dims, straight from the packed rows) and two key tiles, over head_dim; for
//     head_dim <= 64 the query tiles stay loaded instead, and each step is 32 queries × 16 keys;
//  2. softmax (AVX-512): the running max, the rescale factor, p = exp2(s·c − m·c) rounded to bf16
//     (VCVTNE2PS2BF16) and its sum (VDPBF16PS against ones);
//  3. outputs: 32 queries × 32 dims per step in four accumulator tiles, fed by two weight tiles
//     (16 rows × 32 keys) and two value tiles; added into the running output after its rescale.
// Each key or value tile loaded serves two TDPBF16PS, so K and V are read from L2 once per 32
// queries.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/x86/amx_tile_config.h"
#include "kernels/x86/attention_bf16_steps.h"
#include "kernels/x86/bf16_round.h"

namespace tessera::avx512 {

namespace {

// r[i] dword p -> r[p] dword i: 4 × 4 dwords within each 128-bit lane (unpacks), then the lanes.
inline void transpose_16x16_epi32(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // u[i + c], lane L: column 4L + c of rows i..i+3
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // row 4L + c: lane L of u[c], u[4 + c], u[8 + c], u[12 + c]
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44), v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

}  // namespace

void pack_attn_bf16(const Bf16AttnDims& D, const float* q, int64_t q_stride, const float* k, const float* v,
                    int64_t kv_stride, int64_t i0, int64_t i1, int64_t j0, int64_t j1, const Bf16AttnBuffers& b) {
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t i = i0; i < i1; ++i)
    for (int h = 0; h < D.n_head; ++h)
      for (int64_t d = 0; d < D.hdk; d += 16) {
        const __m512i r = i < D.n_q ? round_bf16_lanes_n(q + i * q_stride + h * D.hd + d, D.hd - d) : zero;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.q + bf16_attn_q_index(D, h, i, d)), _mm512_cvtepi32_epi16(r));
      }
  // a key's 32 dims are 16 pairs (dword p: dims d + 2p, d + 2p + 1), one per line of its tile
  const auto key_pairs = [&](int64_t j, int g, int64_t d) {
    if (j >= D.n_kv) return zero;
    const float* kr = k + j * kv_stride + g * D.hd + d;
    const __m256i lo = _mm512_cvtepi32_epi16(round_bf16_lanes_n(kr, D.hd - d));
    const __m256i hi = _mm512_cvtepi32_epi16(round_bf16_lanes_n(kr + 16, D.hd - d - 16));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  };
  // a tile's 16 keys at once: their pairs transposed (line p = every key's dword p), 16 stores
  // of whole lines; a key alone is a scatter with a 64-byte stride (the packing 1.27x slower on
  // one thread of AMD Zen 4 with every key scattered)
  const __m512i lines = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(16));
  for (int64_t j = j0; j < j1;) {
    if (j % 16 == 0 && j + 16 <= j1) {
      for (int g = 0; g < D.n_head_kv; ++g)
        for (int64_t d = 0; d < D.hdk; d += 32) {
          __m512i r[16];
          for (int i = 0; i < 16; ++i) r[i] = key_pairs(j + i, g, d);
          transpose_16x16_epi32(r);
          uint16_t* line = b.k + bf16_attn_k_index(D, g, j, d);
          for (int p = 0; p < 16; ++p) _mm512_storeu_si512(line + 32 * p, r[p]);
        }
      j += 16;
      continue;
    }
    for (int g = 0; g < D.n_head_kv; ++g)
      for (int64_t d = 0; d < D.hdk; d += 32)
        _mm512_i32scatter_epi32(b.k + bf16_attn_k_index(D, g, j, d), lines, key_pairs(j, g, d), 4);
    ++j;
  }
  // two keys' values interleave in one tile line: key j in the low half of each 32-bit pair
  for (int64_t j = j0; j < j1; j += 2)
    for (int g = 0; g < D.n_head_kv; ++g)
      for (int64_t d = 0; d < D.hdv; d += 16) {
        const __m512i a = j < D.n_kv ? round_bf16_lanes_n(v + j * kv_stride + g * D.hd + d, D.hd - d) : zero;
        const __m512i c = j + 1 < D.n_kv ? round_bf16_lanes_n(v + (j + 1) * kv_stride + g * D.hd + d, D.hd - d) : zero;
        _mm512_storeu_si512(b.v + bf16_attn_v_index(D, g, j, d), _mm512_or_si512(a, _mm512_slli_epi32(c, 16)));
      }
}

void exp2_bf16attn_lanes(const float* t, float* e, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = first_lanes(n - i);
    _mm512_mask_storeu_ps(e + i, k, exp2_lanes(_mm512_maskz_loadu_ps(k, t + i)));
  }
}

void attention_bf16_rows(const Bf16AttnDims& D, const Bf16AttnBuffers& b, int64_t h, int64_t i0, float* out,
                         int64_t out_stride, uint16_t* out_b16) {
  constexpr int64_t R = kBf16AttnRows, KB = kBf16AttnKeys;
  const int64_t ndk = D.hdk / 32, hdv = D.hdv, rows = std::min(R, D.n_q - i0);
  const int64_t g = h / (D.n_head / D.n_head_kv);
  const float c = D.c;
  constexpr int64_t ss = Bf16AttnRows::ss, ps = Bf16AttnRows::ps;
  Bf16AttnRows st(hdv);
  float* const S = st.S;
  uint16_t* const P = st.P;
  float* const Ob = st.Ob;

  _tile_loadconfig(&kFullTiles);  // tmm0..3 accumulators, tmm4, 5 queries or weights, tmm6, 7 keys or values
                                  // (head_dim <= 64: scores in tmm0, 1 with the queries in tmm2..5)
  const uint16_t* q0 = b.q + bf16_attn_q_index(D, h, i0, 0);
  const uint16_t* q1 = b.q + bf16_attn_q_index(D, h, i0 + 16, 0);
  for (int64_t j0 = 0; j0 < D.n_kv; j0 += KB) {
    const int64_t kbn = std::min(KB, D.nkp - j0);  // keys in this block, a multiple of 32
    if (ndk <= 2) {
      // head_dim <= 64: both query tiles' dim chunks stay in tiles 2..5 through the block, and
      // each 16 keys take one key tile per chunk for two accumulators (the same tile ops in the
      // same order per score tile, so the same bits; fewer tile loads than re-reading the queries
      // every 32 keys: docs/measurements.md, "Design choices")
      _tile_loadd(2, q0, D.hdk * 2);
      _tile_loadd(4, q1, D.hdk * 2);
      if (ndk == 2) {
        _tile_loadd(3, q0 + 32, D.hdk * 2);
        _tile_loadd(5, q1 + 32, D.hdk * 2);
      }
      for (int64_t jj = 0; jj < kbn; jj += 16) {
        const uint16_t* k0 = b.k + bf16_attn_k_index(D, g, j0 + jj, 0);
        _tile_zero(0);
        _tile_zero(1);
        _tile_loadd(6, k0, 64);
        _tile_dpbf16ps(0, 2, 6);
        _tile_dpbf16ps(1, 4, 6);
        if (ndk == 2) {
          _tile_loadd(7, k0 + 512, 64);
          _tile_dpbf16ps(0, 3, 7);
          _tile_dpbf16ps(1, 5, 7);
        }
        _tile_stored(0, S + jj, ss * 4);
        _tile_stored(1, S + 16 * ss + jj, ss * 4);
      }
    } else {
      for (int64_t jj = 0; jj < kbn; jj += 32) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        const uint16_t* k0 = b.k + bf16_attn_k_index(D, g, j0 + jj, 0);
        const uint16_t* k1 = b.k + bf16_attn_k_index(D, g, j0 + jj + 16, 0);
        for (int64_t db = 0; db < ndk; ++db) {
          _tile_loadd(4, q0 + 32 * db, D.hdk * 2);
          _tile_loadd(6, k0 + 512 * db, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_loadd(7, k1 + 512 * db, 64);
          _tile_dpbf16ps(1, 4, 7);
          _tile_loadd(5, q1 + 32 * db, D.hdk * 2);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, S + jj, ss * 4);
        _tile_stored(1, S + jj + 16, ss * 4);
        _tile_stored(2, S + 16 * ss + jj, ss * 4);
        _tile_stored(3, S + 16 * ss + jj + 16, ss * 4);
      }
    }

    st.softmax_block(rows, kbn, j0, D.n_kv, c);

    for (int64_t dc = 0; dc < hdv; dc += 32) {
      const bool two = dc + 16 < hdv;  // a second value tile in this step
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t jj = 0; jj < kbn; jj += 32) {
        const uint16_t* v0 = b.v + bf16_attn_v_index(D, g, j0 + jj, dc);
        _tile_loadd(4, P + jj, ps * 2);
        _tile_loadd(6, v0, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(5, P + 16 * ps + jj, ps * 2);
        _tile_dpbf16ps(2, 5, 6);
        if (!two) continue;
        _tile_loadd(7, v0 + 512, 64);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, Ob + dc, hdv * 4);
      _tile_stored(2, Ob + 16 * hdv + dc, hdv * 4);
      if (!two) continue;
      _tile_stored(1, Ob + dc + 16, hdv * 4);
      _tile_stored(3, Ob + 16 * hdv + dc + 16, hdv * 4);
    }
    st.rescale_add(rows, hdv);
  }
  _tile_release();
  st.finish(D, rows, i0, h, out, out_stride, out_b16);
}

}  // namespace tessera::avx512
