// What `tessera plan` knows of a model: its shapes and every weight's size and type, read from a
// GGUF's header (text model and mmproj), a Hugging Face config.json, or a built-in catalog of the
// published configurations — never the weights themselves, so planning a 8B model costs nothing.
#pragma once
#include <string>
#include <vector>

#include "core/dtype.h"
#include "models/llama/llama.h"
#include "models/qwen3vl/vision.h"
#include "models/smolvlm/siglip.h"

namespace tessera::plan {

enum class VisionFamily { None, Idefics3, Qwen3VL };

struct WeightTensor {
  std::string name;  // GGUF naming: "blk.3.ffn_up.weight", "token_embd.weight", "v.blk.0.attn_q.weight"
  int64_t rows = 0, cols = 0;  // cols: the row length (GGUF ne[0])
  DType type = DType::F32;
  bool vision = false;
  DType stored = DType::F32;  // the file's type: `type` differs where the engine holds it in another
  size_t bytes() const;
  // a copy the engine keeps in `type` (Q3_K as Q6_K, IQ4_NL as Q8_0: kernels/exact_repack.h; the
  // planner takes such text matrices as stored on 8-bit activations: as_computed, predict.h)
  bool held() const { return stored != type; }
};

struct ModelSpec {
  std::string name, source;  // "SmolVLM-256M", and where it came from
  LlamaConfig text;          // n_vocab set
  VisionFamily vision = VisionFamily::None;
  SiglipConfig siglip;
  Idefics3PreprocessConfig idefics3;
  Qwen3VLVisionConfig qwen;
  std::vector<WeightTensor> tensors;  // every weight as stored

  const WeightTensor* find(const std::string& name) const;
  double params(bool vision_part) const;
  size_t bytes(bool vision_part) const;
  // The most common type of the text matrices (by bytes), e.g. "Q4_K" for a Q4_K_M file
  DType main_type(bool vision_part) const;
};

// `what`: a built-in name (builtin_models()), a Hugging Face directory or its config.json, or a
// text GGUF (with `mmproj`, its vision tower). Throws Error with one line on anything unreadable.
ModelSpec open_model_spec(const std::string& what, const std::string& mmproj = "");
const std::vector<std::string>& builtin_models();

// The model with its text matrices in `text_type` and its vision matrices in `vision_type`
// (kKeepType: as they are), as `tessera convert --type` would write them (K types fall back
// where rows are not a multiple of 256; norms and position tables keep their type).
ModelSpec with_weight_types(const ModelSpec& m, DType text_type, DType vision_type);
constexpr DType kKeepType = DType::F64;

}  // namespace tessera::plan
