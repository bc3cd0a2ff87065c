// Shared helpers for the tests: paths to the fixtures and the default model.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

namespace tessera::test {

inline std::string source_path(const std::string& rel) { return std::string(TESSERA_SOURCE_DIR) + "/" + rel; }
inline std::string model_path() { return source_path("models/SmolLM2-135M-Instruct.Q4_1.gguf"); }

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace tessera::test

#include <cstring>

#include "core/dtype.h"
#include "core/fp16.h"
#include "kernels/quant_blocks.h"

namespace tessera::test {

// Exact value of every element of a row, in double (no fp32 rounding of d*q+m).
inline void dequantize_row_f64(DType t, const uint8_t* row, double* out, int64_t n) {
  auto half = [](const uint8_t* p) { uint16_t h; std::memcpy(&h, p, 2); return static_cast<double>(fp16_to_float(h)); };
  for (int64_t k = 0; k < n; ++k) {
    const uint8_t* b;
    const int j = static_cast<int>(k % 32);
    switch (t) {
      case DType::F32: { float v; std::memcpy(&v, row + 4 * k, 4); out[k] = v; break; }
      case DType::F16: out[k] = half(row + 2 * k); break;
      case DType::BF16: { uint16_t h; std::memcpy(&h, row + 2 * k, 2); out[k] = bf16_to_float(h); break; }
      case DType::Q8_0: b = row + (k / 32) * 34; out[k] = half(b) * static_cast<int8_t>(b[2 + j]); break;
      case DType::Q4_0: b = row + (k / 32) * 18; out[k] = half(b) * ((j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4) - 8); break;
      case DType::Q4_1: b = row + (k / 32) * 20; out[k] = half(b) * (j < 16 ? b[4 + j] & 15 : b[4 + j - 16] >> 4) + half(b + 2); break;
      // the 5- and 6-bit types, read straight from ggml's block layouts (ggml-common.h)
      case DType::Q5_0:
      case DType::Q5_1: {
        const bool affine = t == DType::Q5_1;
        b = row + (k / 32) * (affine ? 24 : 22);
        const uint8_t* qh = b + (affine ? 4 : 2);
        const uint32_t h = qh[0] | qh[1] << 8 | qh[2] << 16 | static_cast<uint32_t>(qh[3]) << 24;
        const int q = (j < 16 ? qh[4 + j] & 15 : qh[4 + j - 16] >> 4) | ((h >> j) & 1) << 4;
        out[k] = affine ? half(b) * q + half(b + 2) : half(b) * (q - 16);
        break;
      }
      case DType::Q4_K:
      case DType::Q5_K: {  // Q5_K: Q4_K's header, then 32 bytes of fifth bits (bit `sub` of byte j), then the nibbles
        const bool five = t == DType::Q5_K;
        b = row + (k / 256) * (five ? 176 : 144);
        const int sub = static_cast<int>(k % 256) / 32;
        int sc, mn;
        q4k_scale_min(b + 4, sub, sc, mn);
        const uint8_t byte = b[(five ? 48 : 16) + 32 * (sub / 2) + j];
        const int q = (sub % 2 ? byte >> 4 : byte & 15) | (five ? ((b[16 + j] >> sub) & 1) << 4 : 0);
        out[k] = half(b) * sc * q - half(b + 2) * mn;
        break;
      }
      case DType::Q6_K: {
        b = row + (k / 256) * 210;
        const int e = static_cast<int>(k % 256), n = e / 128, sub = (e % 128) / 32;
        const int lo = (b[64 * n + 32 * (sub % 2) + j] >> (4 * (sub / 2))) & 15, hi = (b[128 + 32 * n + j] >> (2 * sub)) & 3;
        out[k] = half(b + 208) * static_cast<int8_t>(b[192 + e / 16]) * ((lo | hi << 4) - 32);
        break;
      }
      case DType::Q3_K: {  // ggml's block_q3_K: hmask[32], qs[64], scales[12] (6-bit, offset 32), fp16 d
        b = row + (k / 256) * 110;
        const int e = static_cast<int>(k % 256), s = e / 16;
        const int lo4 = s < 8 ? b[96 + s] & 15 : b[96 + s - 8] >> 4, hi2 = (b[96 + 8 + s % 4] >> (2 * (s / 4))) & 3;
        // ggml's dequantize_row_q3_K walks 128 elements at a time: 4 shifts of qs[32], each 2 x 16
        const int chunk = e / 128, shift = (e % 128) / 32, l = e % 32;
        const int q2 = (b[32 + 32 * chunk + l] >> (2 * shift)) & 3;
        const bool h = (b[l] >> (4 * chunk + shift)) & 1;
        out[k] = half(b + 108) * ((lo4 | hi2 << 4) - 32) * (q2 - (h ? 0 : 4));
        break;
      }
      case DType::IQ4_NL: {  // fp16 d, 16 bytes of nibbles indexing ggml's kvalues_iq4nl
        static constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        b = row + (k / 32) * 18;
        out[k] = half(b) * kLevels[j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4];
        break;
      }
      case DType::Q2_K: {  // ggml's block_q2_K: scales[16] (low nibble sc, high m), qs[64], fp16 d, dmin
        b = row + (k / 256) * 84;
        const int e = static_cast<int>(k % 256), chunk = e / 128, shift = (e % 128) / 32, l = e % 32;
        const int sc = b[8 * chunk + 2 * shift + l / 16], q = (b[16 + 32 * chunk + l] >> (2 * shift)) & 3;
        // ggml: dl·q − ml with dl = d·sc, ml = dmin·m in f32 (exact products): one rounding
        out[k] = static_cast<float>(half(b + 80) * (sc & 15) * q - half(b + 82) * (sc >> 4));
        break;
      }
      case DType::IQ4_XS: {  // fp16 d, 16 bits scales_h, 4 bytes scales_l, then 8 x 16 bytes of nibbles
        static constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        b = row + (k / 256) * 136;
        const int ib = static_cast<int>(k % 256) / 32;
        const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | ((((b[2] | b[3] << 8) >> (2 * ib)) & 3) << 4);
        const uint8_t* qs = b + 8 + 16 * ib;
        // ggml: dl = d·(ls − 32) in f32 (exact), then dl·level rounded once: that float
        out[k] = static_cast<float>(half(b) * (ls - 32) * kLevels[j < 16 ? qs[j] & 15 : qs[j - 16] >> 4]);
        break;
      }
      default: out[k] = 0; break;
    }
  }
}

}  // namespace tessera::test
