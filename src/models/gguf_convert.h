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
// v.position_embd.weight). K types need rows of 256k: other matrices take llama-quantize's
// fallback (converted_type).
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

// The type tensor `t` gets when `want` is asked for it: `want`, or llama-quantize's fallback for
// rows that are not whole 256-element super-blocks (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), or
// its own type where a block type does not apply (norms, odd rows, position embeddings).
DType converted_type(const GgufTensor& t, DType want);

// The conversion targets by their command-line names ("f32", "q4_k", ...): kConvertTypeNames lists
// them; convert_type_from_name fails (tessera::Error) on another name.
constexpr const char* kConvertTypeNames = "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q3_k, q4_k, q5_k, q6_k";
DType convert_type_from_name(const std::string& name);
// The command-line name of a conversion target ("q4_k" for Q4_K).
std::string convert_type_name(DType t);

}  // namespace tessera
