// Fused attention (flash-attention style) over a KV cache, for decode, prefill and vision tiles.
//
// Each query row is computed by one fixed recipe, whatever the batch, thread count or path:
// keys are cut into segments of kAttnSegment positions (aligned at position 0); inside a
// segment, blocks of 16 keys update a running max m, sum l and output O (online softmax);
// segments are merged in order with the log-sum-exp rule. A score is scale * (q · k) with q · k
// one FMA chain over the head dimension in order, a block's weight sum uses the fixed 16-lane
// reduction tree, and exp is the polynomial in exp_poly.h, so every ISA level, both kernel
// shapes (rows in lanes, keys in lanes) and both K layouts (rows, tiles) give bitwise the same rows.
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

// K/V storage: F32, F16, BF16, I8 (8-bit: head_dim int8 values, padded to 4 bytes, then
// an fp32 scale; value = scale * q with scale = amax / 127 per row of one head), or Q4_0 (4-bit,
// "q4": ggml's q4_0 blocks per 32 elements of a head row, as llama.cpp's -ctk/-ctv q4_0 store
// them: fp16 d = (the larger-magnitude extreme) / -8, 16 bytes of nibbles q, value = d * (q - 8);
// head_dim must be a multiple of 32, kv_row_bytes fails otherwise). A Q4_0 value is an exact
// product (11-bit d times a 4-bit integer), so every loader gives the same bits however it forms it.
bool kv_type_supported(DType t);
size_t kv_row_bytes(DType t, int head_dim);  // bytes of one head's K (or V) row
void kv_store_row(DType t, const float* src, int head_dim, uint8_t* dst);
void kv_load_row(DType t, const uint8_t* src, int head_dim, float* dst);

// llama.cpp's rotation for a quantized KV cache (llama-kv-cache.cpp, attn_rot_k / attn_rot_v):
// q and k of each head multiplied by the orthonormal Walsh-Hadamard matrix H (Sylvester order,
// H / sqrt(n), H^2 = I) in blocks of kv_rotation_k(head_dim) elements, v in blocks of 64 and the
// attention output rotated back by the same H, so q·k and the output are unchanged in exact
// arithmetic while outliers are spread over the block before quantization. llama.cpp applies it
// when the cache type is quantized and head_dim is a multiple of 64; tessera to its q4 cache.
// hadamard_rotate: each block of n (a power of two) of x[0, len) in place, one scalar code (the
// same bits at every ISA level).
int kv_rotation_k(int head_dim);  // the largest power of two >= 64 dividing head_dim, else 0
constexpr int kKvRotationV = 64;
void hadamard_rotate(float* x, int n, int64_t len);

// K may instead be kept in tiles of 16 positions of one kv head, transposed: element d of the
// position in slot s (= position % 16) at d * 16 + s (I8: the int8 values, then 16 fp32 scales,
// one per slot, with the same values as kv_store_row; Q4_0: element d of slot s is a nibble of
// byte (d / 2) * 16 + s, the low one for even d, then per 32-element block the 16 slots' fp16
// scales, so a tile is the bytes of 16 rows and a tile row is one 16-byte nibble load). Decode reads a tile as head_dim vectors
// of 16 keys, so its scores are one FMA chain over d per key with keys in lanes — the same
// chain, so the same bits, as the row layout gives.
constexpr int kKvTile = 16;
size_t kv_tile_bytes(DType t, int head_dim);
void kv_store_tile_slot(DType t, const float* src, int head_dim, uint8_t* tile, int slot);
void kv_load_tile_slot(DType t, const uint8_t* tile, int head_dim, int slot, float* dst);
// Position pos into one kv head's K tiles: the tile at head_tiles + (pos / 16) * tile_stride (KvView's
// k_tile_stride), slot pos % 16.
void kv_store_k_at(DType t, const float* src, int head_dim, uint8_t* head_tiles, size_t tile_stride, int64_t pos);

// The cache: V (and K in rows) of position p, kv head g at base + p * pos_stride + g * head_stride;
// K in tiles: position p of kv head g in the tile at k + (p / 16) * k_tile_stride + g * k_head_stride.
struct KvView {
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  DType type = DType::F32;
  int64_t pos_stride = 0, head_stride = 0;  // bytes
  bool k_tiles = false;
  int64_t k_tile_stride = 0, k_head_stride = 0;  // bytes, when k_tiles
};

struct AttentionShape {
  int n_head = 0, n_head_kv = 0, head_dim = 0;  // head_dim <= 256
  float scale = 1.0f;
  bool causal = true;  // query i sees positions [0, q_pos0 + i]; otherwise all n_kv
  int64_t q_pos0 = 0;
  int64_t n_kv = 0;    // positions present in the cache
};

// out[i * out_stride + h * head_dim + d] for query rows i < n_q (q laid out the same way).
// The block kernel flash_attention uses at the active ISA level: "avx512", "avx2", "neon" or
// "scalar" (for tests: every level must reach its own kernel, not only give the same bits).
const char* attention_kernel_name();

void flash_attention(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, const KvView& kv,
                     float* out, int64_t out_stride, ThreadPool& pool);

// Per-ISA block kernel: up to kAttnRows query rows on one kv head over key positions [j0, j1).
// Row r sees keys below ends[r]; writes part[r] = {m, l, O[0..head_dim)} (unnormalised).
// Keys are the outer loop: each block of 16 keys is converted to fp32 once (kept in L1) and
// applied to every row, whose running state lives in part[r]; more rows per call means less
// K/V traffic. With K in tiles and at most kFewRows rows (decode), keys go in lanes instead.
constexpr int kAttnRows = 256;
constexpr int kFewRows = 8;
struct AttnRows {
  const float* q[kAttnRows];
  int64_t end[kAttnRows];
  float* part[kAttnRows];
  int n = 0;
};
// One kv head's keys and values: position j's V row at v + j * v_stride; its K row at
// k + j * k_stride, or, with k_tiles, slot j % 16 of the tile at k + (j / 16) * k_stride.
struct KvSpan {
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  DType type = DType::F32;
  int64_t k_stride = 0, v_stride = 0;
  bool k_tiles = false;
};
// Per-ISA merge of a row's segment parts (log-sum-exp, segments in order) into its output: rows
// t in [t0, t1) are (query t / n_head, head t % n_head), their parts n_seg apart by part_len from
// parts + t * n_seg * part_len. The same steps per value on every level (bitwise).
#define TESSERA_ATTN_DECL \
  void attention_block(const AttnRows& rows, int head_dim, float scale, const KvSpan& kv, int64_t j0, int64_t j1); \
  void attention_merge(const float* parts, int64_t t0, int64_t t1, int n_head, int64_t n_seg, int64_t part_len, \
                       int head_dim, float* out, int64_t out_stride);
namespace ref { TESSERA_ATTN_DECL }
namespace avx512 { TESSERA_ATTN_DECL }
namespace avx2 { TESSERA_ATTN_DECL }
namespace neon { TESSERA_ATTN_DECL }
#undef TESSERA_ATTN_DECL

}  // namespace tessera
