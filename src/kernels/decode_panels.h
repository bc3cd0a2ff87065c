// Weights repacked at load for the AVX-512 fp32-activation decode kernel (matrix × vector), which
// dequantizes 8 rows at a time. In GGUF order those 8 rows are 8 short streams read block by
// block across each other, an order the hardware prefetchers do not follow; repacked, a group's
// blocks come in the order the kernel reads them, one linear stream per thread, with the same
// bytes (no dequantization at load, so results stay bitwise the same; Q5_0/Q5_1 reorder their
// quant bits and Q6_K widens its quants to bytes, below).
//
// Types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, A4G64, Q4_K, Q5_K and Q6_K (below). Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 have
// blocks of 32 weights: fp16 d, Q4_1/Q5_1 also fp16 m, then 16, 20 (Q5: the 4-byte word of fifth
// bits, then the nibbles) or 32 bytes of quants. Rows must be a multiple of 8. Group g (rows
// 8g .. 8g+7) takes the bytes of its rows, nb·8 blocks, at g·nb·8·block_bytes, in chunks of up to
// 16 blocks (b0 = 0, 16, ..; n blocks):
//   chunk at b0·8·block_bytes:  d[i][j] fp16 for row i < 8, block j < n (i·n + j), then for
//                               Q4_1/Q5_1 m[i][j] likewise; then the quants block by block, row by
//                               row (block j, row i at (j·8 + i)·quant_bytes).
// A4G64 (MLX's affine 4-bit, 64-groups of fp16 scale and bias then Q4_1-ordered nibbles) is laid
// out as Q4_1 with one d and one m per pair of blocks (row i's group g of the chunk at i·(n/2) + g).
// A chunk's scales are two or four masked vector loads; its quants a linear run of 128, 160 (Q5)
// or 256 bytes per block.
// Q5_0/Q5_1 quants are rearranged (the same 160 bits) so that the kernel's table index for
// elements 0..15 is the byte itself: byte e holds q[e] (5 bits) and the low 3 bits of q[16 + e],
// and a little-endian word after the 16 bytes holds the top 2 bits of q[16 + e] at bits 2e, 2e + 1.
//
// Q4_K (super-blocks of 256 weights: a 16-byte header, fp16 d and dmin and 12 bytes of 6-bit
// sub-block scales and mins, then 4 runs of 32 bytes, each the low nibbles of one sub-block of 32
// and the high nibbles of the next): a chunk is 16 sub-blocks (2 super-blocks; the last may be
// 1). It holds the headers, row i's super-block s at (i·(n/8) + s)·16, then the 32-byte runs
// ("pairs" of sub-blocks) pair by pair, row by row (pair p, row i at (p·8 + i)·32). In bytes per
// sub-block that is 2 of header and 16 of quants, so the group and chunk offsets are the other
// types' formulas.
//
// Q5_K (Q4_K's 16-byte header, 32 bytes of fifth bits, Q4_K's nibbles) is laid out as Q4_K with
// each sub-block's quants in Q5_0's panel order (20 bytes, below): the headers, row i's
// super-block s at (i·(n/8) + s)·16, then sub-block j, row i at (j·8 + i)·20; 2 + 20 bytes per
// sub-block, the file's 176 per super-block.
//
// Q6_K (super-blocks of 256 weights: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8
// scales, fp16 d) is widened: its 6-bit quants become one signed byte each (q − 32), so the kernel
// converts them as Q8_0's, where unpacking from the GGUF order cost twice the arithmetic. A chunk
// (2 super-blocks, the last may be 1) holds 24-byte headers, row i's super-block s at
// (i·(n/8) + s)·24 (the 16 scales, d, 6 bytes of padding), then the 32 bytes of each block of 32,
// block by block, row by row (block j, row i at (j·8 + i)·32): 3 + 32 bytes per block, 280 per
// super-block where the file has 210. decode_panel_row packs the bits back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include "kernels/kernels.h"

namespace tessera {

class HugePageArena;

constexpr int kDecodeGroupRows = 8;
constexpr int kDecodeChunkBlocks = 16;

constexpr bool supports_decode_panels(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0 || t == DType::Q4_K || t == DType::A4G64 ||
         t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q5_K || t == DType::Q6_K;
}
// The types the V16 decode kernel (simd/matmul_simd.inc: AVX2, NEON) reads from panels; the
// 5-bit and Q4_K panels need AVX-512's permutes to pay off.
constexpr bool v16_decode_panels(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0 || t == DType::A4G64 || t == DType::Q6_K;
}
// per block (sub-block)
constexpr int64_t decode_scale_bytes(DType t) { return t == DType::Q4_1 || t == DType::Q5_1 ? 4 : t == DType::Q6_K ? 3 : 2; }
constexpr int64_t decode_quant_bytes(DType t) {
  return t == DType::Q8_0 || t == DType::Q6_K ? 32 : t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q5_K ? 20 : 16;
}
constexpr int64_t kQ6KPanelHeader = 24;  // per row and super-block

// Whether pack_decode_panels takes w: a supported type, rows a multiple of 8, columns a multiple of
// the type's block (32; A4G64 64; Q4_K 256).
inline bool fits_decode_panels(const WeightMatrix& w) {
  return supports_decode_panels(w.type) && w.rows > 0 && w.rows % kDecodeGroupRows == 0 && w.cols > 0 &&
         w.cols % info(w.type).block_elems == 0;
}

// The matrix for matmul with `row_panels` set (its GGUF view plus the panels). Fails with a one-line
// error for other types or shapes. `consumed`, if given, is called as packing goes with the GGUF
// bytes read so far ([w.data, w.data + n)), so a caller can drop them before the whole copy
// exists (the output head alone is 30 MB). With `arena` the panels live there (core/huge_page_arena.h).
PackedWeights pack_decode_panels(const WeightMatrix& w,
                                 const std::function<void(const uint8_t* p, size_t n)>& consumed = {},
                                 HugePageArena* arena = nullptr);

// Where row r's block b (of 32 elements) sits in the panels: its fp16 d and m (Q4_1/Q5_1; m is
// unset for the others) or, for Q4_K/Q5_K/Q6_K, its super-block's panel header in d; and its
// quants. For kernels that dequantize rows in place (prefill) where rebuilding GGUF bytes would
// cost more than the arithmetic (Q5_0/Q5_1/Q5_K/Q6_K, whose panels reorder or widen the bits).
struct PanelBlock {
  const uint8_t *d, *m, *q;
};
PanelBlock panel_block(const WeightMatrix& w, int64_t r, int64_t b);

// Row r rebuilt in GGUF block order from the panels (row_bytes(type, cols) bytes into out): for
// the kernels that read whole rows (prefill) without touching the original bytes.
void decode_panel_row(const WeightMatrix& w, int64_t r, uint8_t* out);

}  // namespace tessera
