// Tensor element types, numbered as in GGUF/ggml so files map directly.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tessera {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  // Engine-only layouts (never read from a GGUF file; made when weights are repacked at load).
  // A4G64: MLX-style affine 4-bit, group 64: fp16 scale, fp16 bias, 32 bytes of nibbles;
  // x = scale * q + bias. (Group 32 with fp16 scale/bias is exactly Q4_1's layout.)
  A4G64 = 1064,
};

struct DTypeInfo {
  const char* name;
  uint32_t block_elems;  // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
  bool computable;       // the engine has kernels for it
  bool engine_only = false;  // an internal layout: a file declaring it is rejected
};

// nullptr for an id the engine does not know.
const DTypeInfo* dtype_info(uint32_t id);
inline const DTypeInfo& info(DType t) { return *dtype_info(static_cast<uint32_t>(t)); }
const char* dtype_name(DType t);

// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(DType t, uint64_t n) {
  const DTypeInfo& i = info(t);
  return static_cast<size_t>(n / i.block_elems) * i.block_bytes;
}

}  // namespace tessera
