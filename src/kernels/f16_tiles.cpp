#include "kernels/f16_tiles.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/kernel_table.h"

namespace tessera {

bool f16_gemm_available() { return kernels().f16_tiles; }

bool f16_gemm_fast() { return f16_gemm_available() && kernels().isa != Isa::Neon && !bf16_gemm_fast(); }

PackedWeights pack_f16_tiles(const WeightMatrix& w) {
  PackedWeights out = pack_tiles16(w, float_to_fp16);
  out.matrix.f16_tiles = out.data.get();
  return out;
}

void round_rows_f16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp) {
  round_rows16(x, t0, t1, xs, k, y, kp, float_to_fp16);
}

void check_f16_vision_output(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      fail("fp16 vision: an activation overflowed fp16's range (the encoder's output is not finite); run with --fp32-vision");
}

namespace ref {

namespace {

// d rounded once to fp16 (nearest, ties to even; subnormals kept; past 65504 to inf).
uint16_t double_to_fp16(double d) {
  if (std::isnan(d)) return 0x7e00;
  const uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  const double a = std::fabs(d);
  if (a >= 65520.0) return sign | 0x7c00;  // at or past the midpoint above 65504
  int e = 0;
  std::frexp(a, &e);                      // a in [2^(e-1), 2^e): 11 significant bits step 2^(e-11)
  const int q = std::max(e - 11, -24);    // the fp16 step there (2^-24 below the normal range)
  const double r = std::ldexp(std::nearbyint(std::ldexp(a, -q)), q);  // exact scaling, one rounding
  return sign | float_to_fp16(static_cast<float>(r));                 // r is an fp16 value: exact
}

}  // namespace

uint16_t fma_f16(uint16_t a, uint16_t b, uint16_t c) {
  // b·c is exact in double (22 bits) and so is the sum where the result can round differently
  // (a term below 2^-30 of the other cannot move an fp16 result; nonzero fp16 values are >= 2^-24)
  return double_to_fp16(static_cast<double>(fp16_to_float(a)) +
                        static_cast<double>(fp16_to_float(b)) * static_cast<double>(fp16_to_float(c)));
}

void gemm_f16_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xh, int64_t m, int64_t kp, float* y,
                   int64_t ys, const float* bias) {
  const int64_t nkb = kp / kBf16K;
  const uint16_t* tiles = reinterpret_cast<const uint16_t*>(w.f16_tiles);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < m; ++t) {
      float s[2] = {bias ? bias[r] : 0.0f, 0.0f};
      for (int64_t k0 = 0; k0 < kp; k0 += kF16ChunkK)
        for (int p = 0; p < 2; ++p) {
          uint16_t c = 0;
          for (int64_t k = k0 + p; k < std::min(kp, k0 + kF16ChunkK); k += 2)
            c = fma_f16(c, tiles[bf16_weight_index(r, k, nkb)], xh[bf16_act_index(t, k, kp)]);
          s[p] += fp16_to_float(c);
        }
      y[t * ys + r] = s[0] + s[1];
    }
}

}  // namespace ref

void gemm_f16(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys, ThreadPool& pool,
              const float* bias) {
  if (!w.f16_tiles) fail("gemm_f16: the %s weights were not repacked (pack_f16_tiles)", dtype_name(w.type));
  const KernelTable& kt = kernels();
  const int64_t kp = bf16_padded_k(w.cols);
  // the activations once per call, padded to whole 32-token tiles with zeros
  thread_local std::vector<uint16_t> xh;  // workers get its pointer, never the vector
  xh.resize(static_cast<size_t>(bf16_act_elems(m, w.cols)));
  uint16_t* xp = xh.data();
  pool.parallel_for(m, 16, [&](int64_t a, int64_t b) { kt.round_rows_f16(x, a, b, xs, w.cols, xp, kp); });
  zero_pad_tokens_bf16(xp, m, w.cols);
  parallel_row_groups(w.rows, pool, [&](int64_t r0, int64_t r1) { kt.gemm_f16_rows(w, r0, r1, xp, m, kp, y, ys, bias); });
}

}  // namespace tessera
