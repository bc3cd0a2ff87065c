// Small helpers shared by the x86 kernel files (compiled with their ISA flags).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"

namespace tessera::avx512 {

// A block's fp16 scale or min, as fp32 (F16C).
inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Calls f(std::integral_constant<DType, T>{}) for the weight types the kernels specialise;
// returns false for any other type (callers fall back to the scalar twin).
template <typename F>
bool with_weight_type(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(std::integral_constant<DType, DType::F32>{}); return true;
    case DType::F16: f(std::integral_constant<DType, DType::F16>{}); return true;
    case DType::BF16: f(std::integral_constant<DType, DType::BF16>{}); return true;
    case DType::Q8_0: f(std::integral_constant<DType, DType::Q8_0>{}); return true;
    case DType::Q4_0: f(std::integral_constant<DType, DType::Q4_0>{}); return true;
    case DType::Q4_1: f(std::integral_constant<DType, DType::Q4_1>{}); return true;
    default: return false;
  }
}

}  // namespace tessera::avx512
