// Rewriting a GGUF with its weights in another type (`tessera convert`).
#pragma once
#include <string>
#include <vector>

#include "core/dtype.h"
#include "formats/gguf.h"

namespace tessera {

// Writes `in` to `out_path` with its weights converted to `to` (F32, F16, BF16, Q8_0, Q4_0,
// Q4_1 or Q4_K), metadata unchanged but for general.file_type. Float targets convert every
// tensor (exact for f32: each weight is the value the kernels compute with); block-quantized
// targets convert the matrices and keep 1-D tensors (norms), rows that are not a block multiple
// and an mmproj's position embeddings as they are, as llama-quantize does (llama.cpp adds
// position embeddings with a binary op that has no quantized form: it aborts on a Q8_0
// v.position_embd.weight). Q4_K needs rows of 256k: other matrices become Q4_1.
//
// `overrides` (llama-quantize's --tensor-type): the first whose regular expression is found in a
// tensor's name sets that tensor's type instead of `to` (the same fallbacks apply). A tensor
// whose type is already its target is copied as it is (no round trip through float).
struct TensorTypeOverride {
  std::string pattern;  // ECMAScript regular expression, searched in the name
  DType type;
};
// The type `convert_gguf` gives a tensor (name, GGUF dims, current type) asked to become `want`:
// `want`, or its fallback.
DType convert_target_type(const std::string& name, const std::vector<uint64_t>& dims, DType current, DType want);
void convert_gguf(const GgufFile& in, DType to, const std::string& out_path, const std::vector<TensorTypeOverride>& overrides = {});

}  // namespace tessera
