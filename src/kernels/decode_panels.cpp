#include "kernels/decode_panels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/huge_page_arena.h"
#include "kernels/quant_blocks.h"

namespace tessera {

namespace {

// Where row i (of its group) of block b sits, in bytes from the group's first: its d, its m (Q4_1,
// A4G64) and its quants. An A4G64 block's d and m are its 64-group's, one per pair of blocks.
struct BlockAt {
  int64_t d, m, q;
};
BlockAt block_at(DType t, int64_t nb, int64_t b, int i) {
  const int64_t bb = decode_scale_bytes(t) + decode_quant_bytes(t);
  const int64_t b0 = b / kDecodeChunkBlocks * kDecodeChunkBlocks, n = std::min<int64_t>(kDecodeChunkBlocks, nb - b0),
                j = b - b0;
  const int64_t per = t == DType::A4G64 ? 2 : 1, ns = n / per;  // blocks per scale, scales per row
  const int64_t chunk = b0 * kDecodeGroupRows * bb, d = chunk + (i * ns + j / per) * 2;
  return {d, d + kDecodeGroupRows * ns * 2,
          chunk + kDecodeGroupRows * n * decode_scale_bytes(t) + (j * kDecodeGroupRows + i) * decode_quant_bytes(t)};
}

// Q4_K: where row i of super-block S sits, from the group's first byte: its 16-byte header, and
// (for run k = 0..3 of its quants) its 32-byte runs at q + k·kDecodeGroupRows·32.
struct SuperAt {
  int64_t header, q;
};
SuperAt super_at(int64_t nb, int64_t S, int i) {
  const int64_t b = 8 * S, b0 = b / kDecodeChunkBlocks * kDecodeChunkBlocks,
                ns = std::min<int64_t>(kDecodeChunkBlocks, nb - b0) / 8, s = (b - b0) / 8;
  const int64_t chunk = b0 * kDecodeGroupRows * (decode_scale_bytes(DType::Q4_K) + decode_quant_bytes(DType::Q4_K));
  return {chunk + (i * ns + s) * 16, chunk + kDecodeGroupRows * ns * 16 + (4 * s * kDecodeGroupRows + i) * 32};
}

// 32 five-bit quants (0..31) in a decode panel's 20 bytes (decode_panels.h): byte e holds q[e]
// and the low 3 bits of q[16 + e], the word after the 16 bytes the top 2 bits of q[16 + e] at
// bits 2e, 2e + 1; and back.
void pack_q5(const int8_t q[32], uint8_t* panel) {
  uint32_t top = 0;
  for (int e = 0; e < 16; ++e) {
    const uint32_t lo = static_cast<uint32_t>(q[e]), hi = static_cast<uint32_t>(q[16 + e]);
    panel[e] = static_cast<uint8_t>(lo | (hi & 7u) << 5);
    top |= (hi >> 3) << (2 * e);
  }
  std::memcpy(panel + 16, &top, 4);
}
void unpack_q5(const uint8_t* panel, int q[32]) {
  uint32_t top;
  std::memcpy(&top, panel + 16, 4);
  for (int e = 0; e < 16; ++e) {
    q[e] = panel[e] & 31;
    q[16 + e] = static_cast<int>((panel[e] >> 5) | ((top >> (2 * e)) & 3u) << 3);
  }
}

// A Q5_0/Q5_1 block's quant bytes (GGUF: the qh word, then 16 bytes of nibbles) to the panel, and back.
void q5_to_panel(const uint8_t* gguf, uint8_t* panel) {
  int8_t q[32];
  q5_quants(gguf, 0, q);
  pack_q5(q, panel);
}
void q5_from_panel(const uint8_t* panel, uint8_t* gguf) {
  int q[32];
  unpack_q5(panel, q);
  uint32_t qh = 0;
  for (int e = 0; e < 16; ++e) {
    gguf[4 + e] = static_cast<uint8_t>((q[e] & 15) | (q[16 + e] & 15) << 4);
    qh |= static_cast<uint32_t>(q[e] >> 4) << e | static_cast<uint32_t>(q[16 + e] >> 4) << (16 + e);
  }
  std::memcpy(gguf, &qh, 4);
}

// Q5_K and Q6_K: row i's super-block S in the panels, from the group's first byte: its header
// (Q5_K: the file's 16 bytes, as Q4_K's; Q6_K: kQ6KPanelHeader bytes), and block j (0..7) of its
// quants at q + j·kDecodeGroupRows·decode_quant_bytes.
SuperAt kquant_at(DType t, int64_t nb, int64_t S, int i) {
  const int64_t hb = t == DType::Q6_K ? kQ6KPanelHeader : 16, qb = decode_quant_bytes(t);
  const int64_t b = 8 * S, b0 = b / kDecodeChunkBlocks * kDecodeChunkBlocks,
                ns = std::min<int64_t>(kDecodeChunkBlocks, nb - b0) / 8, s = (b - b0) / 8;
  const int64_t chunk = b0 * kDecodeGroupRows * (decode_scale_bytes(t) + qb);
  return {chunk + (i * ns + s) * hb, chunk + kDecodeGroupRows * ns * hb + (8 * s * kDecodeGroupRows + i) * qb};
}

// A Q5_K super-block's quants to the panel (each sub-block packed as a Q5_0 block is), and back.
void q5k_to_panel(const uint8_t* sb, uint8_t* q) {
  for (int j = 0; j < 8; ++j) {
    int8_t v[32];
    q5k_quants(sb, j, v);
    pack_q5(v, q + j * kDecodeGroupRows * 20);
  }
}
void q5k_from_panel(const uint8_t* q, uint8_t* sb) {
  std::memset(sb + 16, 0, kQ5KBytes - 16);
  for (int j = 0; j < 8; ++j) {  // sub-block j: nibbles in qs[32·(j/2) + l] (low or high), fifth bit j of qh[l]
    int v[32];
    unpack_q5(q + j * kDecodeGroupRows * 20, v);
    for (int l = 0; l < 32; ++l) {
      sb[48 + 32 * (j / 2) + l] |= static_cast<uint8_t>((v[l] & 15) << (4 * (j % 2)));
      sb[16 + l] |= static_cast<uint8_t>((v[l] >> 4) << j);
    }
  }
}

// A Q6_K super-block widened into its panel places (scales, d, q − 32 per byte), or packed back.
void q6k_to_panel(const uint8_t* sb, uint8_t* header, uint8_t* q) {
  std::memcpy(header, sb + 192, 16);  // the int8 scales
  std::memcpy(header + 16, sb + 208, 2);  // d
  for (int j = 0; j < 8; ++j) q6k_quants(sb, j, reinterpret_cast<int8_t*>(q + j * kDecodeGroupRows * 32));
}
void q6k_from_panel(const uint8_t* header, const uint8_t* q, uint8_t* sb) {
  std::memset(sb, 0, 192);
  for (int j = 0; j < 8; ++j) {  // element 128n + 32u + l: low bits in ql, high 2 in qh (quant_blocks.h)
    const int n = j / 4, u = j % 4;
    for (int l = 0; l < 32; ++l) {
      const int v = static_cast<int8_t>(q[j * kDecodeGroupRows * 32 + l]) + 32;
      sb[64 * n + 32 * (u % 2) + l] |= static_cast<uint8_t>((v & 15) << (4 * (u / 2)));
      sb[128 + 32 * n + l] |= static_cast<uint8_t>((v >> 4) << (2 * u));
    }
  }
  std::memcpy(sb + 192, header, 16);
  std::memcpy(sb + 208, header + 16, 2);
}

// Copies row i's bytes between its GGUF row and its group in the panels, either way.
void copy_row(DType t, int64_t nb, int i, const uint8_t* from, uint8_t* to, bool to_panels) {
  auto move = [&](int64_t row_off, int64_t panel_off, size_t n) {
    if (to_panels) std::memcpy(to + panel_off, from + row_off, n);
    else std::memcpy(to + row_off, from + panel_off, n);
  };
  if (t == DType::Q4_K) {
    for (int64_t S = 0; S < nb / 8; ++S) {
      const SuperAt at = super_at(nb, S, i);
      move(S * kQ4KBytes, at.header, 16);
      for (int k = 0; k < 4; ++k) move(S * kQ4KBytes + 16 + 32 * k, at.q + k * kDecodeGroupRows * 32, 32);
    }
    return;
  }
  if (t == DType::Q6_K) {
    for (int64_t S = 0; S < nb / 8; ++S) {
      const SuperAt at = kquant_at(t, nb, S, i);
      if (to_panels) q6k_to_panel(from + S * kQ6KBytes, to + at.header, to + at.q);
      else q6k_from_panel(from + at.header, from + at.q, to + S * kQ6KBytes);
    }
    return;
  }
  if (t == DType::Q5_K) {
    for (int64_t S = 0; S < nb / 8; ++S) {
      const SuperAt at = kquant_at(t, nb, S, i);
      move(S * kQ5KBytes, at.header, 16);
      if (to_panels) q5k_to_panel(from + S * kQ5KBytes, to + at.q);
      else q5k_from_panel(from + at.q, to + S * kQ5KBytes);
    }
    return;
  }
  if (t == DType::A4G64) {  // a 64-group: scale, bias, then the two blocks' 16 bytes of nibbles
    for (int64_t b = 0; b < nb; ++b) {
      const BlockAt at = block_at(t, nb, b, i);
      const int64_t g = (b / 2) * kA4G64Bytes;
      if (b % 2 == 0) {  // the pair's one scale and bias
        move(g, at.d, 2);
        move(g + 2, at.m, 2);
      }
      move(g + 4 + 16 * (b % 2), at.q, 16);
    }
    return;
  }
  const int64_t sb = decode_scale_bytes(t), qb = decode_quant_bytes(t), bb = sb + qb;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockAt at = block_at(t, nb, b, i);
    move(b * bb, at.d, 2);
    if (sb == 4) move(b * bb + 2, at.m, 2);
    if (t == DType::Q5_0 || t == DType::Q5_1) {
      if (to_panels) q5_to_panel(from + b * bb + sb, to + at.q);
      else q5_from_panel(from + at.q, to + b * bb + sb);
      continue;
    }
    move(b * bb + sb, at.q, static_cast<size_t>(qb));
  }
}

}  // namespace

PackedWeights pack_decode_panels(const WeightMatrix& w, const std::function<void(const uint8_t* p, size_t n)>& consumed,
                                 HugePageArena* arena) {
  if (!supports_decode_panels(w.type)) fail("decode panels: %s weights are not supported", dtype_name(w.type));
  if (!fits_decode_panels(w))
    fail("decode panels: cannot repack a %lldx%lld matrix (rows a multiple of 8, columns of %u)",
         static_cast<long long>(w.rows), static_cast<long long>(w.cols), info(w.type).block_elems);
  const int64_t nb = w.cols / 32, bb = decode_scale_bytes(w.type) + decode_quant_bytes(w.type);
  const size_t group = static_cast<size_t>(nb * kDecodeGroupRows * bb);
  PackedWeights out;
  out.bytes = (group * static_cast<size_t>(w.rows / kDecodeGroupRows) + 63) / 64 * 64;
  void* mem = arena ? arena->allocate(out.bytes, "repacked weights") : std::aligned_alloc(64, out.bytes);
  if (!mem) fail("out of memory repacking a %lldx%lld matrix (%zu bytes)", static_cast<long long>(w.rows),
                 static_cast<long long>(w.cols), out.bytes);
  out.data = {static_cast<uint8_t*>(mem), arena ? +[](void*) {} : &std::free};
  std::memset(mem, 0, out.bytes);
  for (int64_t r = 0; r < w.rows; ++r) {
    uint8_t* g = out.data.get() + static_cast<size_t>(r / kDecodeGroupRows) * group;
    copy_row(w.type, nb, static_cast<int>(r % kDecodeGroupRows), w.data + r * w.row_stride, g, true);
    if (consumed && ((r + 1) % 256 == 0 || r + 1 == w.rows)) consumed(w.data, static_cast<size_t>(r + 1) * w.row_stride);
  }
  out.matrix = w;
  out.matrix.row_panels = out.data.get();
  return out;
}

PanelBlock panel_block(const WeightMatrix& w, int64_t r, int64_t b) {
  const int64_t nb = w.cols / 32, bb = decode_scale_bytes(w.type) + decode_quant_bytes(w.type);
  const uint8_t* g = w.row_panels + (r / kDecodeGroupRows) * nb * kDecodeGroupRows * bb;
  const int i = static_cast<int>(r % kDecodeGroupRows);
  if (w.type == DType::Q4_K) {
    const SuperAt at = super_at(nb, b / 8, i);
    return {g + at.header, nullptr, g + at.q + (b % 8 / 2) * kDecodeGroupRows * 32};
  }
  if (w.type == DType::Q5_K || w.type == DType::Q6_K) {
    const SuperAt at = kquant_at(w.type, nb, b / 8, i);
    return {g + at.header, nullptr, g + at.q + (b % 8) * kDecodeGroupRows * decode_quant_bytes(w.type)};
  }
  const BlockAt at = block_at(w.type, nb, b, i);
  return {g + at.d, g + at.m, g + at.q};
}

void decode_panel_row(const WeightMatrix& w, int64_t r, uint8_t* out) {
  const int64_t nb = w.cols / 32, bb = decode_scale_bytes(w.type) + decode_quant_bytes(w.type);
  const uint8_t* g = w.row_panels + (r / kDecodeGroupRows) * nb * kDecodeGroupRows * bb;
  copy_row(w.type, nb, static_cast<int>(r % kDecodeGroupRows), g, out, false);
}

}  // namespace tessera
