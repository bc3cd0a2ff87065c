// Kernel entry points. Each op has a portable scalar twin (kernels/ref) and per-ISA versions
// (kernels/x86, ...) chosen at run time. The matmul family is bitwise identical across ISA
// levels, thread counts and batch sizes: every output is one 16-lane FMA chain over k in order,
// reduced by the same tree, whichever path computes it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <functional>
#include <memory>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace tessera {

// Ordered: a cap at level L allows every level <= L that the CPU has (Neon only on ARM).
// Avx512Vnni adds vpdpbusd for the 8-bit-activation matmul, and Amx (AMX tiles, where the OS
// grants them) the opt-in bf16 GEMM (bf16_tiles.h) and bf16 attention (attention_bf16.h); every
// other kernel is the same there.
enum class Isa : int { Scalar = 0, Neon = 1, Avx2 = 2, Avx512 = 3, Avx512Vnni = 4, Amx = 5 };
const char* isa_name(Isa isa);
Isa detected_isa();  // best level the CPU and OS support
Isa active_isa();    // detected, capped by set_isa_cap() or TESSERA_ISA=scalar|neon|avx2|avx512|avx512vnni|amx
void set_isa_cap(Isa cap);
// The one reading of an ISA name ("scalar", "neon", "avx2", "avx512", "avx512vnni", "amx"), for
// --isa and TESSERA_ISA alike; `what` names the source in the error.
constexpr const char* kIsaNames = "scalar, neon, avx2, avx512, avx512vnni, amx";
Isa isa_from_name(const std::string& name, const char* what);

struct Bf16QkvTarget;  // kernels/attention_bf16.h

// A weight matrix of `rows` output features × `cols` inputs, row-major in a GGUF block type.
struct WeightMatrix {
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;
  size_t row_stride = 0;  // bytes between rows
  // The same weights repacked for matmul_q8 (kernels/q8_panels.h), or null.
  const uint8_t* panels = nullptr;
  size_t panel_stride = 0;  // bytes between 16-row panels
  // The same weights repacked for gemm (kernels/gemm_panels.h: 32-row k-major panels in `type`), or null.
  const uint8_t* gemm_panels = nullptr;
  // The same weights as AMX bf16 tiles for gemm_bf16 (kernels/bf16_tiles.h), or null.
  const uint8_t* bf16_tiles = nullptr;
  // The same weights as fp16 in that tile layout for gemm_f16 (kernels/f16_tiles.h), or null.
  const uint8_t* f16_tiles = nullptr;
  // The same weights in 8-row groups for the fp32-activation decode kernels (AVX-512, and AVX2 and
  // NEON for the types v16_decode_panels lists; kernels/decode_panels.h), or null; other kernels read `data`.
  const uint8_t* row_panels = nullptr;
};

// Owner of a matrix repacked at load (q8_panels.h, gemm_panels.h): `matrix` is the WeightMatrix
// to pass to the kernels, the original view plus a pointer into `data`.
struct PackedWeights {
  WeightMatrix matrix;
  std::unique_ptr<uint8_t, void (*)(void*)> data{nullptr, nullptr};
  size_t bytes = 0;
};

// y[t*ys + r] = sum_k W[r][k] * x[t*xs + k] for t < m, r < W.rows. Activations are fp32.
void matmul(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys,
            ThreadPool& pool);

// Dense GEMM for encoder workloads, which have no one-token twin to agree with: each output is
// one FMA chain over k in order (outer-product kernels, no horizontal sums). Same signature and
// result layout as matmul(); used by the vision encoder. Deterministic for any thread count.
void gemm(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys, ThreadPool& pool);
// The encoder GEMMs' split of n_rows over the pool: ranges [r0, r1) of whole 32-row groups, two
// per thread, larger first.
void parallel_row_groups(int64_t n_rows, ThreadPool& pool, RangeFn fn);

// x = softmax(scale * x) and x = gelu_tanh(x) for the encoder, vectorised per ISA (the SIMD
// versions use a polynomial exp within 2 ulp; tolerances in docs/numerics.md).
void softmax_row(float* x, int64_t n, float scale);
void gelu_tanh(float* x, int64_t n);

// Dequantizes n elements (a whole row) of a block type into fp32.
void dequantize_row(DType type, const uint8_t* src, float* dst, int64_t n);

// Attention: kernels/attention.h.

// --- 8-bit activations (W4A8/W8A8, as llama.cpp's CPU backend) -------------------------
// Activations quantized per block of 32 exactly as ggml's quantize_row_q8_1 does: d = amax/127
// (rounded to fp16), q = round-half-even(x * 127/amax), s = fp16(d * sum q); kept here widened to
// f32 with the exact integer sum, which the kernels' unsigned-times-signed dot products need.
// Matmuls over them: per output, acc = 0; for each block b in order,
//   acc = fma(float(isum_b), d_w * d_x, acc)   (isum_b: the exact integer dot of the block)
//   acc = fma(m_w, s_x, acc)                   (the types with a min: Q4_1, Q5_1, Q4_K, Q5_K, A4G64)
// Q6_K, whose scales cover 16 elements, takes two steps per block instead: isum over the first
// 16 elements times its d·sc · d_x, then the last 16's.
// on weights repacked at load into 16-row panels (q8_panels.h). Every ISA computes isum_b
// exactly and then these float steps, so results are bitwise equal across ISAs, threads and
// batch sizes; they track llama.cpp's to float rounding (its lanes sum in another order).
struct BlockQ8_1 {
  float d, s;    // fp16-rounded values, widened
  int32_t sum;     // sum of q
  int32_t sum_lo;  // sum of q[0..15] (Q6_K's halves)
  int8_t q[32];
};
static_assert(sizeof(BlockQ8_1) == 48);
// Blocks y[0, n)'s scales and sums from per-block arrays (the vectorised quantizers' last step).
inline void set_q8_1_scales(BlockQ8_1* y, int n, const float* d, const float* s, const int32_t* sum,
                            const int32_t* sum_lo) {
  for (int i = 0; i < n; ++i) y[i].d = d[i], y[i].s = s[i], y[i].sum = sum[i], y[i].sum_lo = sum_lo[i];
}
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K and Q5_K (their 32-element sub-blocks as blocks: d·sc and
// −dmin·m in place of Q4_1's scale and min), Q6_K (see above; ggml pairs the K-quants with
// per-256 Q8_K activations instead) and A4G64 (each half of a 64-group as a Q4_1 block with the
// group's scale and bias).
bool supports_q8_activations(DType weight_type);
// Whether 8-bit activations are the faster path for an encoder's quantized matrices than their
// dequantized 16-bit or fp32 GEMM: the AVX-512 VNNI level (measured per SmolVLM tile on a Q8_0
// mmproj, docs/numerics.md: AMD Zen 4 ~465 against ~570 ms on bf16, an Intel Xeon without AMX 594
// against 953 on fp32). Not on AMX (its bf16 tiles), AVX2 (Zen 3: 1628 against 1574 ms) or NEON.
bool q8_vision_fast();
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k);  // k % 32 == 0
// n rows of x (xs floats apart) into k/32 blocks each, rows spread over the pool.
void quantize_rows_q8_1(const float* x, int64_t n, int64_t xs, BlockQ8_1* y, int64_t k, ThreadPool& pool);
// y[t*ys + r] = W[r] · x_t with x_t given as k/32 blocks per token, `xq_stride` blocks apart.
// w must carry panels (pack_q8_panels); the *_rows versions take any row range [r0, r1).
void matmul_q8(const WeightMatrix& w, const BlockQ8_1* xq, int64_t m, int64_t xq_stride, float* y,
               int64_t ys, ThreadPool& pool);
// Several matmul_q8 on the same activations (q, k and v; gate and up) in one pass of the pool:
// their rows are split across the threads as if stacked, so a decode step wakes the pool once, not
// once per matrix. Each output is bitwise what matmul_q8 gives.
struct Q8Output {
  const WeightMatrix* w;  // carries q8 panels
  float* y;
  int64_t ys;
};
void matmul_q8_group(const Q8Output* outs, int n_outs, const BlockQ8_1* xq, int64_t m, int64_t xq_stride, ThreadPool& pool);

// Per-ISA implementations (row range [r0, r1) of the output), entries of the kernel tables
// (kernel_table.h) and called directly by tests.
#define TESSERA_KERNEL_DECLS                                                                     \
  void matmul_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m,     \
                   int64_t xs, float* y, int64_t ys);                                            \
  void gemm_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m,       \
                 int64_t xs, float* y, int64_t ys);                                            \
  void swiglu(float* g, const float* u, int64_t n);                                             \
  void store_f16(const float* x, int64_t n, uint16_t* y, int64_t step);                         \
  void load_f16(const uint16_t* x, int64_t n, float* y);                                        \
  void quantize_row_q8_0(const float* x, int64_t n, uint8_t* y);
#define TESSERA_Q8_DECL                                                                          \
  void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq,        \
                      int64_t m, int64_t xq_stride, float* y, int64_t ys);
#define TESSERA_ENCODER_DECLS                                                                    \
  void softmax_row(float* x, int64_t n, float scale);                                           \
  void gelu_tanh(float* x, int64_t n);
namespace ref {
TESSERA_KERNEL_DECLS
TESSERA_Q8_DECL
TESSERA_ENCODER_DECLS
}  // namespace ref
// The V16 softmax and GELU (simd/elementwise_simd.inc) for the levels without their own.
#define TESSERA_V16_ENCODER_DECLS                                                                \
  void softmax_row_v16(float* x, int64_t n, float scale);                                       \
  void gelu_tanh_v16(float* x, int64_t n);
namespace avx2 {
TESSERA_KERNEL_DECLS
TESSERA_Q8_DECL
TESSERA_V16_ENCODER_DECLS
}  // namespace avx2
namespace avx512 {
TESSERA_KERNEL_DECLS
TESSERA_Q8_DECL  // the 256-bit maddubs kernel; the VNNI level's table tries matmul_q8_rows_vnni first
TESSERA_ENCODER_DECLS
}  // namespace avx512
namespace neon {
TESSERA_KERNEL_DECLS
TESSERA_V16_ENCODER_DECLS
// The dot-product kernel (arm/matmul_q8_dotprod.cpp), in the table where the CPU reports dotprod.
void matmul_q8_rows_dotprod(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                            int64_t xq_stride, float* y, int64_t ys);
// The SME encoder GEMM (arm/gemm_sme.cpp, built by clang-19 where found: TESSERA_HAVE_SME), in the
// table where the CPU reports SME; bitwise gemm_rows. Its streaming vector length in 32-bit words.
void gemm_rows_sme(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
                   int64_t ys);
uint64_t sme_vector_words();
}  // namespace neon
#undef TESSERA_Q8_DECL
#undef TESSERA_V16_ENCODER_DECLS
#undef TESSERA_ENCODER_DECLS
#undef TESSERA_KERNEL_DECLS
namespace ref {
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k);
// Scalar twin of gemm_bf16 (bf16_tiles.h): activations already rounded to bf16, kp per row; each
// sum starts from bias[r] (bias: w.rows floats, or null for zero). With gelu_b16, y is not written
// (gemm_bf16_rounded's GELU epilogue).
void gemm_bf16_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xb, int64_t m, int64_t kp,
                    float* y, int64_t ys, const float* bias = nullptr, uint16_t* gelu_b16 = nullptr);
}  // namespace ref
namespace avx2 {
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k);
}  // namespace avx2
namespace avx512 {
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k);
// The VNNI kernel (x86/matmul_q8_vnni.cpp); false for weight types it does not cover.
bool matmul_q8_rows_vnni(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                         int64_t xq_stride, float* y, int64_t ys);
// The AMX bf16 tile kernel (x86/gemm_bf16_amx.cpp) for gemm_bf16 (bf16_tiles.h).
void gemm_bf16_rows_amx(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xb, int64_t m, int64_t kp,
                        float* y, int64_t ys, const float* bias = nullptr, uint16_t* gelu_b16 = nullptr,
                        const Bf16QkvTarget* qkv = nullptr);
// The AVX512-BF16 kernel (x86/gemm_bf16_vdp.cpp) for gemm_bf16 where there is no AMX: the same tiles,
// the same bound.
void gemm_bf16_rows_vdp(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xb, int64_t m, int64_t kp,
                        float* y, int64_t ys, const float* bias = nullptr, uint16_t* gelu_b16 = nullptr,
                        const Bf16QkvTarget* qkv = nullptr);
void round_rows_bf16_avx512(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp);
}  // namespace avx512

}  // namespace tessera
