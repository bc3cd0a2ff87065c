// Weights repacked at load for the 8-bit-activation matmul (matmul_q8): 16 rows interleaved
// per panel, 4 bytes per row at a time, so one 512-bit vpdpbusd (or 4 NEON SDOTs, or 2 AVX2
// maddubs) multiplies 4 consecutive weights of 16 rows by the same 4 activation bytes. Every
// row's block sum is then complete in its own lane: no horizontal sums, and one weight stream
// per panel for the prefetchers.
//
// A panel holds rows [16p, 16p + 16) (rows past the matrix are zero) and all nb = cols/32 blocks:
//   quants:  nb blocks of panel_quant_bytes (256: Q4_0, Q4_1, Q4_K, IQ4_NL, IQ4_XS, Q3_K; 320: Q5_0,
//            Q5_1, Q5_K; 384: Q6_K; 512: Q8_0), then
//   scales:  nb blocks of 16 fp16 d (Q4_0, Q5_0, Q8_0, IQ4_NL) or 16 fp16 d + 16 fp16 m (Q4_1,
//            Q5_1, A4G64); for the K-quants (and IQ4_XS) nb/8 super-blocks of the file's scales, rearranged so a
//            block's 16 rows are one vector load (q8_k_scales below): Q4_K/Q5_K 16 fp16 d, 16 fp16
//            dmin, then per block 16 bytes sc and 16 bytes m (6-bit, one byte each): 320 bytes;
//            Q6_K 16 fp16 d, then per block 16 int8 scales of its first 16 elements and 16 of its
//            last 16: 288 bytes (Q3_K likewise, its scales sc − 32); Q2_K 16 fp16 d, 16 fp16
//            dmin, then per block 16 bytes sc and 16 m of its first half, the same of its
//            second: 576 bytes; IQ4_XS 16 fp16 d, then per block 16 int8 ls − 32: 160 bytes.
//            The kernels multiply them out per block (d·sc, −dmin·m: products
//            exact in f32, so the values the scalar twin computes from the GGUF row); stored as
//            f32 products they took 8 bytes per row and block, a third more than the file's
//            whole block (decode streams these bytes from DRAM);
// padded to a multiple of 64 bytes. In the quants, "vector" v is 64 bytes with row r's 4 bytes
// at offset 4r. A kernel turns a block into 8 weight vectors g[G], G = 0..7, byte e of a row's
// word in g[G] being element 4G + e:
//   Q4_0/Q4_1 block b: vectors v = 0..3 hold GGUF bytes qs[4v, 4v+4): the low nibbles are
//     elements 4v..4v+3 (g[v]), the high nibbles elements 16+4v..16+4v+3 (g[v+4]) (ggml's order).
//     IQ4_NL and IQ4_XS blocks pack as Q4_0's (their nibbles index kIq4nlLevels); Q3_K's quants
//     + 4 (0..7) likewise.
//   Q2_K block b: 128 bytes, two vectors; bits 2i, 2i + 1 of byte e of vector k are g[4k + i]'s
//     (element 4(4k + i) + e).
//     A4G64 (MLX's affine 4-bit, group 64) packs as Q4_1: each 32-element half of a group is a
//     block with the group's scale as d and its bias as m (its halves use Q4_1's nibble order).
//   Q4_K block pair (2i, 2i+1): 512 bytes, vectors v = 0..7 hold the super-block's bytes
//     qs[32(i%4) + 4v, +4): low nibbles are block 2i's elements 4v.., high nibbles block 2i+1's.
//   Q5_0/Q5_1/Q5_K/Q6_K block b: the low 4 bits of its quants (0..31 or 0..63) in Q4_0's nibble
//     order (4 vectors), then the high bits: 5-bit types one vector, where bit G of byte e is
//     g[G]'s fifth bit (so g[G]'s bits are one shift and a mask away); Q6_K two vectors, where
//     bits 2(G%4), 2(G%4)+1 of byte e of vector G/4 are g[G]'s top two bits.
//   Q8_0 block b: vectors v = 0..7 hold elements 4v..4v+3 as unsigned bytes w + 128.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "kernels/kernels.h"

namespace tessera {

class HugePageArena;

constexpr int kPanelRows = 16;

constexpr bool is_k_quant(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }
// llama.cpp's non-linear 4-bit types: a nibble selects one of 16 int8 levels (kIq4nlLevels), per
// block of 32 scaled by fp16 d (IQ4_NL) or by d·(ls − 32), a 6-bit ls per block of a 256-element
// super-block (IQ4_XS). Their panels hold the nibbles as Q4_0's; the kernels look the levels up.
constexpr bool is_iq4(DType t) { return t == DType::IQ4_NL || t == DType::IQ4_XS; }
// Types whose panel scales are per super-block of 256 (q8_k_scales), not per block.
constexpr bool q8_super_scales(DType t) { return is_k_quant(t) || t == DType::IQ4_XS || t == DType::Q3_K || t == DType::Q2_K; }
// Types whose 32-element blocks are two 16-element halves with scales of their own (Q6_K, Q3_K):
// two integer sums per block and token, each starting at −offset times its half's Σx.
constexpr bool q8_two_halves(DType t) { return t == DType::Q6_K || t == DType::Q3_K || t == DType::Q2_K; }
// Q2_K's halves also have a min each (−dmin·m), added per token as (Σx of the half)·(min·d_x).

// Columns must be a multiple of this (a super-block, an A4G64 group, else a block).
constexpr int64_t q8_col_multiple(DType t) { return q8_super_scales(t) ? 256 : t == DType::A4G64 ? 64 : 32; }

// Types whose blocks add a min term m_w·s_x (kernels.h): unsigned quants plus an offset.
constexpr bool q8_has_min(DType t) {
  return t == DType::Q4_1 || t == DType::Q4_K || t == DType::A4G64 || t == DType::Q5_1 || t == DType::Q5_K;
}
// Bits above the nibble that a panel block stores apart (q8_panels.h's layout): 1 or 2, else 0.
constexpr int q8_high_bits(DType t) {
  return t == DType::Q6_K ? 2 : t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q5_K ? 1 : 0;
}
// What the kernels subtract from a stored quant to get the weight's integer (Q3_K: q + 4; Q8_0: stored w + 128;
// IQ4_NL/IQ4_XS: the unsigned kernels look up level + 128).
constexpr int q8_offset(DType t) {
  return t == DType::Q4_0 ? 8 : t == DType::Q5_0 ? 16 : t == DType::Q6_K ? 32 : t == DType::Q3_K ? 4
         : t == DType::Q8_0 || is_iq4(t) ? 128 : 0;
}
// Weights of up to 8 bits of magnitude: the signed kernels (AVX2 maddubs, NEON SDOT) take them as
// signed bytes (no offset), where 4- to 6-bit quants go in unsigned.
constexpr bool q8_signed_weights(DType t) { return t == DType::Q8_0 || is_iq4(t); }
// Bytes of one block's quants in a panel, and of one block's scales (not the K-quants: those are
// per super-block, k_scale_super_bytes).
constexpr size_t panel_quant_bytes(DType t) { return t == DType::Q8_0 ? 512 : t == DType::Q2_K ? 128 : 256 + 64 * q8_high_bits(t); }
constexpr size_t panel_scale_bytes(DType t) { return q8_has_min(t) ? 64 : 32; }
constexpr size_t k_scale_super_bytes(DType t) {
  return t == DType::Q2_K ? 576 : q8_two_halves(t) ? 288 : t == DType::IQ4_XS ? 160 : 320;
}
size_t panel_bytes(DType t, int64_t cols);  // one panel, a multiple of 64

// Where block b's scales sit in a K-quant panel's scale area: the super-block's 16 fp16 d and
// (Q4_K/Q5_K) dmin, and the block's 16 bytes sc and m (Q6_K: 16 int8 scales of each half;
// IQ4_XS: 16 int8 ls − 32).
struct KScales {
  const uint8_t *d, *dmin, *sc, *mn;
};
inline KScales q8_k_scales(DType t, const uint8_t* scales, int64_t b) {
  const uint8_t* s = scales + (b / 8) * static_cast<int64_t>(k_scale_super_bytes(t));
  const int64_t j = b % 8;
  if (t == DType::Q2_K) return {s, s + 32, s + 64 + 64 * j, s + 96 + 64 * j};  // sc: 16 lo, 16 hi; mn likewise
  if (q8_two_halves(t)) return {s, nullptr, s + 32 + 32 * j, s + 48 + 32 * j};
  if (t == DType::IQ4_XS) return {s, nullptr, s + 32 + 16 * j, nullptr};
  return {s, s + 32, s + 64 + 16 * j, s + 192 + 16 * j};
}

// The matrix for matmul_q8 (its GGUF view plus `panels`). Packing checks the type and shape and
// fails with a one-line error otherwise. `consumed`, if given, is called as packing goes with the
// GGUF bytes read so far ([w.data, w.data + n)), so a caller can drop them before the whole copy
// exists (as pack_decode_panels: a 2B model's tied head is 255 MB). With `arena` the panels live
// there (a model's matrices side by side in huge pages: core/huge_page_arena.h), else in their own
// allocation.
PackedWeights pack_q8_panels(const WeightMatrix& w, const std::function<void(const uint8_t* p, size_t n)>& consumed = {},
                             HugePageArena* arena = nullptr);

}  // namespace tessera
