// exp(x) for x <= 0, written once: range reduction x = n ln2 + r (ln2 split in two for an exact
// first step), a degree-6 polynomial in r, and the power of two 2^n (n >= -126: an exact normal
// number) applied by one correctly rounded multiply. Within 2 ulp; larger x is clamped to 0 and
// x below -87.33 to -87.33.
//
// The steps are a template over a lane type L (one float here, Lane1; 16 lanes in
// kernels/simd/vec16.h, Lane16, per ISA level), so attention's online softmax, SwiGLU and the
// encoder's softmax_row compute the same bits at every ISA level and in their scalar twins.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tessera {

template <class L>
[[gnu::always_inline]] inline typename L::V exp_nonpos_lanes(typename L::V x) {
  using V = typename L::V;
  x = L::max(L::min(x, L::set(0.0f)), L::set(-87.33f));
  const V n = L::round(L::mul(x, L::set(1.44269504088896341f)));
  const V nn = L::sub(L::set(0.0f), n);
  V r = L::fma(nn, L::set(0.693359375f), x);
  r = L::fma(nn, L::set(-2.12194440e-4f), r);
  V p = L::set(1.9875691500e-4f);
  p = L::fma(p, r, L::set(1.3981999507e-3f));
  p = L::fma(p, r, L::set(8.3334519073e-3f));
  p = L::fma(p, r, L::set(4.1665795894e-2f));
  p = L::fma(p, r, L::set(1.6666665459e-1f));
  p = L::fma(p, r, L::set(5.0000001201e-1f));
  p = L::fma(p, L::mul(r, r), L::add(r, L::set(1.0f)));
  return L::scale_pow2(p, n);
}

// One lane: min/max as x86's minps/maxps (the second operand where either is NaN).
struct Lane1 {
  using V = float;
  static float set(float a) { return a; }
  static float min(float a, float b) { return a < b ? a : b; }
  static float max(float a, float b) { return a > b ? a : b; }
  static float round(float a) { return std::nearbyint(a); }
  static float mul(float a, float b) { return a * b; }
  static float add(float a, float b) { return a + b; }
  static float sub(float a, float b) { return a - b; }
  static float fma(float a, float b, float c) { return std::fma(a, b, c); }
  static float scale_pow2(float a, float n) {
    const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
    float two_n;
    std::memcpy(&two_n, &bits, 4);
    return a * two_n;
  }
};

[[gnu::always_inline]] inline float exp_nonpos(float x) { return exp_nonpos_lanes<Lane1>(x); }

}  // namespace tessera
