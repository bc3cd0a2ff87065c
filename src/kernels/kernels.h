// Kernel entry points. Each op has a portable scalar twin (kernels/ref) and per-ISA versions
// (kernels/x86, ...) chosen at run time. The matmul family is bitwise identical across ISA
// levels, thread counts and batch sizes: every output is one 16-lane FMA chain over k in order,
// reduced by the same tree, whichever path computes it.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace tessera {

enum class Isa : int { Scalar = 0, Avx512 = 2 };
const char* isa_name(Isa isa);
Isa detected_isa();  // best level the CPU and OS support
Isa active_isa();    // detected, capped by set_isa_cap() or TESSERA_ISA=scalar|avx512
void set_isa_cap(Isa cap);

// A weight matrix of `rows` output features × `cols` inputs, row-major in a GGUF block type.
struct WeightMatrix {
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;
  size_t row_stride = 0;  // bytes between rows
};

// y[t*ys + r] = sum_k W[r][k] * x[t*xs + k] for t < m, r < W.rows. Activations are fp32.
void matmul(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys,
            ThreadPool& pool);

// Dequantizes n elements (a whole row) of a block type into fp32.
void dequantize_row(DType type, const uint8_t* src, float* dst, int64_t n);

// One attention head for one query: out = softmax(scale * q·K^T) V over n_kv cached keys.
// K/V rows are fp16, `kv_stride` elements apart; `scratch` holds n_kv floats.
void attention_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv,
                   int64_t kv_stride, int head_dim, float scale, float* out, float* scratch);

// Per-ISA implementations (row range [r0, r1) of the output), used by matmul() and tests.
namespace ref {
void matmul_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m,
                 int64_t xs, float* y, int64_t ys);
void attention_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv,
                   int64_t kv_stride, int head_dim, float scale, float* out, float* scratch);
}  // namespace ref
namespace avx512 {
void matmul_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m,
                 int64_t xs, float* y, int64_t ys);
void attention_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv,
                   int64_t kv_stride, int head_dim, float scale, float* out, float* scratch);
}  // namespace avx512

}  // namespace tessera
