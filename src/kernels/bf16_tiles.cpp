#include "kernels/bf16_tiles.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/gemm_panels.h"

namespace tessera {

bool bf16_gemm_available() {
#if defined(TESSERA_HAVE_AVX512)
  return active_isa() >= Isa::Amx;
#else
  return false;
#endif
}

namespace {

// Element (r, k) of w as float, from its gemm panels or its rows.
float weight_at(const WeightMatrix& w, int64_t r, int64_t k) {
  const size_t es = w.type == DType::F32 ? 4 : 2;
  const uint8_t* p = w.gemm_panels
                         ? w.gemm_panels + ((r / kGemmPanelRows) * kGemmPanelRows * w.cols + k * kGemmPanelRows +
                                            r % kGemmPanelRows) * static_cast<int64_t>(es)
                         : w.data + r * static_cast<int64_t>(w.row_stride) + k * static_cast<int64_t>(es);
  if (w.type == DType::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return w.type == DType::F16 ? fp16_to_float(h) : bf16_to_float(h);
}

}  // namespace

PackedWeights pack_bf16_tiles(const WeightMatrix& w) {
  if (!supports_gemm_panels(w.type)) fail("bf16 tiles: %s weights are not repacked (F32, F16, BF16 only)", dtype_name(w.type));
  if (w.rows <= 0 || w.cols <= 0) fail("bf16 tiles: cannot repack an empty %lldx%lld matrix", static_cast<long long>(w.rows),
                                       static_cast<long long>(w.cols));
  const int64_t kp = bf16_padded_k(w.cols), nkb = kp / kBf16K, groups = (w.rows + 31) / 32;
  PackedWeights out;
  out.bytes = static_cast<size_t>(groups * nkb) * 2048;
  void* mem = std::aligned_alloc(64, out.bytes);
  if (!mem) fail("out of memory repacking a %lldx%lld matrix (%zu bytes)", static_cast<long long>(w.rows),
                 static_cast<long long>(w.cols), out.bytes);
  out.data = {static_cast<uint8_t*>(mem), std::free};
  std::memset(mem, 0, out.bytes);
  uint16_t* t = reinterpret_cast<uint16_t*>(mem);
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t k = 0; k < w.cols; ++k) t[bf16_weight_index(r, k, nkb)] = float_to_bf16(weight_at(w, r, k));
  out.matrix = w;
  out.matrix.bf16_tiles = out.data.get();
  return out;
}

void round_rows_bf16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp) {
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t k0 = 0; k0 < kp; k0 += kBf16K) {  // one tile line: 32 contiguous values
      uint16_t* dst = y + bf16_act_index(t, k0, kp);
      const float* src = x + t * xs + k0;
      if (k0 + kBf16K <= k) {
        for (int i = 0; i < kBf16K; ++i) dst[i] = float_to_bf16(src[i]);
      } else {
        for (int i = 0; i < kBf16K; ++i) dst[i] = k0 + i < k ? float_to_bf16(src[i]) : 0;
      }
    }
}

namespace ref {

void gemm_bf16_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xb, int64_t m, int64_t kp,
                    float* y, int64_t ys, const float* bias) {
  const int64_t nkb = kp / kBf16K;
  const uint16_t* tiles = reinterpret_cast<const uint16_t*>(w.bf16_tiles);
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = 0; t < m; ++t) {
      float acc = bias ? bias[r] : 0.0f;
      for (int64_t k = 0; k < kp; ++k) {
        const float wv = bf16_to_float(tiles[bf16_weight_index(r, k, nkb)]);
        acc += wv * bf16_to_float(xb[bf16_act_index(t, k, kp)]);  // the product is exact in fp32: one rounding per step
      }
      y[t * ys + r] = acc;
    }
  }
}

}  // namespace ref

void round_row_bf16(const float* x, int64_t t, int64_t k, uint16_t* y) {
#if defined(TESSERA_HAVE_AVX512)
  // (built with the AMX kernel's flags, so only where AMX is in use)
  if (bf16_gemm_available()) return avx512::round_rows_bf16_avx512(x, t, t + 1, 0, k, y, bf16_padded_k(k));
#endif
  round_rows_bf16(x, t, t + 1, 0, k, y, bf16_padded_k(k));
}

void zero_pad_tokens_bf16(uint16_t* y, int64_t m, int64_t k) {
  const int64_t kp = bf16_padded_k(k);
  for (int64_t t = m; t < (m + 31) / 32 * 32; ++t)
    for (int64_t k0 = 0; k0 < kp; k0 += kBf16K) std::fill_n(y + bf16_act_index(t, k0, kp), kBf16K, uint16_t{0});
}

void gemm_bf16(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys, ThreadPool& pool,
               const float* bias) {
  if (!w.bf16_tiles) fail("gemm_bf16: the %s weights were not repacked (pack_bf16_tiles)", dtype_name(w.type));
  // the activations once per call, padded to whole 32-token tiles with zeros
  thread_local std::vector<uint16_t> xb;  // workers get its pointer, never the vector
  xb.resize(static_cast<size_t>(bf16_act_elems(m, w.cols)));
  uint16_t* xp = xb.data();
  pool.parallel_for(m, 16, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) round_row_bf16(x + t * xs, t, w.cols, xp);
  });
  zero_pad_tokens_bf16(xp, m, w.cols);
  gemm_bf16_rounded(w, xp, m, y, ys, pool, bias);
}

void gemm_bf16_rounded(const WeightMatrix& w, const uint16_t* xb, int64_t m, float* y, int64_t ys, ThreadPool& pool,
                       const float* bias) {
  if (!w.bf16_tiles) fail("gemm_bf16: the %s weights were not repacked (pack_bf16_tiles)", dtype_name(w.type));
  const int64_t kp = bf16_padded_k(w.cols);
  [[maybe_unused]] const bool amx = bf16_gemm_available();
  parallel_row_groups(w.rows, pool, [&](int64_t r0, int64_t r1) {
#if defined(TESSERA_HAVE_AVX512)
    if (amx) return avx512::gemm_bf16_rows_amx(w, r0, r1, xb, m, kp, y, ys, bias);
#endif
    ref::gemm_bf16_rows(w, r0, r1, xb, m, kp, y, ys, bias);
  });
}

}  // namespace tessera
