// The bf16 GEMM (bf16_tiles.h) on AMX tiles: 32 tokens × 32 rows per step, four accumulator
// tiles fed by two activation tiles (16 tokens × 32 k) and two weight tiles (32 k × 16 rows),
// so each tile loaded serves two TDPBF16PS. The activations are the per-call bf16 copy, already in
// 1 KiB tiles (bf16_act_index), the weights in their tile order: every tile load is contiguous.
// Results go straight from the accumulator tiles to y where a whole 16 × 16 fits, else through a
// small buffer; or, with an epilogue, through a 4 KiB buffer per 32 × 32 step into the next op's
// bf16 layout (GELU into fc2's activations, or q/k/v into the attention's), y never written.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/kernels.h"
#include "kernels/x86/amx_tile_config.h"
#include "kernels/x86/bf16_epilogues.h"
#include "kernels/x86/bf16_round.h"

namespace tessera::avx512 {

namespace {

// tilestored of accumulator c (the intrinsic takes the tile number as a literal).
inline void stored(int c, void* p, int64_t stride) {
  switch (c) {
    case 0: _tile_stored(0, p, stride); break;
    case 1: _tile_stored(1, p, stride); break;
    case 2: _tile_stored(2, p, stride); break;
    default: _tile_stored(3, p, stride); break;
  }
}

// Accumulator tile c (16 × 16 at tokens t.., rows r..) to y, clipped to m tokens and r1 rows.
inline void store_tile(int c, float* y, int64_t ys, int64_t t, int64_t m, int64_t r, int64_t r1) {
  const int64_t nt = std::min<int64_t>(16, m - t), nr = std::min<int64_t>(16, r1 - r);
  if (nt <= 0 || nr <= 0) return;
  if (nt == 16 && nr == 16) {
    stored(c, y + t * ys + r, ys * 4);
    return;
  }
  alignas(64) float buf[256];
  stored(c, buf, 64);
  for (int64_t i = 0; i < nt; ++i) std::memcpy(y + (t + i) * ys + r, buf + 16 * i, static_cast<size_t>(nr) * 4);
}

// The four accumulators of one step as 32 tokens × 32 rows, token-major, for the epilogues.
inline void store_step(float* buf) {
  _tile_stored(0, buf, 128);
  _tile_stored(1, buf + 16, 128);
  _tile_stored(2, buf + 16 * 32, 128);
  _tile_stored(3, buf + 16 * 32 + 16, 128);
}

}  // namespace

// round_rows_bf16 sixteen lanes at a time (bf16_round.h: the same bits as float_to_bf16).
void round_rows_bf16_avx512(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp) {
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t k0 = 0; k0 < kp; k0 += kBf16K) {  // one tile line: 32 contiguous values
      uint16_t* dst = y + bf16_act_index(t, k0, kp);
      for (int h = 0; h < 2; ++h) {
        const int64_t base = k0 + 16 * h;
        const __m512i r = round_bf16_lanes_n(x + t * xs + base, k - base);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16 * h), _mm512_cvtepi32_epi16(r));
      }
    }
}

void gemm_bf16_rows_amx(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xb, int64_t m, int64_t kp,
                        float* y, int64_t ys, const float* bias, uint16_t* gelu_b16, const Bf16QkvTarget* qkv) {
  const int64_t nkb = kp / kBf16K, kpo = bf16_padded_k(w.rows);
  _tile_loadconfig(&kFullTiles);  // tmm0..3 accumulators, tmm4, 5 activations, tmm6, 7 weights
  // Tokens in blocks of 64: every row group of the range passes over a block's activation tiles
  // (96 KiB at K = 768), so the group's weight tiles are reread once per block; faster on SigLIP's
  // shapes than blocks of ~512 KiB of activations (docs/measurements.md, "Design choices").
  constexpr int64_t block = 64;
  for (int64_t t0 = 0; t0 < m; t0 += block)
  for (int64_t g = r0 / 32; g * 32 < r1; ++g) {
    const uint8_t* wt = w.bf16_tiles + g * nkb * 2048;
    const int64_t r = g * 32;
    // the group's 32 biases (zero past the matrix), loaded into every accumulator line by a tile
    // load with stride 0
    alignas(64) float bpad[32] = {};
    const float* bg = bias && r + 32 <= w.rows ? bias + r : bias ? bpad : nullptr;
    if (bg == bpad) std::memcpy(bpad, bias + r, static_cast<size_t>(w.rows - r) * 4);
    for (int64_t t = t0; t < std::min(m, t0 + block); t += 32) {
      const uint16_t* a0 = xb + (t / 16) * nkb * 512;  // tokens t.., then t + 16..
      const uint16_t* a1 = a0 + nkb * 512;
      if (bg) {
        _tile_loadd(0, bg, 0);
        _tile_loadd(1, bg + 16, 0);
        _tile_loadd(2, bg, 0);
        _tile_loadd(3, bg + 16, 0);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      for (int64_t kb = 0; kb < nkb; ++kb) {
        // The four tiles two steps ahead into L1, line by line (measured with bench_amx_pair:
        // docs/measurements.md). A tile load that misses L1 stalls the tile unit; the hardware
        // prefetchers do not follow four interleaved streams.
        const int64_t kn = std::min(kb + 2, nkb - 1);
        for (int l = 0; l < 16; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(a0 + kn * 512) + 64 * l, _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(a1 + kn * 512) + 64 * l, _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(wt + kn * 2048) + 64 * l, _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(wt + kn * 2048 + 1024) + 64 * l, _MM_HINT_T0);
        }
        // each load just before its first use, so loads overlap the tile ops already issued
        _tile_loadd(4, a0 + kb * 512, 64);
        _tile_loadd(6, wt + kb * 2048, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, wt + kb * 2048 + 1024, 64);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a1 + kb * 512, 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      if (gelu_b16 || qkv) {
        alignas(64) float buf[32 * 32];
        store_step(buf);
        if (gelu_b16) gelu_round_step(buf, t, m, r, std::min<int64_t>(32, r1 - r), gelu_b16, kpo);
        else qkv_round_step(buf, t, m, r, *qkv);
        continue;
      }
      store_tile(0, y, ys, t, m, r, r1);
      store_tile(1, y, ys, t, m, r + 16, r1);
      store_tile(2, y, ys, t + 16, m, r, r1);
      store_tile(3, y, ys, t + 16, m, r + 16, r1);
    }
  }
  _tile_release();
}

}  // namespace tessera::avx512
