#include "kernels/decode_panels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace tessera {

namespace {

// Where row i (of its group) of block b sits, in bytes from the group's first: its d, its m (Q4_1)
// and its quants.
struct BlockAt {
  int64_t d, m, q;
};
BlockAt block_at(DType t, int64_t nb, int64_t b, int i) {
  const int64_t bb = decode_scale_bytes(t) + decode_quant_bytes(t);
  const int64_t b0 = b / kDecodeChunkBlocks * kDecodeChunkBlocks, n = std::min<int64_t>(kDecodeChunkBlocks, nb - b0),
                j = b - b0;
  const int64_t chunk = b0 * kDecodeGroupRows * bb, d = chunk + (i * n + j) * 2;
  return {d, d + kDecodeGroupRows * n * 2,
          chunk + kDecodeGroupRows * n * decode_scale_bytes(t) + (j * kDecodeGroupRows + i) * decode_quant_bytes(t)};
}

}  // namespace

PackedWeights pack_decode_panels(const WeightMatrix& w, const std::function<void(const uint8_t* p, size_t n)>& consumed) {
  if (!supports_decode_panels(w.type)) fail("decode panels: %s weights are not supported", dtype_name(w.type));
  if (w.rows <= 0 || w.rows % kDecodeGroupRows != 0 || w.cols <= 0 || w.cols % 32 != 0)
    fail("decode panels: cannot repack a %lldx%lld matrix (rows a multiple of 8, columns of 32)",
         static_cast<long long>(w.rows), static_cast<long long>(w.cols));
  const int64_t nb = w.cols / 32, sb = decode_scale_bytes(w.type), qb = decode_quant_bytes(w.type), bb = sb + qb;
  const size_t group = static_cast<size_t>(nb * kDecodeGroupRows * bb);
  PackedWeights out;
  out.bytes = (group * static_cast<size_t>(w.rows / kDecodeGroupRows) + 63) / 64 * 64;
  void* mem = std::aligned_alloc(64, out.bytes);
  if (!mem) fail("out of memory repacking a %lldx%lld matrix (%zu bytes)", static_cast<long long>(w.rows),
                 static_cast<long long>(w.cols), out.bytes);
  out.data = {static_cast<uint8_t*>(mem), std::free};
  std::memset(mem, 0, out.bytes);
  for (int64_t r = 0; r < w.rows; ++r) {
    uint8_t* g = out.data.get() + static_cast<size_t>(r / kDecodeGroupRows) * group;
    const int i = static_cast<int>(r % kDecodeGroupRows);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* src = w.data + r * w.row_stride + b * bb;  // d, (m,) quants
      const BlockAt at = block_at(w.type, nb, b, i);
      std::memcpy(g + at.d, src, 2);
      if (sb == 4) std::memcpy(g + at.m, src + 2, 2);
      std::memcpy(g + at.q, src + sb, static_cast<size_t>(qb));
    }
    if (consumed && ((r + 1) % 256 == 0 || r + 1 == w.rows)) consumed(w.data, static_cast<size_t>(r + 1) * w.row_stride);
  }
  out.matrix = w;
  out.matrix.row_panels = out.data.get();
  return out;
}

void decode_panel_row(const WeightMatrix& w, int64_t r, uint8_t* out) {
  const int64_t nb = w.cols / 32, sb = decode_scale_bytes(w.type), qb = decode_quant_bytes(w.type), bb = sb + qb;
  const uint8_t* g = w.row_panels + (r / kDecodeGroupRows) * nb * kDecodeGroupRows * bb;
  const int i = static_cast<int>(r % kDecodeGroupRows);
  for (int64_t b = 0; b < nb; ++b) {
    const BlockAt at = block_at(w.type, nb, b, i);
    std::memcpy(out + b * bb, g + at.d, 2);
    if (sb == 4) std::memcpy(out + b * bb + 2, g + at.m, 2);
    std::memcpy(out + b * bb + sb, g + at.q, static_cast<size_t>(qb));
  }
}

}  // namespace tessera
