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
#include "kernels/exp_poly.h"

namespace tessera::simd {
inline namespace TESSERA_SIMD_LEVEL {

// The V16 operations under the names exp_nonpos_lanes (kernels/exp_poly.h) is written against.
struct Lane16 {
  using V = V16;
  static V16 set(float a) { return set16(a); }
  static V16 min(V16 a, V16 b) { return min16(a, b); }
  static V16 max(V16 a, V16 b) { return max16(a, b); }
  static V16 round(V16 a) { return round16(a); }
  static V16 mul(V16 a, V16 b) { return mul16(a, b); }
  static V16 add(V16 a, V16 b) { return add16(a, b); }
  static V16 sub(V16 a, V16 b) { return sub16(a, b); }
  static V16 fma(V16 a, V16 b, V16 c) { return fma16(a, b, c); }
  static V16 scale_pow2(V16 a, V16 n) { return simd::scale_pow2(a, n); }
};

#ifndef TESSERA_V16_TRANSPOSE
// out[c][i] = rows[i][c0 + c] for the first n rows (0 for the rest) and c < nc ≤ 16 (the
// backends without an in-register transpose).
inline void transpose16(const float* const* rows, int n, int c0, int nc, float (*out)[16]) {
  for (int i = 0; i < 16; ++i)
    for (int c = 0; c < nc; ++c) out[c][i] = i < n ? rows[i][c0 + c] : 0.0f;
}
#endif
#ifndef TESSERA_V16_UNTRANSPOSE
// rows[i][c0 + c] = in[c][i] for i < n and c < nc ≤ 16: transpose16's inverse.
inline void untranspose16(const float (*in)[16], int nc, float* const* rows, int n, int c0) {
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < nc; ++c) rows[i][c0 + c] = in[c][i];
}
#endif

// exp(x) for x <= 0 on 16 lanes: the same steps as exp_nonpos (one lane), so the same bits.
inline V16 exp16_nonpos(V16 x) { return exp_nonpos_lanes<Lane16>(x); }

}  // namespace TESSERA_SIMD_LEVEL
}  // namespace tessera::simd
