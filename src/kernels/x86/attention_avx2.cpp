// Fused attention block kernel, AVX2+FMA build of x86/attention_x86.inc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/exp_poly.h"
#include "kernels/x86/vec16.h"

namespace tessera::avx2 {
#include "kernels/x86/attention_x86.inc"
}  // namespace tessera::avx2
