// The one kernel-dispatch mechanism. Each ISA level has a table of function pointers, one entry
// per op, filled once from the per-ISA namespaces (ref::, avx2::, avx512::, neon::); the active
// table is chosen from the CPU's features and the cap (set_isa_cap, or TESSERA_ISA read once) when
// the cap changes, never per call. The public entry points (matmul, gemm, softmax_row, rms_norm,
// flash_attention, gemm_bf16, combine_rows_u8, ...) run kernels().<op>; nothing else in the tree
// compares ISA levels to choose code. A new ISA fills its table in dispatch.cpp; a new op adds a
// field here and one line per level there.
#pragma once
#include <cstdint>

#include "kernels/kernels.h"

namespace tessera {

struct AttnRows;         // kernels/attention.h
struct KvSpan;           // kernels/attention.h
struct Bf16AttnDims;     // kernels/attention_bf16.h
struct Bf16AttnBuffers;  // kernels/attention_bf16.h

struct KernelTable {
  Isa isa = Isa::Scalar;  // the level this table serves

  // Dense matmuls over a row range [r0, r1) of the output (kernels.h).
  void (*matmul_rows)(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs,
                      float* y, int64_t ys);
  void (*gemm_rows)(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
                    int64_t ys);
  // 8-bit activations: the quantizer and the matmul over repacked panels (VNNI where the level has it).
  void (*quantize_row_q8_1)(const float* x, BlockQ8_1* y, int64_t k);
  void (*matmul_q8_rows)(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                         int64_t xq_stride, float* y, int64_t ys);

  // Elementwise ops and norms (kernels.h, elementwise.h).
  void (*softmax_row)(float* x, int64_t n, float scale);
  void (*gelu_tanh)(float* x, int64_t n);
  void (*swiglu)(float* g, const float* u, int64_t n);
  void (*store_f16)(const float* x, int64_t n, uint16_t* y, int64_t step);
  void (*load_f16)(const uint16_t* x, int64_t n, float* y);
  // Q8_0 weights from fp32 rows (quantize.h): the at-load quantization of a float mmproj.
  void (*quantize_row_q8_0)(const float* x, int64_t n, uint8_t* y);
  void (*rms_norm)(const float* x, const float* w, float* y, int64_t n, float eps);
  void (*add_rms_norm)(float* x, const float* d, const float* w, float* y, int64_t n, float eps);
  void (*layer_norm)(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);
  void (*add_layer_norm)(float* x, const float* d, const float* w, const float* b, float* y, int64_t n, float eps);

  // Flash attention's inner block (attention.h) and the name of the level that provides it.
  void (*attention_block)(const AttnRows& rows, int head_dim, float scale, const KvSpan& kv, int64_t j0, int64_t j1);
  void (*attention_merge)(const float* parts, int64_t t0, int64_t t1, int n_head, int64_t n_seg, int64_t part_len,
                          int head_dim, float* out, int64_t out_stride);
  const char* attention_name;

  // Image resampling (resample.h).
  void (*combine_rows_u8)(const uint8_t* const* rows, const int32_t* k, int n, int64_t len, int precision,
                          uint8_t* out);

  // bf16 tiles (bf16_tiles.h, attention_bf16.h): AMX at the Amx level, VDPBF16PS at the Avx512Vnni
  // level where the CPU has AVX512_BF16, the scalar twins elsewhere.
  bool bf16_tiles;  // a SIMD kernel is in use (gemm_bf16 and attention_bf16 are fast, not emulated)
  void (*round_rows_bf16)(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp);
  void (*gemm_bf16_rows)(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xb, int64_t m, int64_t kp,
                         float* y, int64_t ys, const float* bias, uint16_t* gelu_b16, const Bf16QkvTarget* qkv);
  void (*pack_attn_bf16)(const Bf16AttnDims& D, const float* q, int64_t q_stride, const float* k, const float* v,
                         int64_t kv_stride, int64_t i0, int64_t i1, int64_t j0, int64_t j1, const Bf16AttnBuffers& b);
  void (*attention_bf16_rows)(const Bf16AttnDims& D, const Bf16AttnBuffers& b, int64_t h, int64_t i0, float* out,
                              int64_t out_stride, uint16_t* out_b16);

  // The fp16 GEMM (f16_tiles.h): AVX512-FP16 at the Avx512Vnni level and up, and NEON FP16 at the
  // Neon level, where the CPU has them; the scalar twins elsewhere.
  bool f16_tiles;  // a SIMD kernel is in use
  void (*round_rows_f16)(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp);
  void (*gemm_f16_rows)(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xh, int64_t m, int64_t kp,
                        float* y, int64_t ys, const float* bias);
  // The fp16 attention's steps (attention_f16.h): AVX-512 at the Avx512 level and up, NEON at Neon.
  void (*pack_kv_f16)(const float* k, const float* v, int64_t kv_stride, int g, int64_t hd, int64_t n_kv, int64_t j0,
                      int64_t j1, uint16_t* kt, uint16_t* vt);
  void (*softmax_rows_f16)(const float* S, int64_t ss, int64_t rows, int64_t n_kv, float c, uint16_t* P, float* l);

  // Layouts worth packing at load for this level: the weight types whose matmul_rows reads the
  // fp32 decode kernel's 8-row panels (decode_panels.h); null where none does.
  bool (*decode_panels)(DType);
};

// The active level's table.
const KernelTable& kernels();
// The table of a given level, lowered to what this CPU and build have (as a cap would be): for
// tests and benchmarks that compare levels side by side.
const KernelTable& kernel_table(Isa level);

}  // namespace tessera
