// Scalar twin of the SIMD exp used by attention's online softmax (x86/vec16.h exp16_nonpos,
// arm's equivalent): the same clamps, range reduction, polynomial and power-of-two scaling,
// operation for operation, so softmax weights are bitwise equal at every ISA level.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tessera {

// exp(x) for x <= 0 (larger x is clamped to 0); within 2 ulp; 0 only below -87.33 (clamped).
inline float exp_nonpos(float x) {
  x = x < 0.0f ? x : 0.0f;          // as minps(x, 0)
  x = x > -87.33f ? x : -87.33f;    // as maxps(x, -87.33)
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float nn = 0.0f - n;
  float r = std::fma(nn, 0.693359375f, x);
  r = std::fma(nn, -2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p, r * r, r + 1.0f);
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, 4);
  return p * two_n;
}

}  // namespace tessera
