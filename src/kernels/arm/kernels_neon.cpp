// NEON kernels (Apple Silicon's and other ARMv8 CPUs' baseline): the generic V16 matmul, GEMM
// and fused attention (four float32x4 registers per 16-lane vector), bitwise equal to ref/ and
// the x86 kernels; the 8-bit-activation matmul uses the dot-product instructions where the CPU
// has them (arm/matmul_q8_dotprod.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu.h"
#include "kernels/attention.h"
#include "kernels/exp_poly.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernels.h"
#include "kernels/simd/deq16.h"

namespace tessera::neon {

#include "kernels/simd/matmul_simd.inc"
#include "kernels/simd/attention_simd.inc"
#include "kernels/simd/elementwise_simd.inc"

void matmul_q8_rows_dotprod(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                            int64_t xq_stride, float* y, int64_t ys);

void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m, int64_t xq_stride,
                    float* y, int64_t ys) {
  if (cpu_features().dotprod) return matmul_q8_rows_dotprod(w, r0, r1, xq, m, xq_stride, y, ys);
  ref::matmul_q8_rows(w, r0, r1, xq, m, xq_stride, y, ys);
}

void softmax_row(float* x, int64_t n, float scale) { ref::softmax_row(x, n, scale); }
void gelu_tanh(float* x, int64_t n) { ref::gelu_tanh(x, n); }

}  // namespace tessera::neon
