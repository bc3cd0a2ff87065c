// The fp16 attention for encoder workloads (vision tiles), the partner of the fp16 GEMM
// (f16_tiles.h), bidirectional only (every query sees all n_kv keys). Its two products are that
// GEMM: the keys are a "weight matrix" of n_kv rows × head_dim, the values' transpose one of
// head_dim rows × n_kv, both in f16 tiles; queries and softmax weights are its activations. Per
// query row i of head h (kv head g):
//   s_j = gemm_f16's sum of fp16(q_i) · fp16(k_j)          (fp16 chunk sums, fp32 across them)
//   m   = max_j s_j,  c = scale · log2(e)
//   p_j = fp16(exp2_bf16attn(fma(s_j, c, −m·c)))          (the weights as rounded)
//   l   = Σ_j p_j: sixteen fp32 sums, key j into sum j mod 16 in order, then added as a tree
//         (sum i += sum i + 8, then + 4, + 2, + 1)
//   o_d = gemm_f16's sum of p_j · fp16(v_jd), divided by l
// One pass over all keys (a vision tile's 1024 scores per row fit in L2), no online rescaling. A
// row's operations depend on its own inputs alone: batch- and thread-invariant. The AVX-512 steps
// (packing, softmax) and the AVX512-FP16 GEMM are their scalar twins bit for bit.
#pragma once
#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/attention.h"

namespace tessera {

// True where the fp16 GEMM runs in SIMD (f16_gemm_available()).
bool attention_f16_available();

// out[i * out_stride + h * head_dim + d] for query rows i < n_q; q, k and v fp32 with heads side
// by side (k and v rows kv_stride floats apart, s.n_kv of them). s.causal must be false.
void attention_f16(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, const float* k,
                   const float* v, int64_t kv_stride, float* out, int64_t out_stride, ThreadPool& pool);

// The steps the kernel table holds (scalar twins in ref::, AVX-512 in avx512::):
//  pack_kv_f16: keys [j0, j1) of kv head g (rows of k/v at kv_stride, the head's hd values at
//    g · hd) rounded into kt (f16 tiles of an n_kv × hd matrix) and vt (of its hd × n_kv
//    transpose); j0 and j1 even or n_kv.
//  softmax_rows_f16: rows [0, rows) of S (scores, ss floats apart, n_kv used) into P (fp16,
//    activation tiles of nkp = n_kv rounded up to 32 keys, zero past n_kv) and l (the sums).
#define TESSERA_ATTN_F16_DECL                                                                                        \
  void pack_kv_f16(const float* k, const float* v, int64_t kv_stride, int g, int64_t hd, int64_t n_kv, int64_t j0, \
                   int64_t j1, uint16_t* kt, uint16_t* vt);                                                          \
  void softmax_rows_f16(const float* S, int64_t ss, int64_t rows, int64_t n_kv, float c, uint16_t* P, float* l);
namespace ref {
TESSERA_ATTN_F16_DECL
}
namespace avx512 {
TESSERA_ATTN_F16_DECL
}
namespace neon {
TESSERA_ATTN_F16_DECL
}
#undef TESSERA_ATTN_F16_DECL

}  // namespace tessera
