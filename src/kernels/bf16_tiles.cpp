#include "kernels/bf16_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/cpu.h"
#include "core/error.h"
#include "core/fp16.h"
#include "kernels/attention_bf16.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernel_table.h"

namespace tessera {

bool bf16_gemm_available() { return kernels().bf16_tiles; }

bool bf16_gemm_fast() {
  const KernelTable& k = kernels();
  return k.bf16_tiles && (k.isa == Isa::Amx || cpu_features().amd);
}

bool supports_bf16_tiles(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0: case DType::Q4_1:
    case DType::Q5_0: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
      return true;
    default:
      return false;
  }
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

void check_repackable(const WeightMatrix& w) {
  if (!supports_bf16_tiles(w.type))
    fail("bf16 tiles: %s weights are not repacked (F32, F16, BF16 and llama.cpp's block types only)", dtype_name(w.type));
  if (w.rows <= 0 || w.cols <= 0) fail("bf16 tiles: cannot repack an empty %lldx%lld matrix", static_cast<long long>(w.rows),
                                       static_cast<long long>(w.cols));
}

// Zeroed, 64-byte aligned tiles for `rows` rows of `cols` columns.
PackedWeights alloc_tiles(int64_t rows, int64_t cols) {
  const int64_t nkb = bf16_padded_k(cols) / kBf16K, groups = (rows + 31) / 32;
  PackedWeights out;
  out.bytes = static_cast<size_t>(groups * nkb) * 2048;
  void* mem = std::aligned_alloc(64, out.bytes);
  if (!mem) fail("out of memory repacking a %lldx%lld matrix (%zu bytes)", static_cast<long long>(rows),
                 static_cast<long long>(cols), out.bytes);
  out.data = {static_cast<uint8_t*>(mem), std::free};
  std::memset(mem, 0, out.bytes);
  return out;
}

void fill_tiles(const WeightMatrix& w, uint16_t* t, uint16_t (*round)(float)) {
  const int64_t nkb = bf16_padded_k(w.cols) / kBf16K;
  if (!supports_gemm_panels(w.type)) {  // a block type: each row dequantized, then rounded
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
      dequantize_row(w.type, w.data + r * static_cast<int64_t>(w.row_stride), row.data(), w.cols);
      for (int64_t k = 0; k < w.cols; ++k) t[bf16_weight_index(r, k, nkb)] = round(row[static_cast<size_t>(k)]);
    }
    return;
  }
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t k = 0; k < w.cols; ++k) t[bf16_weight_index(r, k, nkb)] = round(weight_at(w, r, k));
}

}  // namespace

PackedWeights pack_tiles16(const WeightMatrix& w, uint16_t (*round)(float)) {
  check_repackable(w);
  PackedWeights out = alloc_tiles(w.rows, w.cols);
  fill_tiles(w, reinterpret_cast<uint16_t*>(out.data.get()), round);
  out.matrix = w;
  return out;
}

PackedWeights pack_bf16_tiles(const WeightMatrix& w) {
  PackedWeights out = pack_tiles16(w, float_to_bf16);
  out.matrix.bf16_tiles = out.data.get();
  return out;
}

StackedBf16Tiles stack_bf16_tiles(const std::vector<const WeightMatrix*>& parts) {
  if (parts.empty()) fail("bf16 tiles: nothing to stack");
  int64_t rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const WeightMatrix& w = *parts[i];
    check_repackable(w);
    if (w.cols != parts[0]->cols || w.type != parts[0]->type)
      fail("bf16 tiles: stacked matrices differ in width or type (%lld %s against %lld %s)", static_cast<long long>(w.cols),
           dtype_name(w.type), static_cast<long long>(parts[0]->cols), dtype_name(parts[0]->type));
    if (i + 1 < parts.size() && w.rows % 32 != 0)
      fail("bf16 tiles: a stacked matrix other than the last has %lld rows, not a multiple of 32", static_cast<long long>(w.rows));
    rows += w.rows;
  }
  StackedBf16Tiles out;
  out.all = alloc_tiles(rows, parts[0]->cols);
  const int64_t nkb = bf16_padded_k(parts[0]->cols) / kBf16K;
  uint16_t* const base = reinterpret_cast<uint16_t*>(out.all.data.get());
  int64_t r0 = 0;
  for (const WeightMatrix* w : parts) {
    uint16_t* const t = base + bf16_weight_index(r0, 0, nkb);  // r0 is a multiple of 32: a group's start
    fill_tiles(*w, t, float_to_bf16);
    out.views.push_back(*w);
    out.views.back().bf16_tiles = reinterpret_cast<const uint8_t*>(t);
    r0 += w->rows;
  }
  out.all.matrix = *parts[0];
  out.all.matrix.rows = rows;
  out.all.matrix.data = nullptr;
  out.all.matrix.gemm_panels = nullptr;
  out.all.matrix.panels = nullptr;
  out.all.matrix.bf16_tiles = out.all.data.get();
  return out;
}

void round_rows16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp,
                  uint16_t (*round)(float)) {
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t k0 = 0; k0 < kp; k0 += kBf16K) {  // one tile line: 32 contiguous values
      uint16_t* dst = y + bf16_act_index(t, k0, kp);
      const float* src = x + t * xs + k0;
      if (k0 + kBf16K <= k) {
        for (int i = 0; i < kBf16K; ++i) dst[i] = round(src[i]);
      } else {
        for (int i = 0; i < kBf16K; ++i) dst[i] = k0 + i < k ? round(src[i]) : 0;
      }
    }
}

void round_rows_bf16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp) {
  round_rows16(x, t0, t1, xs, k, y, kp, float_to_bf16);
}

namespace ref {

namespace {

// x, or a zero of its sign where it is denormal (VDPBF16PS's implied DAZ and FTZ).
float flush_denormal(float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; }

// Output (t, r): bias[r] (or 0), then over k in pairs in order, as VDPBF16PS specifies its lane:
// the odd k's product added first, then the even k's, one fp32 rounding each (the products are
// exact in fp32), denormal inputs and sums flushed to zero.
float dot_bf16(const WeightMatrix& w, int64_t r, int64_t t, const uint16_t* xb, int64_t kp, const float* bias) {
  const int64_t nkb = kp / kBf16K;
  const uint16_t* tiles = reinterpret_cast<const uint16_t*>(w.bf16_tiles);
  auto product = [&](int64_t k) {
    return flush_denormal(bf16_to_float(tiles[bf16_weight_index(r, k, nkb)])) *
           flush_denormal(bf16_to_float(xb[bf16_act_index(t, k, kp)]));
  };
  float acc = bias ? bias[r] : 0.0f;
  for (int64_t k = 0; k < kp; k += 2) {  // kp is a multiple of 32
    acc = flush_denormal(acc + product(k + 1));
    acc = flush_denormal(acc + product(k));
  }
  return acc;
}

}  // namespace

void gemm_bf16_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xb, int64_t m, int64_t kp,
                    float* y, int64_t ys, const float* bias, uint16_t* gelu_b16) {
  if (!gelu_b16) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t t = 0; t < m; ++t) y[t * ys + r] = dot_bf16(w, r, t, xb, kp, bias);
    return;
  }
  // the GELU epilogue: each token's results of a 32-row group, then gelu_tanh and the rounding
  const int64_t kpo = bf16_padded_k(w.rows);
  for (int64_t r = r0; r < r1; r += 32) {
    const int64_t nr = std::min<int64_t>(32, r1 - r);
    for (int64_t t = 0; t < m; ++t) {
      float row[32];
      for (int64_t i = 0; i < nr; ++i) row[i] = dot_bf16(w, r + i, t, xb, kp, bias);
      tessera::gelu_tanh(row, nr);  // the dispatched one, as the unfused pass calls (not ref::)
      uint16_t* dst = gelu_b16 + bf16_act_index(t, r, kpo);
      for (int64_t i = 0; i < 32; ++i) dst[i] = i < nr ? float_to_bf16(row[i]) : 0;
    }
  }
}

}  // namespace ref

void round_row_bf16(const float* x, int64_t t, int64_t k, uint16_t* y) {
  // the vector rounding is built with the AMX kernel's flags, so the table has it only where AMX is in use
  kernels().round_rows_bf16(x, t, t + 1, 0, k, y, bf16_padded_k(k));
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
                       const float* bias, uint16_t* gelu_b16, const Bf16QkvTarget* qkv) {
  if (!w.bf16_tiles) fail("gemm_bf16: the %s weights were not repacked (pack_bf16_tiles)", dtype_name(w.type));
  const int64_t kp = bf16_padded_k(w.cols);
  const KernelTable& kt = kernels();
  if (qkv) {
    const Bf16AttnDims& D = *qkv->dims;
    if (!kt.bf16_tiles) fail("gemm_bf16: results into the attention's layouts need AMX bf16");
    if (D.hd % 32 != 0 || D.n_q != m || D.n_kv != m || w.rows != (D.n_head + 2 * D.n_head_kv) * D.hd)
      fail("gemm_bf16: a %lld-row q/k/v GEMM over %lld tokens does not fit the attention's shape",
           static_cast<long long>(w.rows), static_cast<long long>(m));
    if (m % 32 != 0) {  // the padding tokens: zeros (the GEMM writes the m real ones)
      std::fill_n(qkv->bufs.q, D.n_head * D.nqp * D.hdk, uint16_t{0});
      std::fill_n(qkv->bufs.k, bf16_attn_k_elems(D), uint16_t{0});
      std::fill_n(qkv->bufs.v, bf16_attn_v_elems(D), uint16_t{0});
    }
  }
  parallel_row_groups(w.rows, pool, [&](int64_t r0, int64_t r1) { kt.gemm_bf16_rows(w, r0, r1, xb, m, kp, y, ys, bias, gelu_b16, qkv); });
}

}  // namespace tessera
