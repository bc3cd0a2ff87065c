// Fused attention (flash-attention style) over a KV cache, for decode, prefill and vision tiles.
//
// Each query row is computed by one fixed recipe, whatever the batch, thread count or path:
// keys are cut into segments of kAttnSegment positions (aligned at position 0); inside a
// segment, blocks of 16 keys update a running max m, sum l and output O (online softmax);
// segments are merged in order with the log-sum-exp rule. A score is scale * (q · k) with q · k
// one FMA chain over the head dimension in order, a block's weight sum uses the fixed 16-lane
// reduction tree, and exp is the polynomial in exp_poly.h, so every ISA level gives bitwise the
// same rows.
// Decode splits the work over (kv head, segment) — split-KV; prefill and vision tiles over
// (kv head, block of up to 256 query rows, segment); grouped-query heads sharing a kv head
// share the key/value loads.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace tessera {

constexpr int64_t kAttnSegment = 512;

// K/V storage: F32, F16, BF16, or I8 (8-bit: head_dim int8 values, padded to 4 bytes, then
// an fp32 scale; value = scale * q with scale = amax / 127 per row of one head).
bool kv_type_supported(DType t);
size_t kv_row_bytes(DType t, int head_dim);  // bytes of one head's K (or V) row
void kv_store_row(DType t, const float* src, int head_dim, uint8_t* dst);
void kv_load_row(DType t, const uint8_t* src, int head_dim, float* dst);

// The cache: K (and V) of position p, kv head g at base + p * pos_stride + g * head_stride.
struct KvView {
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  DType type = DType::F32;
  int64_t pos_stride = 0, head_stride = 0;  // bytes
};

struct AttentionShape {
  int n_head = 0, n_head_kv = 0, head_dim = 0;  // head_dim <= 256
  float scale = 1.0f;
  bool causal = true;  // query i sees positions [0, q_pos0 + i]; otherwise all n_kv
  int64_t q_pos0 = 0;
  int64_t n_kv = 0;    // positions present in the cache
};

// out[i * out_stride + h * head_dim + d] for query rows i < n_q (q laid out the same way).
void flash_attention(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, const KvView& kv,
                     float* out, int64_t out_stride, ThreadPool& pool);

// Per-ISA block kernel: up to kAttnRows query rows on one kv head over key positions [j0, j1).
// Row r sees keys below ends[r]; writes part[r] = {m, l, O[0..head_dim)} (unnormalised).
// Keys are the outer loop: each block of 16 keys is converted to fp32 once (kept in L1) and
// applied to every row, whose running state lives in part[r]; more rows per call means less
// K/V traffic.
constexpr int kAttnRows = 256;
struct AttnRows {
  const float* q[kAttnRows];
  int64_t end[kAttnRows];
  float* part[kAttnRows];
  int n = 0;
};
#define TESSERA_ATTN_DECL                                                                      \
  void attention_block(const AttnRows& rows, int head_dim, float scale, const uint8_t* k,      \
                       const uint8_t* v, DType kv_type, int64_t pos_stride, int64_t j0, int64_t j1);
namespace ref { TESSERA_ATTN_DECL }
namespace avx512 { TESSERA_ATTN_DECL }
namespace avx2 { TESSERA_ATTN_DECL }
namespace neon { TESSERA_ATTN_DECL }
#undef TESSERA_ATTN_DECL

}  // namespace tessera
