// A 16-lane fp32 vector for kernels written once and compiled per ISA level (AVX-512, AVX2+FMA,
// NEON): one zmm register, two ymm registers or four NEON q registers. Every operation is
// lane-wise or uses the fixed reduction tree of ref/ (lanes 0..7 + 8..15, then halves again),
// so a kernel written against V16 gives bitwise the same results at every level and in its
// scalar twin. Each ISA build puts the same names in its own inline namespace
// (TESSERA_SIMD_LEVEL), so object files built with different flags never share a definition.
#pragma once
#if defined(__aarch64__)
#include "kernels/simd/vec16_neon.h"
#else
#include "kernels/simd/vec16_x86.h"
#endif

namespace tessera::simd {
inline namespace TESSERA_SIMD_LEVEL {

// exp(x) for x <= 0 (softmax numerators): x = n ln2 + r, degree-6 polynomial, n >= -126 so
// 2^n is an exact normal number. Same steps as exp_nonpos() in kernels/exp_poly.h.
inline V16 exp16_nonpos(V16 x) {
  x = max16(min16(x, zero16()), set16(-87.33f));
  const V16 n = round16(mul16(x, set16(1.44269504088896341f)));
  V16 r = fma16(sub16(zero16(), n), set16(0.693359375f), x);
  r = fma16(sub16(zero16(), n), set16(-2.12194440e-4f), r);
  V16 p = set16(1.9875691500e-4f);
  p = fma16(p, r, set16(1.3981999507e-3f));
  p = fma16(p, r, set16(8.3334519073e-3f));
  p = fma16(p, r, set16(4.1665795894e-2f));
  p = fma16(p, r, set16(1.6666665459e-1f));
  p = fma16(p, r, set16(5.0000001201e-1f));
  p = fma16(p, mul16(r, r), add16(r, set16(1.0f)));
  return scale_pow2(p, n);
}

}  // namespace TESSERA_SIMD_LEVEL
}  // namespace tessera::simd
