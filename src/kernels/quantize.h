// Weight quantizers (reference, scalar): rows of fp32 into each weight type the kernels read.
// Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 follow ggml's reference rounding; Q4_K and Q5_K search each 32-element
// sub-block's scale and min (k_subblock_search), Q3_K each 16-element sub-block's scale, and Q6_K
// takes the larger-magnitude extreme per 16 (ggml's iterative search gives slightly lower error); A4G64 follows MLX's affine quantization (the
// larger-magnitude extreme is the bias, zero stays exact; quantize.cpp has the rule and its source).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace tessera {

bool can_quantize_to(DType t);
// dst holds row_bytes(t, n); n a multiple of the type's block size.
void quantize_row(DType t, const float* x, int64_t n, uint8_t* dst);

// MLX's affine 4-bit quantization (mlx.core.quantize, mode "affine", bits 4) of a row in groups
// of `group` (32 or 64; n a multiple): group 64 writes A4G64 (as quantize_row(A4G64)), group 32
// writes Q4_1 blocks, whose layout an MLX group of 32 is (fp16 scale as d, fp16 bias as m, the
// quants in Q4_1's nibble order), with MLX's values instead of ggml's rounding rule.
void quantize_row_mlx_affine(int group, const float* x, int64_t n, uint8_t* dst);
// The rule's scale and bias for one group of `group` values, before their fp16 rounding.
void mlx_affine_scale_bias(const float* x, int group, float& scale, float& bias);

// Q4_K / Q5_K's choice for one 32-element sub-block (levels 15 or 31) under weights w: the scale
// and the (non-negative) min subtracted, before their 6-bit rounding. Exposed for tests.
void k_subblock_search(const float* x, const float* w, int levels, float& scale, float& minv);

}  // namespace tessera
