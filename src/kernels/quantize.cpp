#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_blocks.h"

namespace tessera {

namespace {

void put_half(uint8_t* p, float v) {
  const uint16_t h = float_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Nibbles of 32 values in Q4_1's order: element j < 16 low nibble of byte j, else high of j - 16.
void pack32(const int q[32], uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

// ggml's quantize_row_q4_0_ref / q5_0_ref: d = max / -half (max: the larger-magnitude extreme),
// written as fp16 at p; q = x/d + half + 0.5 truncated, at most 2·half − 1.
void symmetric_block(const float* x, int half, uint8_t* p, int q[32]) {
  float amax = 0, mx = 0;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      mx = x[i];
    }
  const float d = mx / -static_cast<float>(half), id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(p, d);
  for (int i = 0; i < 32; ++i) q[i] = std::min(2 * half - 1, static_cast<int>(x[i] * id + (static_cast<float>(half) + 0.5f)));
}

// ggml's quantize_row_q4_1_ref / q5_1_ref: d = (max − min) / levels and m = min, written as fp16
// at p; q = (x − min)/d + 0.5 truncated, within [0, levels].
void affine_block(const float* x, int levels, uint8_t* p, int q[32]) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < 32; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  const float d = (mx - mn) / static_cast<float>(levels), id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(p, d);
  put_half(p + 2, mn);
  for (int i = 0; i < 32; ++i) q[i] = std::clamp(static_cast<int>((x[i] - mn) * id + 0.5f), 0, levels);
}

// Q5_0 / Q5_1: the quants' fifth bits into the little-endian word at qh; q keeps the low nibbles.
void split_fifth_bits(int q[32], uint8_t* qh) {
  uint32_t h = 0;
  for (int i = 0; i < 32; ++i) h |= static_cast<uint32_t>(q[i] >> 4) << i, q[i] &= 15;
  std::memcpy(qh, &h, 4);
}

void q4_0(const float* x, uint8_t* p) {
  int q[32];
  symmetric_block(x, 8, p, q);
  pack32(q, p + 2);
}

void q4_1(const float* x, uint8_t* p) {
  int q[32];
  affine_block(x, 15, p, q);
  pack32(q, p + 4);
}

void q5_0(const float* x, uint8_t* p) {
  int q[32];
  symmetric_block(x, 16, p, q);
  split_fifth_bits(q, p + 2);
  pack32(q, p + 6);
}

void q5_1(const float* x, uint8_t* p) {
  int q[32];
  affine_block(x, 31, p, q);
  split_fifth_bits(q, p + 4);
  pack32(q, p + 8);
}

// Q4_K and Q5_K: per 32-element sub-block the searched scale and min (k_subblock_search), 6-bit
// scales and mins relative to the super-block's fp16 d and dmin; `levels` = 15 or 31. Q5_K's
// fifth bits go to qh (bit j of byte l: element l of sub-block j).
void k_quant_4_5(const float* x, uint8_t* p, int levels) {
  float scale[8], minv[8], w[256];
  double sum2 = 0;
  for (int i = 0; i < 256; ++i) sum2 += static_cast<double>(x[i]) * x[i];
  const float av = static_cast<float>(std::sqrt(sum2 / 256));
  for (int i = 0; i < 256; ++i) w[i] = av + std::fabs(x[i]);
  for (int j = 0; j < 8; ++j) k_subblock_search(x + 32 * j, w + 32 * j, levels, scale[j], minv[j]);
  const float smax = *std::max_element(scale, scale + 8), mmax = *std::max_element(minv, minv + 8);
  const float d = smax / 63.0f, dmin = mmax / 63.0f;
  put_half(p, d);
  put_half(p + 2, dmin);
  const float dh = fp16_to_float(float_to_fp16(d)), dminh = fp16_to_float(float_to_fp16(dmin));
  std::memset(p + 4, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const int sc = dh > 0 ? std::clamp(static_cast<int>(std::lround(scale[j] / dh)), 0, 63) : 0;
    const int mq = dminh > 0 ? std::clamp(static_cast<int>(std::lround(minv[j] / dminh)), 0, 63) : 0;
    q4k_set_scale_min(p + 4, j, sc, mq);
  }
  uint8_t* qh = p + 16;
  if (levels == 31) std::memset(qh, 0, 32);
  for (int j = 0; j < 8; ++j) {
    int sc, mq;
    q4k_scale_min(p + 4, j, sc, mq);
    const float d1 = dh * static_cast<float>(sc), m1 = dminh * static_cast<float>(mq);
    uint8_t* qs = p + (levels == 31 ? 48 : 16) + 32 * (j / 2);
    for (int i = 0; i < 32; ++i) {
      int q = d1 > 0 ? std::clamp(static_cast<int>(std::lround((x[32 * j + i] + m1) / d1)), 0, levels) : 0;
      if (levels == 31) {
        qh[i] = static_cast<uint8_t>(qh[i] | ((q >> 4) << j));
        q &= 15;
      }
      qs[i] = static_cast<uint8_t>(j % 2 ? (qs[i] & 0x0F) | (q << 4) : (qs[i] & 0xF0) | q);
    }
  }
}

// Q6_K: per 16-element sub-block the scale that maps its larger-magnitude extreme to -32 (as
// ggml's make_qx_quants starts from; ggml then refines it by a search), the 16 scales as int8
// relative to the super-block's d = max|scale| / 128, quants rounded to nearest within [-32, 31].
void q6_k(const float* x, uint8_t* p) {
  float scale[16], amax_s = 0.0f, max_s = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float amax = 0.0f, mx = 0.0f;
    for (int i = 0; i < 16; ++i)
      if (std::fabs(x[16 * s + i]) > amax) {
        amax = std::fabs(x[16 * s + i]);
        mx = x[16 * s + i];
      }
    scale[s] = mx / -32.0f;
    if (std::fabs(scale[s]) > amax_s) {
      amax_s = std::fabs(scale[s]);
      max_s = scale[s];
    }
  }
  std::memset(p, 0, kQ6KBytes);
  const float iscale = max_s != 0.0f ? -128.0f / max_s : 0.0f;
  put_half(p + 208, iscale != 0.0f ? 1.0f / iscale : 0.0f);
  const float dh = fp16_at(p + 208);
  for (int s = 0; s < 16; ++s) p[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(std::min(127, static_cast<int>(std::lround(iscale * scale[s])))));
  for (int e = 0; e < 256; ++e) {
    const float d = dh * static_cast<float>(static_cast<int8_t>(p[192 + e / 16]));
    const int q = (d != 0.0f ? std::clamp(static_cast<int>(std::lround(x[e] / d)), -32, 31) : 0) + 32;
    const int n = e / 128, sub = (e % 128) / 32, i = e % 32;
    p[64 * n + 32 * (sub % 2) + i] |= static_cast<uint8_t>((q & 15) << (4 * (sub / 2)));
    p[128 + 32 * n + i] |= static_cast<uint8_t>((q >> 4) << (2 * sub));
  }
}

// Q3_K (256 weights in 110 bytes: hmask[32], qs[64], 12 bytes of 6-bit scales, fp16 d; the layout
// kernels/exact_repack.cpp reads): x = d·(sc − 32)·q with q in −4..3 per 16-element sub-block.
// Each sub-block's signed scale is the one of a sweep that minimises the weighted squared error
// (weights av + |x|, as the K types above): candidates map the larger-magnitude extreme onto
// −4 − t·0.1 steps (t in −5..10, −4 being the wider side of the grid), the quants rounded, then
// the least-squares scale for those quants; then, as ggml's quantize_row_q3_K_ref, the 16 scales
// relative to the one of largest magnitude, which becomes −32 (d = that scale / −32, so d may be
// negative), and the quants rounded again under the 6-bit scales.
void q3_k(const float* x, uint8_t* p) {
  double sum2 = 0;
  for (int i = 0; i < 256; ++i) sum2 += static_cast<double>(x[i]) * x[i];
  const float av = static_cast<float>(std::sqrt(sum2 / 256));
  float scale[16], smax = 0.0f, smax_abs = 0.0f;
  for (int j = 0; j < 16; ++j) {
    const float* xj = x + 16 * j;
    float amax = 0.0f, mx = 0.0f;
    for (int i = 0; i < 16; ++i)
      if (std::fabs(xj[i]) > amax) amax = std::fabs(xj[i]), mx = xj[i];
    const auto error = [&](double sc) {
      double e = 0;
      for (int i = 0; i < 16; ++i) {
        const double q = std::clamp(std::nearbyint(xj[i] / sc), -4.0, 3.0), d = sc * q - xj[i];
        e += (av + std::fabs(xj[i])) * d * d;
      }
      return e;
    };
    double best_s = amax > 0 ? mx / -4.0 : 0.0, best = amax > 0 ? error(best_s) : 0.0;
    for (int t = -5; amax > 0 && t <= 10; ++t) {
      const double sc0 = mx / -(4.0 + 0.1 * t);
      double sxl = 0, sl2 = 0;
      for (int i = 0; i < 16; ++i) {
        const double q = std::clamp(std::nearbyint(xj[i] / sc0), -4.0, 3.0), w = av + std::fabs(xj[i]);
        sxl += w * xj[i] * q, sl2 += w * q * q;
      }
      if (sl2 <= 0) continue;
      const double sc = sxl / sl2, e = error(sc);
      if (e < best) best = e, best_s = sc;
    }
    scale[j] = static_cast<float>(best_s);
    if (std::fabs(scale[j]) > smax_abs) smax_abs = std::fabs(scale[j]), smax = scale[j];
  }
  std::memset(p, 0, 110);
  uint8_t* hmask = p;
  uint8_t* qs = p + 32;
  uint8_t* sc = p + 96;
  const float iscale = smax != 0.0f ? -32.0f / smax : 0.0f;
  put_half(p + 108, iscale != 0.0f ? 1.0f / iscale : 0.0f);
  const float dh = fp16_at(p + 108);
  for (int j = 0; j < 16; ++j) {
    const int l = std::clamp(static_cast<int>(std::lround(iscale * scale[j])), -32, 31) + 32;
    sc[j % 8] = static_cast<uint8_t>(sc[j % 8] | ((l & 15) << (4 * (j / 8))));
    sc[8 + j % 4] = static_cast<uint8_t>(sc[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
    const float d = dh * static_cast<float>(l - 32);
    for (int i = 0; i < 16; ++i) {
      const int e = 16 * j + i;
      const int q = (d != 0.0f ? std::clamp(static_cast<int>(std::lround(x[e] / d)), -4, 3) : 0) + 4;
      hmask[e % 32] = static_cast<uint8_t>(hmask[e % 32] | ((q >> 2) << (e / 32)));
      qs[32 * (e / 128) + e % 32] = static_cast<uint8_t>(qs[32 * (e / 128) + e % 32] | ((q & 3) << (2 * ((e % 128) / 32))));
    }
  }
}

// MLX's affine 4-bit group (group 32 or 64 elements): the fp16 scale and bias at p, then the
// quants as Q4_1's nibbles, 16 bytes per 32 elements (group 64: A4G64; group 32: a Q4_1 block).
void mlx_affine_group(const float* x, int group, uint8_t* p) {
  float s, bias;
  mlx_affine_scale_bias(x, group, s, bias);
  put_half(p, s);
  put_half(p + 2, bias);
  int q[64];
  // quants under the fp32 scale and bias (MLX rounds them to the weights' dtype only when storing)
  for (int i = 0; i < group; ++i) q[i] = std::clamp(static_cast<int>(std::round((x[i] - bias) / s)), 0, 15);
  for (int h = 0; h < group / 32; ++h) pack32(q + 32 * h, p + 4 + 16 * h);
}

void a4g64(const float* x, uint8_t* p) { mlx_affine_group(x, 64, p); }

}  // namespace

// MLX's affine rule, as its GPU kernels implement it (ml-explore/mlx at 846d176, 2026-08-22:
// mlx/backend/metal/kernels/quantized.h `affine_quantize`, the same in
// mlx/backend/cuda/quantized/affine_quantize.cu; mlx_lm.convert runs on the default device, the
// GPU on Apple silicon, so published checkpoints come from these), in fp32:
//   w_max starts at 0 (not -inf), w_min at the type's max: a group of only negative weights spans
//   [min, 0]; scale = max((w_max - w_min) / 15, 1e-7); the extreme of larger magnitude is the
//   edge (|min| > |max|: the min, scale positive; else the max, scale negated); q0 =
//   round(edge / scale); unless q0 is 0, scale = edge / q0 and bias = edge (so 0 is exactly
//   q = -q0 on the grid), else bias = 0. Quants: round((w - bias) / scale), at most 15; scale and
//   bias are stored rounded to the weights' dtype (fp16 here). round() is Metal's/CUDA's, halves
//   away from zero. MLX's CPU path (mlx/backend/cpu/quantized.cpp `quantize`, and the op's
//   fallback in mlx/ops.cpp `affine_quantize`) differs in two corners: w_max starts at -inf and
//   std::rint rounds halves to even.
void mlx_affine_scale_bias(const float* x, int group, float& scale, float& bias) {
  float mn = std::numeric_limits<float>::max(), mx = 0.0f;
  for (int i = 0; i < group; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  float s = std::max((mx - mn) / 15.0f, 1e-7f);
  const bool side = std::fabs(mn) > std::fabs(mx);
  if (!side) s = -s;
  const float edge = side ? mn : mx;
  const float q0 = std::round(edge / s);
  bias = 0.0f;
  if (q0 != 0.0f) {
    s = edge / q0;
    bias = edge;
  }
  scale = s;
}

void quantize_row_mlx_affine(int group, const float* x, int64_t n, uint8_t* dst) {
  if ((group != 32 && group != 64) || n % group != 0)
    fail("cannot quantize a row of %lld in MLX affine groups of %d", static_cast<long long>(n), group);
  const int64_t bytes = group == 64 ? kA4G64Bytes : 20;
  for (int64_t g = 0; g < n / group; ++g) mlx_affine_group(x + g * group, group, dst + g * bytes);
}

// The scale and (non-positive) offset of one 32-element sub-block that minimise the weighted
// squared error w_i (s * q_i + m - x_i)^2 over a sweep of candidate grids, as llama-quantize's
// K-quants choose them: each candidate maps [min, max] onto (levels + t) steps, t in -1..1 by
// 0.1, rounds, then solves the 2x2 least-squares problem for s and m given those quants (m
// clamped to <= 0, the format subtracting a non-negative min). The plain min/max range is the
// starting point, so the result is never worse on the weighted error. Weights: av + |x_i|, av
// the super-block's root mean square (the error matters more on larger weights).
void k_subblock_search(const float* x, const float* w, int levels, float& scale, float& minv) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < 32; ++i) mn = std::min(mn, x[i]), mx = std::max(mx, x[i]);
  mn = std::min(mn, 0.0f);
  if (mx <= mn) {
    scale = 0.0f, minv = -mn;
    return;
  }
  const auto error = [&](float s, float m, const float is) {
    double e = 0;
    for (int i = 0; i < 32; ++i) {
      const float q = std::clamp(std::nearbyint(is * (x[i] - m)), 0.0f, static_cast<float>(levels));
      const double d = static_cast<double>(s) * q + m - x[i];
      e += w[i] * d * d;
    }
    return e;
  };
  float best_s = (mx - mn) / static_cast<float>(levels), best_m = mn;
  double best = error(best_s, best_m, 1.0f / best_s);
  for (int step = 0; step <= 20; ++step) {
    const float is = (static_cast<float>(levels) - 1.0f + 0.1f * static_cast<float>(step)) / (mx - mn);
    double sw = 0, sx = 0, sl = 0, sl2 = 0, sxl = 0;
    for (int i = 0; i < 32; ++i) {
      const double q = std::clamp(std::nearbyint(is * (x[i] - mn)), 0.0f, static_cast<float>(levels));
      sw += w[i], sx += w[i] * x[i], sl += w[i] * q, sl2 += w[i] * q * q, sxl += w[i] * q * x[i];
    }
    const double D = sw * sl2 - sl * sl;
    if (D <= 0) continue;
    double s = (sw * sxl - sx * sl) / D, m = (sl2 * sx - sl * sxl) / D;
    if (m > 0) m = 0, s = sl2 > 0 ? sxl / sl2 : 0;
    if (s <= 0) continue;
    // the candidate's quants, rounded again under its own scale and offset
    const double e = error(static_cast<float>(s), static_cast<float>(m), static_cast<float>(1.0 / s));
    if (e < best) best = e, best_s = static_cast<float>(s), best_m = static_cast<float>(m);
  }
  scale = best_s, minv = -best_m;
}

bool can_quantize_to(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0:
    case DType::Q4_1: case DType::Q4_K: case DType::A4G64: case DType::Q5_0: case DType::Q5_1:
    case DType::Q5_K: case DType::Q6_K: case DType::Q3_K: return true;
    default: return false;
  }
}

namespace ref {

// ggml's quantize_row_q8_0_ref: d = amax / 127 (NaN ignored in amax), q = round(x / d) half away
// from zero; a quotient that is not finite (NaN or infinite x, d denormal) gives 0 — ggml casts
// whatever roundf returned, which C leaves undefined. The SIMD levels' twin
// (simd/elementwise_simd.inc).
void quantize_row_q8_0(const float* x, int64_t n, uint8_t* y) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    uint8_t* p = y + 34 * b;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_half(p, d);
    for (int i = 0; i < 32; ++i) {
      const float t = xb[i] * id;
      p[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::isfinite(t) ? std::lround(t) : 0));
    }
  }
}

}  // namespace ref

void quantize_row(DType t, const float* x, int64_t n, uint8_t* dst) {
  const DTypeInfo& ti = info(t);
  if (!can_quantize_to(t) || n % ti.block_elems != 0) fail("cannot quantize a row of %lld to %s", static_cast<long long>(n), ti.name);
  if (t == DType::Q8_0) return kernels().quantize_row_q8_0(x, n, dst);  // vectorised: a float mmproj's load
  for (int64_t b = 0; b < n / ti.block_elems; ++b) {
    const float* xb = x + b * ti.block_elems;
    uint8_t* p = dst + b * ti.block_bytes;
    switch (t) {
      case DType::F32: std::memcpy(p, xb, 4); break;
      case DType::F16: put_half(p, *xb); break;
      case DType::BF16: { const uint16_t h = float_to_bf16(*xb); std::memcpy(p, &h, 2); break; }
      case DType::Q4_0: q4_0(xb, p); break;
      case DType::Q4_1: q4_1(xb, p); break;
      case DType::Q4_K: k_quant_4_5(xb, p, 15); break;
      case DType::Q5_0: q5_0(xb, p); break;
      case DType::Q5_1: q5_1(xb, p); break;
      case DType::Q5_K: k_quant_4_5(xb, p, 31); break;
      case DType::Q6_K: q6_k(xb, p); break;
      case DType::Q3_K: q3_k(xb, p); break;
      default: a4g64(xb, p); break;
    }
  }
}

}  // namespace tessera
