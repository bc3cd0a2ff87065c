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
      default: out[k] = 0; break;
    }
  }
}

}  // namespace tessera::test
