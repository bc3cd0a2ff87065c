// Loading a Hugging Face model directory: config.json, model.safetensors (or a sharded
// model.safetensors.index.json), tokenizer.json and, for SmolVLM, preprocessor_config.json.
#pragma once
#include <memory>
#include <string>

#include "models/llama.h"
#include "models/siglip.h"

namespace tessera {

struct HfModel {
  std::unique_ptr<LlamaModel> text;
  std::unique_ptr<Idefics3Vision> vision;  // null for a text-only (LlamaForCausalLM) directory
};

HfModel load_hf_dir(const std::string& dir);

}  // namespace tessera
