// The opt-in bf16 attention for encoder workloads (vision tiles), the partner of the bf16 GEMM
// (bf16_tiles.h): Q, K and V rounded to bf16 (round to nearest even), scores and outputs summed in
// fp32 on AMX tiles (TDPBF16PS). Bidirectional only (every query sees all n_kv keys).
//
// Per query row, keys in blocks of kBf16AttnKeys (from key 0; the last block shorter), with a
// running max m, sum l and output O (online softmax):
//   s_j = Σ_d q_d·k_jd                                  (fp32 sums of bf16 products)
//   m'  = max(m, max over the block of s_j);  a = exp2(m·c − m'·c), c = scale·log2(e)
//   p_j = bf16(exp2(s_j·c − m'·c))                     (exp2_bf16attn: never below 2^-126)
//   l   = l·a + Σ_j p_j;  O_d = O_d·a + Σ_j p_j·v_jd     (p as rounded; a = 0 for the first block)
//   o_d = O_d / l
// Each query row is computed by itself, whatever the block of 32 rows it shares, the number of
// rows asked for or the thread count, so rows are batch- and thread-invariant (bitwise). The AMX
// tile sums are not in a documented order, so the scalar twin agrees within a bound, not
// bitwise (docs/numerics.md).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/attention.h"

namespace tessera {

// Keys per online-softmax block: a whole 1024-patch vision tile is one block (no rescaling), and
// its 32 rows' scores (130 KiB) and weights (66 KiB) stay in L2; faster than blocks of 128 that
// fit L1 (docs/measurements.md, "Design choices").
constexpr int64_t kBf16AttnKeys = 1024;
constexpr int64_t kBf16AttnRows = 32;   // query rows per work item (two AMX tiles)

// 2^t for t <= 0 as the softmax weights need it (to bf16 precision: within 3e-6 relative): t
// clamped at -126 (so the result is never denormal), t = n + f with n the nearest integer (ties to
// even) and |f| <= 1/2, both exact, a degree-4 polynomial in f (fitted minimax on [-1/2, 1/2]),
// times 2^n. The AMX kernel evaluates the same steps sixteen lanes at a time, bitwise: VREDUCEPS
// gives f in one instruction, n = t - f, and VSCALEFPS multiplies by 2^n: a faster softmax loop
// than rounding n with 1.5·2^23 and a degree-5 polynomial (docs/measurements.md, "Design choices").
constexpr float kExp2Poly[5] = {1.0f, 0.693124175f, 0.240240991f, 0.0559064262f, 0.00958285294f};
inline float exp2_bf16attn(float t) {
  t = t > -126.0f ? t : -126.0f;
  const float n = std::nearbyint(t), f = t - n;
  float p = kExp2Poly[4];
  for (int i = 3; i >= 0; --i) p = std::fma(p, f, kExp2Poly[i]);
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, 4);
  return p * two_n;
}

// Shapes of one call, padded for the tiles: queries to 32, keys to 32, head_dim to 32 for the
// scores (hdk) and to 16 for the outputs (hdv).
struct Bf16AttnDims {
  int n_head = 0, n_head_kv = 0;
  int64_t hd = 0, hdk = 0, hdv = 0;
  int64_t n_q = 0, nqp = 0, n_kv = 0, nkp = 0;
  float scale = 1.0f;
  float c = 1.0f;  // scale · log2(e): a score times c is its exp2 argument
};
Bf16AttnDims bf16_attn_dims(const AttentionShape& s, int64_t n_q);

// Layouts, in bf16 elements:
//  Q: per head, rows of hdk (zero-padded): head h, query i, element d.
constexpr int64_t bf16_attn_q_index(const Bf16AttnDims& D, int64_t h, int64_t i, int64_t d) {
  return (h * D.nqp + i) * D.hdk + d;
}
//  K: AMX "B" tiles of 16 keys × 32 dims, line d/2 holding each key's pair (d, d+1).
constexpr int64_t bf16_attn_k_index(const Bf16AttnDims& D, int64_t g, int64_t j, int64_t d) {
  return ((g * (D.nkp / 16) + j / 16) * (D.hdk / 32) + d / 32) * 512 + ((d % 32) / 2) * 32 + (j % 16) * 2 + d % 2;
}
//  V: AMX "B" tiles of 32 keys × 16 dims, line j/2 holding each dim's pair of keys (j, j+1).
constexpr int64_t bf16_attn_v_index(const Bf16AttnDims& D, int64_t g, int64_t j, int64_t d) {
  return ((g * (D.nkp / 32) + j / 32) * (D.hdv / 16) + d / 16) * 512 + ((j % 32) / 2) * 32 + (d % 16) * 2 + j % 2;
}
struct Bf16AttnBuffers {
  uint16_t* q = nullptr;  // n_head · nqp · hdk
  uint16_t* k = nullptr;  // n_head_kv · nkp · hdk
  uint16_t* v = nullptr;  // n_head_kv · nkp · hdv
};

// True where a SIMD bf16 attention runs: AMX bf16 or AVX512-BF16 (bf16_gemm_available()).
bool attention_bf16_available();

// out[i * out_stride + h * head_dim + d] for query rows i < n_q; q, k and v fp32 with heads side
// by side (k and v rows kv_stride floats apart, n_kv of them). s.causal must be false. AMX or
// AVX512-BF16 where available, else the scalar twin.
// With out_b16, the output rows go, rounded, into out_b16 as the next bf16 GEMM's activations
// (bf16_tiles.h layout, k = n_head · head_dim; padding tokens are the caller's) with the same bits
// as round_row_bf16 of the fp32 rows; out is then scratch (written only where the rows cannot be
// rounded in the kernel: no AMX, or head_dim not a multiple of 16).
void attention_bf16(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, const float* k,
                    const float* v, int64_t kv_stride, float* out, int64_t out_stride, ThreadPool& pool,
                    uint16_t* out_b16 = nullptr);

// attention_bf16 over a whole tile (n_q = s.n_kv, q/k/v rows of one pass) that also keeps the
// packed keys and values: k16 and v16 (bf16_attn_k_elems / bf16_attn_v_elems of bf16_attn_dims(s,
// n_q), padding included) receive the layouts pack_attn_bf16 writes, the state a later
// attention_bf16_over re-reads; the output has attention_bf16's bits.
void attention_bf16_keeping(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, const float* k,
                            const float* v, int64_t kv_stride, uint16_t* k16, uint16_t* v16, float* out,
                            int64_t out_stride, ThreadPool& pool, uint16_t* out_b16 = nullptr);

// The parts of attention_bf16, for a caller that writes the packed Q, K and V itself (the vision
// encoder's q/k/v GEMM, gemm_bf16_rounded's Bf16QkvTarget): the shape checks (one-line errors),
// this thread's buffers for D (valid until its next call), and the attention over them (n_q, n_kv
// > 0; with all of Q, K and V written, padding included).
void check_bf16_attn_shape(const AttentionShape& s);
Bf16AttnBuffers bf16_attn_scratch(const Bf16AttnDims& D);
void attention_bf16_packed(const Bf16AttnDims& D, const Bf16AttnBuffers& b, float* out, int64_t out_stride,
                           ThreadPool& pool, uint16_t* out_b16 = nullptr);

// Keys and values kept packed between calls (a vision tile's recorded state, re-encoded later for a
// few changed patches): the element counts of D's K and V layouts, a scatter of n fp32 key/value
// rows into them (row r becomes key keys[r], rounded as pack_attn_bf16 rounds), and the attention
// of n_q fp32 query rows over them (Q packed here; the same bits, row for row, as attention_bf16
// over the fp32 keys and values the packed ones were rounded from).
int64_t bf16_attn_k_elems(const Bf16AttnDims& D);
int64_t bf16_attn_v_elems(const Bf16AttnDims& D);
void pack_attn_bf16_keys(const Bf16AttnDims& D, const float* k, const float* v, int64_t kv_stride, const int* keys,
                         int64_t n, uint16_t* k16, uint16_t* v16);
void attention_bf16_over(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, uint16_t* k16,
                         uint16_t* v16, float* out, int64_t out_stride, ThreadPool& pool);

// Where a q/k/v GEMM (gemm_bf16_rounded) puts its results instead of y: its rows [0, Hq) are the
// queries, [Hq, Hq + Hkv) the keys, [Hq + Hkv, Hq + 2·Hkv) the values (Hq = n_head · hd, Hkv =
// n_head_kv · hd), each result rounded into b's layouts as pack_attn_bf16 would round it. Needs hd
// a multiple of 32 (so a 32-row group is 32 dims of one head); tokens are the GEMM's m = n_q =
// n_kv; padding tokens are zeroed by the GEMM call.
struct Bf16QkvTarget {
  const Bf16AttnDims* dims = nullptr;
  Bf16AttnBuffers bufs;
};

// Round and lay out query rows [i0, i1) and key/value rows [j0, j1) (j0, j1 even or n_kv) into b;
// padding (rows past n_q/n_kv up to nqp/nkp, dims past hd) is written as zeros by whoever covers it.
#define TESSERA_ATTN_BF16_PACK_DECL                                                                              \
  void pack_attn_bf16(const Bf16AttnDims& D, const float* q, int64_t q_stride, const float* k, const float* v, \
                      int64_t kv_stride, int64_t i0, int64_t i1, int64_t j0, int64_t j1, const Bf16AttnBuffers& b);
// Query rows [i0, min(i0 + 32, n_q)) of head h (i0 a multiple of 32) from packed buffers.
#define TESSERA_ATTN_BF16_ROWS_DECL                                                                             \
  void attention_bf16_rows(const Bf16AttnDims& D, const Bf16AttnBuffers& b, int64_t h, int64_t i0, float* out, \
                           int64_t out_stride);
namespace ref {
TESSERA_ATTN_BF16_PACK_DECL
TESSERA_ATTN_BF16_ROWS_DECL
}  // namespace ref
namespace avx512 {
TESSERA_ATTN_BF16_PACK_DECL
// out_b16 (head_dim a multiple of 16, n_head · head_dim of 32): the rows rounded into those
// activation tiles instead of out.
void attention_bf16_rows(const Bf16AttnDims& D, const Bf16AttnBuffers& b, int64_t h, int64_t i0, float* out,
                         int64_t out_stride, uint16_t* out_b16 = nullptr);
// The same on AVX512-BF16 without AMX (x86/attention_bf16_vdp.cpp).
void attention_bf16_rows_vdp(const Bf16AttnDims& D, const Bf16AttnBuffers& b, int64_t h, int64_t i0, float* out,
                             int64_t out_stride, uint16_t* out_b16 = nullptr);
// The AMX kernel's 16-lane exp2 over n values (for the test that it equals exp2_bf16attn).
void exp2_bf16attn_lanes(const float* t, float* e, int64_t n);
}  // namespace avx512
#undef TESSERA_ATTN_BF16_PACK_DECL
#undef TESSERA_ATTN_BF16_ROWS_DECL

}  // namespace tessera
