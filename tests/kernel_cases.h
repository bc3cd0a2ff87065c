// Random operands of every weight type, with their exact float64 values, shared by the
// GoogleTest kernel suite and the standalone cross-ISA check (tests/kernel_check.cpp).
#pragma once
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"

namespace tessera::test {


// Random weights of a type, plus the exact value of every element in double.
struct RandomMatrix {
  std::vector<uint8_t> bytes;
  std::vector<double> exact;  // rows x cols
  WeightMatrix w;
};

inline RandomMatrix make_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  RandomMatrix m;
  const size_t rb = row_bytes(t, static_cast<uint64_t>(cols));
  m.bytes.resize(rb * static_cast<size_t>(rows));
  m.exact.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = m.bytes.data() + r * rb;
    double* ex = m.exact.data() + r * cols;
    for (int64_t b = 0; b < cols; ++b) {
      if (t == DType::F32) {
        const float v = u(rng);
        std::memcpy(row + 4 * b, &v, 4);
        ex[b] = v;
      } else if (t == DType::F16) {
        const uint16_t h = float_to_fp16(u(rng));
        std::memcpy(row + 2 * b, &h, 2);
        ex[b] = fp16_to_float(h);
      } else if (t == DType::BF16) {
        const uint16_t h = float_to_bf16(u(rng));
        std::memcpy(row + 2 * b, &h, 2);
        ex[b] = bf16_to_float(h);
      }
    }
    if (t == DType::F32 || t == DType::F16 || t == DType::BF16) continue;
    if (t == DType::Q4_K) {  // super-blocks of 256: fp16 d, dmin, 6-bit sub-scales/mins, nibbles
      for (int64_t sb = 0; sb < cols / 256; ++sb) {
        uint8_t* p = row + kQ4KBytes * sb;
        const uint16_t d = float_to_fp16(0.0005f + 0.002f * std::fabs(u(rng))), dm = float_to_fp16(0.001f * std::fabs(u(rng)));
        std::memcpy(p, &d, 2);
        std::memcpy(p + 2, &dm, 2);
        for (int i = 0; i < 12; ++i) p[4 + i] = static_cast<uint8_t>(rng());
        for (int i = 0; i < 128; ++i) p[16 + i] = static_cast<uint8_t>(rng());
        for (int j = 0; j < 8; ++j) {
          int sc, mn;
          q4k_scale_min(p + 4, j, sc, mn);
          for (int l = 0; l < 32; ++l) {
            const uint8_t byte = p[16 + 32 * (j / 2) + l];
            const int q = j % 2 ? byte >> 4 : byte & 0xf;
            ex[256 * sb + 32 * j + l] = static_cast<double>(fp16_to_float(d)) * sc * q - static_cast<double>(fp16_to_float(dm)) * mn;
          }
        }
      }
      continue;
    }
    if (t == DType::Q5_K || t == DType::Q6_K) {  // packed here from random quants, per ggml's layout
      const bool q6 = t == DType::Q6_K;
      for (int64_t sb = 0; sb < cols / 256; ++sb) {
        uint8_t* p = row + (q6 ? kQ6KBytes : kQ5KBytes) * sb;
        std::memset(p, 0, q6 ? kQ6KBytes : kQ5KBytes);
        double* exs = ex + 256 * sb;
        if (q6) {  // ql[128], qh[64], int8 scales[16], fp16 d; element e's scale is sc[e / 16]
          const uint16_t d = float_to_fp16(0.0002f + 0.001f * std::fabs(u(rng)));
          std::memcpy(p + 208, &d, 2);
          for (int s = 0; s < 16; ++s) p[192 + s] = static_cast<uint8_t>(rng());
          for (int e = 0; e < 256; ++e) {
            const int q = static_cast<int>(rng() % 64), n = e / 128, sub = (e % 128) / 32, i = e % 32;
            p[64 * n + 32 * (sub % 2) + i] |= static_cast<uint8_t>((q & 15) << (4 * (sub / 2)));
            p[128 + 32 * n + i] |= static_cast<uint8_t>((q >> 4) << (2 * sub));
            exs[e] = static_cast<double>(fp16_to_float(d)) * static_cast<int8_t>(p[192 + e / 16]) * (q - 32);
          }
        } else {  // Q4_K's header, qh[32] (bit j: sub-block j's fifth bits), nibbles as Q4_K's
          const uint16_t d = float_to_fp16(0.0005f + 0.002f * std::fabs(u(rng))), dm = float_to_fp16(0.001f * std::fabs(u(rng)));
          std::memcpy(p, &d, 2);
          std::memcpy(p + 2, &dm, 2);
          for (int i = 0; i < 12; ++i) p[4 + i] = static_cast<uint8_t>(rng());
          for (int j = 0; j < 8; ++j) {
            int sc, mn;
            q4k_scale_min(p + 4, j, sc, mn);
            for (int l = 0; l < 32; ++l) {
              const int q = static_cast<int>(rng() % 32);
              p[48 + 32 * (j / 2) + l] |= static_cast<uint8_t>((q & 15) << (4 * (j % 2)));
              p[16 + l] |= static_cast<uint8_t>((q >> 4) << j);
              exs[32 * j + l] = static_cast<double>(fp16_to_float(d)) * sc * q - static_cast<double>(fp16_to_float(dm)) * mn;
            }
          }
        }
      }
      continue;
    }
    if (t == DType::Q5_0 || t == DType::Q5_1) {  // fp16 d (and m), a 32-bit word of fifth bits, nibbles
      const bool affine = t == DType::Q5_1;
      for (int64_t b = 0; b < cols / 32; ++b) {
        uint8_t* p = row + (affine ? kQ5_1Bytes : kQ5_0Bytes) * b;
        std::memset(p, 0, affine ? kQ5_1Bytes : kQ5_0Bytes);
        const uint16_t d = float_to_fp16(0.001f + 0.03f * std::fabs(u(rng))), mn = float_to_fp16(0.3f * u(rng));
        std::memcpy(p, &d, 2);
        if (affine) std::memcpy(p + 2, &mn, 2);
        uint8_t* qh = p + (affine ? 4 : 2);
        uint32_t h = 0;
        for (int e = 0; e < 32; ++e) {
          const int q = static_cast<int>(rng() % 32);
          qh[4 + e % 16] |= static_cast<uint8_t>((q & 15) << (e < 16 ? 0 : 4));
          h |= static_cast<uint32_t>(q >> 4) << e;
          ex[32 * b + e] = affine ? static_cast<double>(fp16_to_float(d)) * q + fp16_to_float(mn)
                                  : static_cast<double>(fp16_to_float(d)) * (q - 16);
        }
        for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(h >> (8 * i));
      }
      continue;
    }
    if (t == DType::Q2_K) {  // random scale bytes and quants; small fp16 d and dmin (ggml's block_q2_K)
      for (int64_t sb = 0; sb < cols / 256; ++sb) {
        uint8_t* p = row + sb * 84;
        for (int i = 0; i < 80; ++i) p[i] = static_cast<uint8_t>(rng());
        const uint16_t d = float_to_fp16(0.001f + 0.01f * std::fabs(u(rng))), dm = float_to_fp16(0.001f + 0.01f * std::fabs(u(rng)));
        std::memcpy(p + 80, &d, 2);
        std::memcpy(p + 82, &dm, 2);
        for (int e = 0; e < 256; ++e) {
          const int n = e / 128, j = (e % 128) / 32, h = (e % 32) / 16, l = e % 16;
          const int sc = p[8 * n + 2 * j + h], q = (p[16 + 32 * n + 16 * h + l] >> (2 * j)) & 3;
          ex[sb * 256 + e] = static_cast<double>(fp16_to_float(d)) * (sc & 15) * q - static_cast<double>(fp16_to_float(dm)) * (sc >> 4);
        }
      }
      continue;
    }
    if (t == DType::Q3_K) {  // random hmask, quants and 6-bit scales; a small fp16 d (ggml's block_q3_K)
      for (int64_t sb = 0; sb < cols / 256; ++sb) {
        uint8_t* p = row + sb * 110;
        for (int i = 0; i < 108; ++i) p[i] = static_cast<uint8_t>(rng());
        const uint16_t d = float_to_fp16(0.0005f + 0.002f * std::fabs(u(rng)));
        std::memcpy(p + 108, &d, 2);
        for (int e = 0; e < 256; ++e) {
          const int s = e / 16, n = e / 128, j = (e % 128) / 32, l = e % 32;
          const int lo4 = s < 8 ? p[96 + s] & 15 : p[96 + s - 8] >> 4, hi2 = (p[104 + s % 4] >> (2 * (s / 4))) & 3;
          const int q = ((p[32 + 32 * n + l] >> (2 * j)) & 3) - ((p[l] >> (4 * n + j)) & 1 ? 0 : 4);
          ex[sb * 256 + e] = static_cast<double>(fp16_to_float(d)) * ((lo4 | hi2 << 4) - 32) * q;
        }
      }
      continue;
    }
    if (t == DType::IQ4_NL || t == DType::IQ4_XS) {  // random nibbles and (IQ4_XS) 6-bit block scales
      static constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};  // ggml's
      const bool xs = t == DType::IQ4_XS;
      const int64_t n = xs ? 256 : 32;
      for (int64_t sb = 0; sb < cols / n; ++sb) {
        uint8_t* p = row + sb * (xs ? 136 : 18);
        const uint16_t d = float_to_fp16(xs ? 0.0002f + 0.001f * std::fabs(u(rng)) : 0.0002f + 0.004f * std::fabs(u(rng)));
        std::memcpy(p, &d, 2);
        uint8_t* qs = p + (xs ? 8 : 2);
        for (int i = xs ? 2 : 18; i < (xs ? 136 : 18); ++i) p[i] = static_cast<uint8_t>(rng());
        if (!xs)
          for (int i = 0; i < 16; ++i) qs[i] = static_cast<uint8_t>(rng());
        for (int e = 0; e < n; ++e) {
          const int ib = e / 32, l = e % 32;
          // IQ4_XS: block ib's ls from scales_l (nibble ib % 2 of byte ib / 2) and 2 bits of scales_h
          const int ls = xs ? (((p[4 + ib / 2] >> (4 * (ib % 2))) & 15) | ((((p[2] | p[3] << 8) >> (2 * ib)) & 3) << 4)) - 32 : 1;
          const uint8_t* q = qs + 16 * ib;
          ex[sb * n + e] = static_cast<double>(fp16_to_float(d)) * ls * kLevels[l < 16 ? q[l] & 15 : q[l - 16] >> 4];
        }
      }
      continue;
    }
    const int64_t group = t == DType::A4G64 ? 64 : 32;
    for (int64_t b = 0; b < cols / group; ++b) {
      const uint16_t d = float_to_fp16(0.001f + 0.05f * std::fabs(u(rng)));
      const uint16_t mn = float_to_fp16(0.3f * u(rng));
      const double dd = fp16_to_float(d), mm = fp16_to_float(mn);
      double* exb = ex + group * b;
      if (t == DType::Q8_0) {
        uint8_t* p = row + 34 * b;
        std::memcpy(p, &d, 2);
        for (int j = 0; j < 32; ++j) {
          const int8_t q = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
          p[2 + j] = static_cast<uint8_t>(q);
          exb[j] = dd * q;
        }
      } else {  // Q4_0, Q4_1, A4G64: nibble pairs (j, j + 16) per 32 elements
        const bool affine = t != DType::Q4_0;
        const int64_t bytes = t == DType::A4G64 ? kA4G64Bytes : affine ? 20 : 18;
        uint8_t* p = row + bytes * b;
        std::memcpy(p, &d, 2);
        if (affine) std::memcpy(p + 2, &mn, 2);
        uint8_t* qs = p + (affine ? 4 : 2);
        for (int j = 0; j < group / 2; ++j) {
          const int lo = static_cast<int>(rng() % 16), hi = static_cast<int>(rng() % 16);
          qs[j] = static_cast<uint8_t>(lo | (hi << 4));
          const int e = (j / 16) * 32 + j % 16;  // element of the low nibble
          exb[e] = affine ? dd * lo + mm : dd * (lo - 8);
          exb[e + 16] = affine ? dd * hi + mm : dd * (hi - 8);
        }
      }
    }
  }
  m.w.type = t;
  m.w.rows = rows;
  m.w.cols = cols;
  m.w.data = m.bytes.data();
  m.w.row_stride = rb;
  return m;
}

inline std::vector<float> random_x(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = n(rng);
  return x;
}

struct Case {
  DType type;
  std::vector<int64_t> ks;
};

inline const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {DType::F32, {1, 5, 15, 16, 17, 31, 33, 100, 576}},
      {DType::F16, {1, 7, 16, 17, 48, 100, 576}},
      {DType::BF16, {3, 16, 31, 64, 100}},
      {DType::Q8_0, {32, 64, 96, 576, 1536}},
      {DType::Q4_0, {32, 96, 576, 1536}},
      {DType::Q4_1, {32, 64, 160, 576, 1536}},
      {DType::Q4_K, {256, 512, 768, 1536}},
      {DType::A4G64, {64, 192, 576, 1536}},
      {DType::Q5_0, {32, 96, 576, 1536}},
      {DType::Q5_1, {32, 64, 160, 576}},
      {DType::Q5_K, {256, 768, 1536}},
      {DType::Q6_K, {256, 512, 1536}},
      {DType::IQ4_NL, {32, 96, 576}},
      {DType::IQ4_XS, {256, 1536}},
      {DType::Q3_K, {256, 1536}},
      {DType::Q2_K, {256, 1536}},
  };
  return c;
}


// Exact dot product of weight row r with token t of x (row length W.w.cols), and sum |w x|.
inline double exact_dot(const RandomMatrix& W, const std::vector<float>& x, int64_t r, int64_t t, double* mag) {
  const int64_t K = W.w.cols;
  double want = 0, m = 0;
  for (int64_t k = 0; k < K; ++k) {
    const double p = W.exact[static_cast<size_t>(r * K + k)] * x[static_cast<size_t>(t * K + k)];
    want += p;
    m += std::fabs(p);
  }
  *mag = m;
  return want;
}

}  // namespace tessera::test
