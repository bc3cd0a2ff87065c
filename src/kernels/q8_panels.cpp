#include "kernels/q8_panels.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/huge_page_arena.h"
#include "kernels/quant_blocks.h"

namespace tessera {

size_t panel_bytes(DType t, int64_t cols) {
  const size_t nb = static_cast<size_t>(cols / 32);
  const size_t scales = q8_super_scales(t) ? nb / 8 * k_scale_super_bytes(t) : nb * panel_scale_bytes(t);
  return (nb * panel_quant_bytes(t) + scales + 63) / 64 * 64;
}

namespace {

// A 5- or 6-bit block's unsigned quants u (0..31 or 0..63) into the panel: low nibbles as Q4_0's,
// then the high bits (q8_panels.h).
void pack_high_bit_quants(const uint8_t u[32], int high_bits, uint8_t* qb, int lane) {
  for (int v = 0; v < 4; ++v)
    for (int e = 0; e < 4; ++e)
      qb[64 * v + 4 * lane + e] = static_cast<uint8_t>((u[4 * v + e] & 15) | (u[16 + 4 * v + e] & 15) << 4);
  for (int G = 0; G < 8; ++G)
    for (int e = 0; e < 4; ++e) {
      const int hi = u[4 * G + e] >> 4;
      if (high_bits == 1)
        qb[256 + 4 * lane + e] |= static_cast<uint8_t>(hi << G);
      else
        qb[256 + 64 * (G / 4) + 4 * lane + e] |= static_cast<uint8_t>(hi << (2 * (G % 4)));
    }
}

// Row r of the GGUF matrix into panel slot `lane` (0..15) of `panel`. The type is a template
// argument, so a block's offsets and case are fixed at compile time (a run-time switch per block
// cost ~70 instructions a block: 43% of a 2-token run's instructions went to packing the text
// model at load).
template <DType t>
void pack_row(const uint8_t* row, int64_t nb, uint8_t* panel, int lane) {
  uint8_t* quants = panel;
  uint8_t* scales = panel + nb * panel_quant_bytes(t);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* qb = quants + b * panel_quant_bytes(t);
    uint8_t* sb = q8_super_scales(t) ? nullptr : scales + b * panel_scale_bytes(t);
    uint8_t* ks = q8_super_scales(t) ? scales + (b / 8) * static_cast<int64_t>(k_scale_super_bytes(t)) : nullptr;  // its super-block's
    switch (t) {
      case DType::Q4_0:
      case DType::IQ4_NL:  // Q4_0's bytes (its nibbles index the levels)
      case DType::Q4_1:
      case DType::A4G64: {  // fp16 d (and m: Q4_1's min, A4G64's bias), 16 bytes of nibbles
        const uint8_t* p = t == DType::A4G64 ? row + (b / 2) * kA4G64Bytes : row + b * (t == DType::Q4_1 ? 20 : 18);
        const uint8_t* qs = t == DType::A4G64 ? p + 4 + 16 * (b % 2) : p + (t == DType::Q4_1 ? 4 : 2);
        std::memcpy(sb + 2 * lane, p, 2);
        if (q8_has_min(t)) std::memcpy(sb + 32 + 2 * lane, p + 2, 2);
        for (int v = 0; v < 4; ++v) std::memcpy(qb + 64 * v + 4 * lane, qs + 4 * v, 4);
        break;
      }
      case DType::IQ4_XS: {  // the super-block's d, block j's ls − 32 and nibbles (IQ4_NL's order)
        const uint8_t* p = row + (b / 8) * kIq4xsBytes;
        const int j = static_cast<int>(b % 8);
        std::memcpy(ks + 2 * lane, p, 2);
        ks[32 + 16 * j + lane] = static_cast<uint8_t>(static_cast<int8_t>(iq4xs_block_scale(p, j)));
        for (int v = 0; v < 4; ++v) std::memcpy(qb + 64 * v + 4 * lane, p + 8 + 16 * j + 4 * v, 4);
        break;
      }
      case DType::Q3_K: {  // quants + 4 (0..7) as Q4_0's nibbles; d and the halves' sc − 32 as Q6_K's
        const uint8_t* p = row + (b / 8) * kQ3KBytes;
        const int j = static_cast<int>(b % 8);
        std::memcpy(ks + 2 * lane, p + 108, 2);
        ks[32 + 32 * j + lane] = static_cast<uint8_t>(static_cast<int8_t>(q3k_scale(p, 2 * j)));
        ks[48 + 32 * j + lane] = static_cast<uint8_t>(static_cast<int8_t>(q3k_scale(p, 2 * j + 1)));
        int8_t q[32];
        q3k_quants(p, j, q);
        for (int v = 0; v < 4; ++v)
          for (int e = 0; e < 4; ++e) qb[64 * v + 4 * lane + e] = static_cast<uint8_t>((q[4 * v + e] + 4) | (q[16 + 4 * v + e] + 4) << 4);
        break;
      }
      case DType::Q2_K: {  // 2-bit quants, four weight vectors to a byte; d, dmin, the halves' sc and m
        const uint8_t* p = row + (b / 8) * kQ2KBytes;
        const int j = static_cast<int>(b % 8), n = j / 4, jj = j % 4;
        std::memcpy(ks + 2 * lane, p + 80, 2);
        std::memcpy(ks + 32 + 2 * lane, p + 82, 2);
        for (int h = 0; h < 2; ++h) {
          const uint8_t sc = p[8 * n + 2 * jj + h];
          ks[64 + 64 * j + 16 * h + lane] = sc & 15;
          ks[96 + 64 * j + 16 * h + lane] = sc >> 4;
        }
        int8_t q[32];
        float d[2], m[2];
        q2k_block(p, j, q, d, m);
        for (int G = 0; G < 8; ++G)
          for (int e = 0; e < 4; ++e) qb[64 * (G / 4) + 4 * lane + e] |= static_cast<uint8_t>(q[4 * G + e] << (2 * (G % 4)));
        break;
      }
      case DType::Q8_0: {
        const uint8_t* p = row + b * 34;
        std::memcpy(sb + 2 * lane, p, 2);
        for (int v = 0; v < 8; ++v) {  // 4 quants at a time, each + 128 (the sign bit flipped)
          uint32_t q4;
          std::memcpy(&q4, p + 2 + 4 * v, 4);
          q4 ^= 0x80808080u;
          std::memcpy(qb + 64 * v + 4 * lane, &q4, 4);
        }
        break;
      }
      case DType::Q4_K:
      case DType::Q5_K: {  // sub-block j's scale d·sc and min −dmin·m (the same header)
        const bool q5 = t == DType::Q5_K;
        const uint8_t* p = row + (b / 8) * (q5 ? kQ5KBytes : kQ4KBytes);
        const int j = static_cast<int>(b % 8);
        int sc, mn;
        q4k_scale_min(p + 4, j, sc, mn);
        std::memcpy(ks + 2 * lane, p, 2);       // d
        std::memcpy(ks + 32 + 2 * lane, p + 2, 2);  // dmin
        ks[64 + 16 * j + lane] = static_cast<uint8_t>(sc);
        ks[192 + 16 * j + lane] = static_cast<uint8_t>(mn);
        if (q5) {
          int8_t q[32];
          q5k_quants(p, j, q);
          pack_high_bit_quants(reinterpret_cast<const uint8_t*>(q), 1, qb, lane);
        } else if (j % 2 == 0) {  // the pair (j, j+1) shares 32 bytes: pack them once
          uint8_t* pair = quants + (b / 2) * 512;
          for (int v = 0; v < 8; ++v) std::memcpy(pair + 64 * v + 4 * lane, p + 16 + 32 * (j / 2) + 4 * v, 4);
        }
        break;
      }
      case DType::Q5_0:
      case DType::Q5_1: {  // fp16 d (and m), the fifth bits, nibbles
        const bool affine = t == DType::Q5_1;
        const uint8_t* p = row + b * (affine ? kQ5_1Bytes : kQ5_0Bytes);
        int8_t q[32];
        q5_quants(p + (affine ? 4 : 2), 0, q);
        std::memcpy(sb + 2 * lane, p, 2);
        if (affine) std::memcpy(sb + 32 + 2 * lane, p + 2, 2);
        pack_high_bit_quants(reinterpret_cast<const uint8_t*>(q), 1, qb, lane);
        break;
      }
      case DType::Q6_K: {  // the two halves' d·sc
        const uint8_t* p = row + (b / 8) * kQ6KBytes;
        const int j = static_cast<int>(b % 8);
        std::memcpy(ks + 2 * lane, p + 208, 2);  // d
        ks[32 + 32 * j + lane] = p[192 + 2 * j];
        ks[48 + 32 * j + lane] = p[192 + 2 * j + 1];
        int8_t q[32];
        uint8_t u[32];
        q6k_quants(p, j, q);
        for (int i = 0; i < 32; ++i) u[i] = static_cast<uint8_t>(q[i] + 32);
        pack_high_bit_quants(u, 2, qb, lane);
        break;
      }
      default: break;
    }
  }
}

}  // namespace

PackedWeights pack_q8_panels(const WeightMatrix& w, const std::function<void(const uint8_t* p, size_t n)>& consumed,
                             HugePageArena* arena) {
  if (!supports_q8_activations(w.type)) fail("8-bit activations are not supported for %s weights", dtype_name(w.type));
  const int64_t align = q8_col_multiple(w.type);
  if (w.rows <= 0 || w.cols <= 0 || w.cols % align != 0)
    fail("cannot repack a %lldx%lld %s matrix: columns must be a positive multiple of %lld",
         static_cast<long long>(w.rows), static_cast<long long>(w.cols), dtype_name(w.type),
         static_cast<long long>(align));
  const int64_t nb = w.cols / 32;
  const int64_t n_panels = (w.rows + kPanelRows - 1) / kPanelRows;
  const size_t stride = panel_bytes(w.type, w.cols);
  PackedWeights out;
  out.bytes = stride * static_cast<size_t>(n_panels);
  void* mem = arena ? arena->allocate(out.bytes, "repacked weights") : std::aligned_alloc(64, out.bytes);
  if (!mem) fail("out of memory repacking a %lldx%lld matrix (%zu bytes)", static_cast<long long>(w.rows),
                 static_cast<long long>(w.cols), out.bytes);
  out.data = {static_cast<uint8_t*>(mem), arena ? +[](void*) {} : &std::free};
  std::memset(mem, 0, out.bytes);
  void (*pack)(const uint8_t*, int64_t, uint8_t*, int) = nullptr;
  switch (w.type) {
    case DType::Q4_0: pack = pack_row<DType::Q4_0>; break;
    case DType::Q4_1: pack = pack_row<DType::Q4_1>; break;
    case DType::A4G64: pack = pack_row<DType::A4G64>; break;
    case DType::Q8_0: pack = pack_row<DType::Q8_0>; break;
    case DType::Q4_K: pack = pack_row<DType::Q4_K>; break;
    case DType::Q5_K: pack = pack_row<DType::Q5_K>; break;
    case DType::Q5_0: pack = pack_row<DType::Q5_0>; break;
    case DType::Q5_1: pack = pack_row<DType::Q5_1>; break;
    case DType::Q6_K: pack = pack_row<DType::Q6_K>; break;
    case DType::IQ4_NL: pack = pack_row<DType::IQ4_NL>; break;
    case DType::IQ4_XS: pack = pack_row<DType::IQ4_XS>; break;
    case DType::Q3_K: pack = pack_row<DType::Q3_K>; break;
    case DType::Q2_K: pack = pack_row<DType::Q2_K>; break;
    default: fail("8-bit activations are not supported for %s weights", dtype_name(w.type));
  }
  for (int64_t r = 0; r < w.rows; ++r) {
    pack(w.data + r * w.row_stride, nb, out.data.get() + (r / kPanelRows) * stride, static_cast<int>(r % kPanelRows));
    if (consumed && ((r + 1) % 256 == 0 || r + 1 == w.rows)) consumed(w.data, static_cast<size_t>(r + 1) * w.row_stride);
  }
  out.matrix = w;
  out.matrix.panels = out.data.get();
  out.matrix.panel_stride = stride;
  return out;
}

}  // namespace tessera
