// Small helpers shared by the x86 kernel files (compiled with their ISA flags).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tessera::avx512 {

// A block's fp16 scale or min, as fp32 (F16C).
inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

}  // namespace tessera::avx512
