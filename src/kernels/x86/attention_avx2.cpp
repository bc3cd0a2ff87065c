// Fused attention block kernel, AVX2+FMA build of simd/attention_simd.inc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/exp_poly.h"
#include "kernels/simd/vec16.h"

namespace tessera::avx2 {
#include "kernels/simd/attention_simd.inc"
}  // namespace tessera::avx2
