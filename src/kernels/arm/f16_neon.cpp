// The fp16 GEMM (f16_tiles.h) and the fp16 attention's steps (attention_f16.h) on ARMv8.2 FP16
// arithmetic (FMLA .8h: every Apple Silicon core; compiled with +fp16, run only where the CPU
// reports it). Bit for bit the scalar twins, as the AVX512-FP16 kernel is: a tile line's 32 fp16
// lanes are four 8-lane vectors, a token's pair of activations one 32-bit broadcast, each lane
// one row's even or odd k; fused multiply-adds round once to nearest even (FPCR as the OS leaves
// it: round to nearest, FZ16 off, so fp16 subnormals are kept).
//
// A step is 32 rows × 2 tokens: 16 fp16 accumulators, emptied every kF16ChunkK values of k into
// fp32 sums kept in L1 (FCVTL / FCVTL2); at the end FADDP adds each row's parities (even + odd,
// the twin's order). Its speed on Apple's cores is not measured here (qemu).
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention_bf16.h"
#include "kernels/attention_f16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/f16_tiles.h"

namespace tessera::neon {

namespace {

constexpr int kTok = 2;
constexpr int64_t kChunkBlocks = kF16ChunkK / kBf16K;

// acc[((h · 4 + v) · kTok + j) · 8 ..]: vector v of half h (rows 16h + 4v .. + 3) for token j: four
// lanes (rows 4v, 4v + 1 by parity), then four (rows 4v + 2, 4v + 3).
void step(float* acc, const uint16_t* wt, const uint16_t* x0, int64_t nkb) {
  for (int64_t cb = 0; cb < nkb; cb += kChunkBlocks) {
    float16x8_t c[8 * kTok];
    for (float16x8_t& v : c) v = vreinterpretq_f16_u16(vdupq_n_u16(0));
    const int64_t nb = std::min(kChunkBlocks, nkb - cb);
    for (int64_t b = cb; b < cb + nb; ++b) {
      const uint16_t* w = wt + b * 1024;
      const uint16_t* x = x0 + b * 512;
      for (int l = 0; l < 16; ++l) {
        float16x8_t wv[8];
        for (int h = 0; h < 2; ++h)
          for (int v = 0; v < 4; ++v) wv[h * 4 + v] = vreinterpretq_f16_u16(vld1q_u16(w + h * 512 + 32 * l + 8 * v));
        for (int j = 0; j < kTok; ++j) {
          uint32_t pair;
          std::memcpy(&pair, x + j * kBf16K + 2 * l, 4);
          const float16x8_t xv = vreinterpretq_f16_u32(vdupq_n_u32(pair));
          for (int q = 0; q < 8; ++q) c[q * kTok + j] = vfmaq_f16(c[q * kTok + j], wv[q], xv);
        }
      }
    }
    for (int i = 0; i < 8 * kTok; ++i) {
      float* a = acc + 8 * i;
      vst1q_f32(a, vaddq_f32(vld1q_f32(a), vcvt_f32_f16(vget_low_f16(c[i]))));
      vst1q_f32(a + 4, vaddq_f32(vld1q_f32(a + 4), vcvt_high_f32_f16(c[i])));
    }
  }
}

}  // namespace

void gemm_f16_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xh, int64_t m, int64_t kp, float* y,
                   int64_t ys, const float* bias) {
  const int64_t nkb = kp / kBf16K;
  const uint16_t* tiles = reinterpret_cast<const uint16_t*>(w.f16_tiles);
  constexpr int64_t block = 64;  // tokens per pass over the groups: their activations stay in L2
  for (int64_t t0 = 0; t0 < m; t0 += block)
    for (int64_t g = r0 / 32; g * 32 < r1; ++g) {
      const uint16_t* wt = tiles + g * nkb * 1024;
      const int64_t r = g * 32, nr = std::min<int64_t>(32, r1 - r);
      for (int64_t tc = t0; tc < std::min(m, t0 + block); tc += kTok) {
        const uint16_t* x0 = xh + (tc / 16) * nkb * 512 + (tc % 16) * kBf16K;
        alignas(16) float acc[8 * kTok * 8];
        for (int q = 0; q < 8; ++q)  // rows r + 4q .. + 3: the bias in even lanes
          for (int j = 0; j < kTok; ++j)
            for (int e = 0; e < 8; ++e) {
              const int64_t row = r + 4 * q + e / 2;
              acc[(q * kTok + j) * 8 + e] = bias && e % 2 == 0 && row < w.rows ? bias[row] : 0.0f;
            }
        step(acc, wt, x0, nkb);
        for (int j = 0; j < kTok && tc + j < m; ++j)
          for (int q = 0; q < 8; ++q) {
            const float* a = acc + (q * kTok + j) * 8;
            alignas(16) float out[4];
            vst1q_f32(out, vpaddq_f32(vld1q_f32(a), vld1q_f32(a + 4)));
            for (int e = 0; e < 4 && 4 * q + e < nr; ++e) y[(tc + j) * ys + r + 4 * q + e] = out[e];
          }
      }
    }
}

void round_rows_f16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp) {
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t k0 = 0; k0 < kp; k0 += 8) {
      alignas(16) float in[8] = {};
      const float* src = x + t * xs + k0;
      if (k0 + 8 <= k) std::memcpy(in, src, sizeof in);
      else if (k0 < k) std::memcpy(in, src, static_cast<size_t>(k - k0) * 4);
      const float16x8_t h = vcombine_f16(vcvt_f16_f32(vld1q_f32(in)), vcvt_f16_f32(vld1q_f32(in + 4)));
      vst1q_u16(y + bf16_act_index(t, k0, kp), vreinterpretq_u16_f16(h));
    }
}

void pack_kv_f16(const float* k, const float* v, int64_t kv_stride, int g, int64_t hd, int64_t n_kv, int64_t j0,
                 int64_t j1, uint16_t* kt, uint16_t* vt) {
  const int64_t nkb_k = bf16_padded_k(hd) / kBf16K, nkb_v = bf16_padded_k(n_kv) / kBf16K;
  alignas(16) uint16_t buf[8];
  auto convert8 = [&](const float* src, int64_t n) {  // n of 8 valid, zero past
    alignas(16) float in[8] = {};
    std::memcpy(in, src, static_cast<size_t>(std::clamp<int64_t>(n, 0, 8)) * 4);
    vst1q_u16(buf, vreinterpretq_u16_f16(vcombine_f16(vcvt_f16_f32(vld1q_f32(in)), vcvt_f16_f32(vld1q_f32(in + 4)))));
  };
  for (int64_t j = j0; j < j1; ++j)  // a key's dim pairs go one per line of its tile
    for (int64_t d0 = 0; d0 < hd; d0 += 8) {
      convert8(k + j * kv_stride + g * hd + d0, hd - d0);
      for (int e = 0; e < 8 && d0 + e < hd; ++e) kt[bf16_weight_index(j, d0 + e, nkb_k)] = buf[e];
    }
  for (int64_t j = j0; j < j1; j += 2) {  // keys j, j + 1 interleave in one line of the transpose's tile
    const bool two = j + 1 < j1;
    for (int64_t d0 = 0; d0 < hd; d0 += 8) {
      convert8(v + j * kv_stride + g * hd + d0, hd - d0);
      const uint16x8_t a = vld1q_u16(buf);
      uint16x8_t b = vdupq_n_u16(0);
      if (two) convert8(v + (j + 1) * kv_stride + g * hd + d0, hd - d0), b = vld1q_u16(buf);
      uint16_t* dst = vt + bf16_weight_index(d0, j, nkb_v);  // 8 dims × the pair: 16 values
      vst1q_u16(dst, vzip1q_u16(a, b));
      vst1q_u16(dst + 8, vzip2q_u16(a, b));
    }
  }
}

void softmax_rows_f16(const float* S, int64_t ss, int64_t rows, int64_t n_kv, float c, uint16_t* P, float* l) {
  const int64_t nkp = bf16_padded_k(n_kv);
  const float32x4_t C = vdupq_n_f32(c), lo = vdupq_n_f32(-126.0f);
  for (int64_t t = 0; t < rows; ++t) {
    const float* s = S + t * ss;
    float m = -INFINITY;
    for (int64_t j = 0; j < n_kv; ++j) m = std::max(m, s[j]);
    const float32x4_t nmc = vdupq_n_f32(-(m * c));
    float32x4_t part[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t j = 0; j < nkp; j += 8) {
      alignas(16) float in[8] = {};
      std::memcpy(in, s + j, static_cast<size_t>(std::clamp<int64_t>(n_kv - j, 0, 8)) * 4);
      float32x4_t e[2];
      for (int q = 0; q < 2; ++q) {  // exp2_bf16attn of fma(s, c, -m·c), four lanes at a time
        const float32x4_t tv = vmaxq_f32(vfmaq_f32(nmc, vld1q_f32(in + 4 * q), C), lo);
        const float32x4_t n = vrndnq_f32(tv), f = vsubq_f32(tv, n);
        float32x4_t p = vdupq_n_f32(kExp2Poly[4]);
        for (int i = 3; i >= 0; --i) p = vfmaq_f32(vdupq_n_f32(kExp2Poly[i]), p, f);
        const int32x4_t bits = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
        e[q] = vmulq_f32(p, vreinterpretq_f32_s32(bits));
      }
      if (j + 8 > n_kv) {  // keys past n_kv weigh 0
        alignas(16) float ev[8];
        vst1q_f32(ev, e[0]), vst1q_f32(ev + 4, e[1]);
        for (int64_t i = std::max<int64_t>(0, n_kv - j); i < 8; ++i) ev[i] = 0.0f;
        e[0] = vld1q_f32(ev), e[1] = vld1q_f32(ev + 4);
      }
      const float16x8_t h = vcombine_f16(vcvt_f16_f32(e[0]), vcvt_f16_f32(e[1]));
      vst1q_u16(P + bf16_act_index(t, j, nkp), vreinterpretq_u16_f16(h));
      // key j + i into partial sum (j + i) mod 16: vectors (j mod 16) / 4 and the next
      const int p0 = static_cast<int>((j % 16) / 4);
      part[p0] = vaddq_f32(part[p0], vcvt_f32_f16(vget_low_f16(h)));
      part[p0 + 1] = vaddq_f32(part[p0 + 1], vcvt_high_f32_f16(h));
    }
    alignas(16) float sums[16];
    for (int q = 0; q < 4; ++q) vst1q_f32(sums + 4 * q, part[q]);
    for (int w = 8; w >= 1; w /= 2)
      for (int i = 0; i < w; ++i) sums[i] += sums[i + w];
    l[t] = sums[0];
  }
}

}  // namespace tessera::neon
