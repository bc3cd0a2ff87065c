#include "kernels/exact_repack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "kernels/quant_blocks.h"

namespace tessera {

namespace {

constexpr int kQ3KBytes = 110, kQ8_0Bytes = 34;

// One Q3_K super-block (256 weights in 110 bytes: hmask[32], qs[64], scales[12], fp16 d, as ggml's
// block_q3_K) into one Q6_K super-block (quant_blocks.h). Element 128n + 32j + 16h + l (n < 2, j <
// 4, h < 2, l < 16): low bits (qs[32n + 16h + l] >> 2j) & 3, high bit hmask[16h + l] bit 4n + j
// (set: +0, clear: −4); sub-block s = e / 16 has the 6-bit scale whose low 4 bits are the low
// nibble of scales[s] (s < 8) or the high nibble of scales[s − 8], and whose high 2 bits are
// (scales[8 + s % 4] >> 2(s / 4)) & 3.
void q3k_to_q6k(const uint8_t* p, uint8_t* o) {
  const uint8_t* hmask = p;
  const uint8_t* qs = p + 32;
  const uint8_t* sc = p + 96;
  std::memset(o, 0, kQ6KBytes);
  for (int s = 0; s < 16; ++s) {
    const int lo = s < 8 ? sc[s] & 0xf : sc[s - 8] >> 4;
    const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    o[192 + s] = static_cast<uint8_t>(static_cast<int8_t>((lo | (hi << 4)) - 32));
  }
  std::memcpy(o + 208, p + 108, 2);  // d: the same fp16 bits
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, j = (e % 128) / 32, h = (e % 32) / 16, l = e % 16;
    const int low = (qs[32 * n + 16 * h + l] >> (2 * j)) & 3;
    const int high = (hmask[16 * h + l] >> (4 * n + j)) & 1;
    const int q = low - (high ? 0 : 4) + 32;  // Q6_K's stored quant: 28..35
    const int u = j, i = 16 * h + l;          // Q6_K: element 128n + 32u + i
    o[64 * n + 32 * (u % 2) + i] |= static_cast<uint8_t>((q & 15) << (4 * (u / 2)));
    o[128 + 32 * n + i] |= static_cast<uint8_t>((q >> 4) << (2 * u));
  }
}

// One IQ4_NL block (fp16 d, 16 bytes: element i < 16 the low nibble of byte i, i ≥ 16 the high
// nibble of byte i − 16) into one Q8_0 block.
void iq4nl_to_q8_0(const uint8_t* p, uint8_t* o) {
  std::memcpy(o, p, 2);
  for (int i = 0; i < 16; ++i) {
    o[2 + i] = static_cast<uint8_t>(kIq4nlLevels[p[2 + i] & 0xf]);
    o[18 + i] = static_cast<uint8_t>(kIq4nlLevels[p[2 + i] >> 4]);
  }
}

}  // namespace

DType exact_repack_type(DType t) {
  switch (t) {
    case DType::Q3_K: return DType::Q6_K;
    case DType::IQ4_NL: return DType::Q8_0;
    default: return t;
  }
}

void exact_repack_row(DType from, const uint8_t* src, uint8_t* dst, int64_t n) {
  if (from == DType::Q3_K) {
    for (int64_t b = 0; b < n / 256; ++b) q3k_to_q6k(src + b * kQ3KBytes, dst + b * kQ6KBytes);
  } else if (from == DType::IQ4_NL) {
    for (int64_t b = 0; b < n / 32; ++b) iq4nl_to_q8_0(src + b * kIq4nlBytes, dst + b * kQ8_0Bytes);
  } else {
    fail("exact_repack_row: %s is held in its own type", dtype_name(from));
  }
}

PackedWeights hold_exactly(const WeightMatrix& w) {
  const DType held = exact_repack_type(w.type);
  if (held == w.type || !w.data) fail("hold_exactly: %s is held in its own type", dtype_name(w.type));
  const size_t stride = row_bytes(held, static_cast<uint64_t>(w.cols));
  PackedWeights out;
  out.bytes = stride * static_cast<size_t>(w.rows);
  void* mem = std::malloc(std::max<size_t>(out.bytes, 1));
  if (!mem) fail("out of memory holding a %lldx%lld %s matrix as %s (%zu bytes)", static_cast<long long>(w.rows),
                 static_cast<long long>(w.cols), dtype_name(w.type), dtype_name(held), out.bytes);
  out.data = {static_cast<uint8_t*>(mem), &std::free};
  for (int64_t r = 0; r < w.rows; ++r) exact_repack_row(w.type, w.data + r * w.row_stride, out.data.get() + r * stride, w.cols);
  out.matrix = w;
  out.matrix.type = held;
  out.matrix.data = out.data.get();
  out.matrix.row_stride = stride;
  return out;
}

}  // namespace tessera
