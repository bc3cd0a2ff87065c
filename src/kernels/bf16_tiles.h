// The bf16 GEMM for encoder workloads (vision): inputs rounded to bf16 (round to nearest even),
// products summed in fp32 by AMX TDPBF16PS, or by AVX512-BF16 VDPBF16PS where there is no AMX.
// Weights are repacked once into AMX "B" tiles (both kernels read them); activations are rounded
// per call. Not the library's default numerics (gemm() keeps fp32 inputs; the CLI takes this path
// for the vision encoder where bf16_gemm_fast()): it trades each input's low 16 mantissa bits for
// the bf16 units' rate (AMX about 15× the fp32 FMA rate on one core, Zen 4's VDPBF16PS 2×). Every
// output is summed over k by the same sequence of operations whatever the batch, its position in
// a tile or the thread count, so it is batch- and thread-invariant like gemm(). (The scalar twin
// sums each k pair as VDPBF16PS specifies, so the Zen 4 kernel is the twin bit for bit;
// TDPBF16PS's order inside a tile op is undocumented, so AMX and the twin agree within a bound:
// docs/numerics.md.)
//
// Layout: rows in groups of 32, k in blocks of kBf16K = 32 (K padded with zeros to kp, a
// multiple of 32; rows past the matrix are zero). Group g, block kb holds two 1 KiB tiles, rows
// 32g..32g+15 then 32g+16..32g+31; line i of a tile holds, for each of its 16 rows n, the pair
// W[n][32kb + 2i], W[n][32kb + 2i + 1] (the pair order TDPBF16PS reads). Tile (g, kb, h) sits at
// byte ((g·nkb + kb)·2 + h)·1024, nkb = kp / 32.
#pragma once
#include <vector>
#include "kernels/kernels.h"

namespace tessera {

constexpr int64_t kBf16K = 32;
constexpr int64_t bf16_padded_k(int64_t k) { return (k + kBf16K - 1) / kBf16K * kBf16K; }

// True where a SIMD bf16 GEMM runs at this ISA cap: AMX bf16 granted by the OS (Isa::Amx), or
// AVX512-BF16 (Isa::Avx512Vnni and up).
bool bf16_gemm_available();
// True where that GEMM is also faster than the fp32 one, so the CLI takes it for the vision encoder
// by default: AMX (3-15x the fp32 FMA rate), or AVX512-BF16 on AMD (Zen 4: VDPBF16PS at twice
// the fp32 rate). Intel's VDPBF16PS runs at half the fp32 rate (docs/kernels.md): not there.
bool bf16_gemm_fast();

// Weight types pack_bf16_tiles takes: the float ones (F32, F16, BF16) and llama.cpp's block types
// (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), whose rows are dequantized to fp32 first.
bool supports_bf16_tiles(DType t);

// The matrix for gemm_bf16 (its view plus `bf16_tiles`), read from its gemm panels if it has them,
// else from its rows (a type supports_bf16_tiles takes): each weight, as fp32, rounded to bf16.
// Fails with a one-line error otherwise.
PackedWeights pack_bf16_tiles(const WeightMatrix& w);
// The same layout with each weight, as fp32, converted by `round` (float_to_bf16 here,
// float_to_fp16 for gemm_f16: f16_tiles.h); neither tile pointer of the view is set.
PackedWeights pack_tiles16(const WeightMatrix& w, uint16_t (*round)(float));

// Matrices of one width and type stacked into one set of tiles (rows concatenated), for GEMMs
// that read the same input (q, k and v: one call instead of three). Every part but the last has
// a multiple of 32 rows, so each part's tiles are exactly its own pack_bf16_tiles tiles, and
// views[i] (part i with bf16_tiles pointing into `all`) gives the same bits as the stacked call's
// rows for it. `all.matrix` has no rows of its own (data null): only its tiles are read.
struct StackedBf16Tiles {
  PackedWeights all;
  std::vector<WeightMatrix> views;
};
StackedBf16Tiles stack_bf16_tiles(const std::vector<const WeightMatrix*>& parts);

// Where weight (r, k) sits in the tiles (in bf16 elements), for nkb = kp / 32 blocks of k.
constexpr int64_t bf16_weight_index(int64_t r, int64_t k, int64_t nkb) {
  return (((r / 32) * nkb + k / kBf16K) * 2 + (r % 32) / 16) * 512 + ((k % kBf16K) / 2) * 32 + (r % 16) * 2 + k % 2;
}

// Activations rounded to bf16 are laid out as AMX "A" tiles, each 16 tokens × 32 k contiguous
// (1 KiB): token t, element k at bf16_act_index(t, k, kp). Tiles past k are zero.
constexpr int64_t bf16_act_index(int64_t t, int64_t k, int64_t kp) {
  return ((t / 16) * (kp / kBf16K) + k / kBf16K) * 512 + (t % 16) * kBf16K + k % kBf16K;
}
// Tokens [t0, t1) of x (xs floats apart, k used) rounded to bf16 into y in that layout.
void round_rows_bf16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp);
// The same layout with each value converted by `round` (float_to_fp16 for gemm_f16).
void round_rows16(const float* x, int64_t t0, int64_t t1, int64_t xs, int64_t k, uint16_t* y, int64_t kp,
                  uint16_t (*round)(float));

// y[t*ys + r] = bias[r] + sum_k bf16(W[r][k]) · bf16(x[t*xs + k]), fp32 sums; w must carry bf16
// tiles. bias (w.rows floats, or null for none) is where each sum starts: the accumulator tiles
// are loaded with it instead of zeroed, which spares a pass over y (so the bias is not added last,
// as gemm() callers add it). AMX or AVX512-BF16 where bf16_gemm_available(), else the scalar twin
// (far slower).
// Rounds x into a per-call buffer, then gemm_bf16_rounded.
void gemm_bf16(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys, ThreadPool& pool,
               const float* bias = nullptr);

// Activations rounded once for several GEMMs, or written by the op that produces them (LayerNorm,
// GELU) so no fp32 copy makes the round trip through memory: m tokens of k values in the A-tile
// layout, padded with zero tokens to a multiple of 32 — bf16_act_elems(m, k) values in all.
constexpr int64_t bf16_act_elems(int64_t m, int64_t k) { return (m + 31) / 32 * 32 * bf16_padded_k(k); }
// Token t: the k floats at x rounded into its lines of y (its padding past k zero). Same bits as
// round_rows_bf16.
void round_row_bf16(const float* x, int64_t t, int64_t k, uint16_t* y);
// Zeroes the padding tokens [m, m rounded up to 32) of y.
void zero_pad_tokens_bf16(uint16_t* y, int64_t m, int64_t k);
// gemm_bf16 on activations already in that layout (k = w.cols): the same bits as gemm_bf16 on the
// floats they were rounded from.
// With gelu_b16 (fc1 before fc2), y is not written: each 32 tokens × 32 rows of results go, while
// still in L1, through gelu_tanh and are rounded into gelu_b16, the next GEMM's activations (k =
// w.rows; its padding tokens are the caller's). The same bits as y, then gelu_tanh over each
// token's row, then round_row_bf16, without y's round trip through memory.
// With qkv (AMX only: without it this fails), y is not written either: the results go into the
// bf16 attention's Q, K and V layouts (Bf16QkvTarget, attention_bf16.h), the same bits as y
// handed to attention_bf16's packing.
void gemm_bf16_rounded(const WeightMatrix& w, const uint16_t* xb, int64_t m, float* y, int64_t ys, ThreadPool& pool,
                       const float* bias = nullptr, uint16_t* gelu_b16 = nullptr, const Bf16QkvTarget* qkv = nullptr);

}  // namespace tessera
