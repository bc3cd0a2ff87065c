// AVX2+FMA kernels (machines without AVX-512, and the `--isa avx2` cap): the generic V16
// matmul/GEMM (two ymm registers per 16-lane vector); results bitwise those of the AVX-512
// and scalar kernels.
#include <algorithm>
#include <cstring>
#include <cmath>
#include <vector>

#include "kernels/gemm_panels.h"
#include "kernels/kernels.h"
#include "kernels/q8_panels.h"
#include "kernels/simd/deq16.h"

namespace tessera::avx2 {

#include "kernels/simd/matmul_simd.inc"

#include "kernels/simd/elementwise_simd.inc"

#include "kernels/x86/matmul_q8_avx2.inc"

void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m, int64_t xq_stride,
                    float* y, int64_t ys) {
  matmul_q8_rows_256(w, r0, r1, xq, m, xq_stride, y, ys);
}

}  // namespace tessera::avx2
