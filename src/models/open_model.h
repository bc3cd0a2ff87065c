// Opening a model as a user names it: a GGUF file (llama.cpp's text model) or a Hugging Face
// directory (safetensors, which may hold a SmolVLM vision tower too), with an optional llama.cpp
// mmproj GGUF for the vision tower. The one place this policy lives: the CLI, the C API and a
// server all call it.
#pragma once
#include <string>

#include "models/hf_loader.h"

namespace tessera {

// `mmproj`, when given, is the vision tower (a directory's own tower is then not used): SmolVLM's
// (HfModel::vision) or, for projector type qwen3vl_merger, Qwen3-VL's (HfModel::qwen_vision).
// vision_q8_0: SmolVLM's float layers loaded as Q8_0 (Idefics3Vision::load_mmproj).
HfModel open_model(const std::string& path, const std::string& mmproj = "", bool vision_q8_0 = false);
// An mmproj GGUF's clip.projector_type ("" when unset).
std::string mmproj_projector_type(const std::string& path);

}  // namespace tessera
