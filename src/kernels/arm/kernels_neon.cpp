// NEON kernels (Apple Silicon's and other ARMv8 CPUs' baseline): the generic V16 matmul, GEMM
// and fused attention (four float32x4 registers per 16-lane vector), bitwise equal to ref/ and
// the x86 kernels. The 8-bit-activation matmul is arm/matmul_q8_dotprod.cpp (the table takes it
// where the CPU has the dot-product instructions).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/exp_poly.h"
#include "kernels/decode_panels.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernels.h"
#include "kernels/simd/deq16.h"

namespace tessera::neon {

#include "kernels/simd/matmul_simd.inc"
#include "kernels/simd/attention_simd.inc"
#include "kernels/simd/elementwise_simd.inc"

}  // namespace tessera::neon
