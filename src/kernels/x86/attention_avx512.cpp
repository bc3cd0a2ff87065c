// Fused attention block kernel, AVX-512 build of x86/attention_x86.inc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/exp_poly.h"
#include "kernels/x86/vec16.h"

namespace tessera::avx512 {
#include "kernels/x86/attention_x86.inc"
}  // namespace tessera::avx512
