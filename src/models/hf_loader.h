// Loading a Hugging Face model directory: config.json, model.safetensors (or a sharded
// model.safetensors.index.json), tokenizer.json and, for SmolVLM, preprocessor_config.json.
#pragma once
#include <memory>
#include <string>

#include "models/llama/llama.h"
#include "models/qwen3vl/vision.h"
#include "models/smolvlm/siglip.h"

namespace tessera {

struct HfModel {
  std::unique_ptr<LlamaModel> text;
  std::unique_ptr<Idefics3Vision> vision;  // null for a text-only (LlamaForCausalLM) directory
  std::unique_ptr<Qwen3VLVision> qwen_vision;  // Qwen3-VL's tower (directory or mmproj), else null
};

// vision_q8_0: a SmolVLM tower's float layers loaded as Q8_0 (Idefics3Vision::from_hf).
HfModel load_hf_dir(const std::string& dir, bool vision_q8_0 = false);

// What config.json (and, for SmolVLM, the preprocessor config) say, every number range-checked:
// read before any weight is touched.
struct HfConfig {
  std::string type;   // config.json's model_type: "llama", "qwen3", "qwen3_vl", "idefics3" or "smolvlm"
  int mlx_group = 0;  // mlx-lm 4-bit affine checkpoints: the group size (32 or 64); 0 otherwise
  LlamaConfig text;
  std::string text_prefix = "model.";  // where the text model's tensors are named
  int32_t bos = -1, eos = -1;
  bool has_vision = false;
  SiglipConfig vision;
  bool has_qwen_vision = false;
  Qwen3VLVisionConfig qwen_vision;
  Idefics3PreprocessConfig preprocess;
};
// `processor_text` may be empty (no preprocessor file); the paths name the files in errors.
HfConfig parse_hf_config(const std::string& config_text, const std::string& processor_text, const std::string& config_path,
                         const std::string& processor_path);

}  // namespace tessera
