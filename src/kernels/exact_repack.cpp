#include "kernels/exact_repack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "kernels/quant_blocks.h"

namespace tessera {

namespace {

constexpr int kQ8_0Bytes = 34;

// One Q3_K super-block (quant_blocks.h's reading of ggml's block_q3_K) into one Q6_K super-block:
// the scales sc − 32 as Q6_K's int8 ones, d's fp16 bits, each quant + 32.
void q3k_to_q6k(const uint8_t* p, uint8_t* o) {
  std::memset(o, 0, kQ6KBytes);
  for (int s = 0; s < 16; ++s) o[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(q3k_scale(p, s)));
  std::memcpy(o + 208, p + 108, 2);  // d: the same fp16 bits
  for (int b = 0; b < 8; ++b) {  // block b = 4n + u: Q6_K's element 128n + 32u + i
    int8_t q3[32];
    q3k_quants(p, b, q3);
    const int n = b / 4, u = b % 4;
    for (int i = 0; i < 32; ++i) {
      const int q = q3[i] + 32;  // Q6_K's stored quant: 28..35
      o[64 * n + 32 * (u % 2) + i] |= static_cast<uint8_t>((q & 15) << (4 * (u / 2)));
      o[128 + 32 * n + i] |= static_cast<uint8_t>((q >> 4) << (2 * u));
    }
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
