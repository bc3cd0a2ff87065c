// The fp16 GEMM for encoder workloads (vision) on CPUs with fp16 arithmetic (AVX512-FP16:
// VFMADD231PH, 32 lanes, twice the fp32 FMA rate; the same arithmetic as Apple's NEON FP16 FMLA).
// Where bf16 is slow (Intel without AMX: VDPBF16PS at half the fp32 rate) this is the 16-bit path:
// weights as fp16 (an f16 mmproj's exactly), activations rounded to fp16 (round to nearest even),
// products summed in fp16 over short chunks of k, the chunks summed in fp32.
//
// Layout: bf16_tiles.h's tiles and activation tiles, with fp16 values (bf16_weight_index,
// bf16_act_index, bf16_padded_k, bf16_act_elems). A tile line holds, for 16 rows, the pair of k
// (2i, 2i + 1); each token's pair of activations is one 32-bit broadcast; so each fp16 lane sums
// one row's even or odd k.
//
// Numerics (the scalar twin's definition, which the SIMD kernel is bit for bit): output (t, r)
//   for each parity p of k: S_p starts at bias[r] (p = 0; or +0 without bias) and +0 (p = 1);
//     over chunks of kF16ChunkK values of k in order: c = +0 (fp16), then for each k of parity p
//     in the chunk, in order, c = fp16(c + w·x) (one rounding: a fused multiply-add), then
//     S_p = fp32(S_p + c);
//   y = fp32(S_0 + S_1).
// So each fp16 sum holds at most kF16ChunkK / 2 products: its rounding error stays below the
// activations' own fp16 rounding (docs/numerics.md). fp16 overflows past 65504 (to inf), as
// llama.cpp's f16 matmuls do; the encoder's GEMM inputs are LayerNorm or GELU outputs. Per output
// the operations do not depend on the batch, its place in it, the row range or the thread count.
#pragma once
#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/kernels.h"

namespace tessera {

constexpr int64_t kF16ChunkK = 128;  // k per fp16 partial sum (four tile blocks of 32)

// True where a SIMD fp16 GEMM runs at this ISA cap (AVX512-FP16 at Isa::Avx512Vnni and up; NEON
// with FP16 arithmetic at Isa::Neon).
bool f16_gemm_available();
// True where it is the fastest vision GEMM, so the CLI takes it by default: AVX512-FP16 and no
// faster bf16 (bf16_gemm_fast(): AMX, or AMD's VDPBF16PS). Not on NEON: its speed on Apple's
// cores is not measured yet (--f16-vision asks for it).
bool f16_gemm_fast();

// The matrix for gemm_f16 (its view plus `f16_tiles`): each weight, as fp32, rounded to fp16;
// the types pack_bf16_tiles takes. Fails with a one-line error otherwise.
PackedWeights pack_f16_tiles(const WeightMatrix& w);

// Tokens [t0, t1) of x (xs floats apart, k used) rounded to fp16 into y (bf16_act_index layout,
// zero past k to kp).
void round_rows_f16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp);

// y[t*ys + r] = bias[r] + sum_k fp16(W[r][k]) · fp16(x[t*xs + k]) summed as above; w must carry
// f16 tiles. AVX512-FP16 where f16_gemm_available(), else the scalar twin (far slower).
void gemm_f16(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys, ThreadPool& pool,
              const float* bias = nullptr);

// The fp16 path rounds activations to fp16, whose range ends at 65504: a value past it becomes inf
// and the encoder's output NaN. Never seen on an encoder's GEMM inputs (LayerNorm, GELU and
// attention outputs), but a wrong answer must not pass silently: the encoders check their n
// outputs with this, which fails with a one-line error naming --fp32-vision where one is not finite.
void check_f16_vision_output(const float* x, size_t n);

// Rows [r0, r1) (whole 32-row groups but the last) for activations already rounded (xh: m tokens
// padded to a multiple of 32 with zero tokens, kp per token).
#define TESSERA_GEMM_F16_ROWS_DECL                                                                           \
  void gemm_f16_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xh, int64_t m, int64_t kp, \
                     float* y, int64_t ys, const float* bias);
namespace ref {
TESSERA_GEMM_F16_ROWS_DECL
// fp16(a + b·c) with one rounding (round to nearest even; subnormals kept, overflow to inf): the
// twin of one lane of VFMADD231PH.
uint16_t fma_f16(uint16_t a, uint16_t b, uint16_t c);
}  // namespace ref
namespace avx512 {
TESSERA_GEMM_F16_ROWS_DECL
void round_rows_f16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp);
}  // namespace avx512
// ARMv8.2 FP16 arithmetic (arm/f16_neon.cpp): the same numerics, bit for bit.
namespace neon {
TESSERA_GEMM_F16_ROWS_DECL
void round_rows_f16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp);
}  // namespace neon
#undef TESSERA_GEMM_F16_ROWS_DECL

}  // namespace tessera
