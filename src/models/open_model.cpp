#include "models/open_model.h"

#include <filesystem>

namespace tessera {

std::string mmproj_projector_type(const std::string& path) {
  auto f = GgufFile::open(path);
  return f->get_string("clip.projector_type", f->get_string("clip.vision.projector_type", ""));
}

HfModel open_model(const std::string& path, const std::string& mmproj, bool vision_q8_0) {
  std::error_code ec;
  HfModel m;
  if (std::filesystem::is_directory(path, ec)) m = load_hf_dir(path, vision_q8_0);
  else m.text = LlamaModel::load(path);
  if (!mmproj.empty()) {
    // the projector type says which family's tower it is
    const std::string proj = mmproj_projector_type(mmproj);
    if (proj == "qwen3vl_merger") m.qwen_vision = Qwen3VLVision::load_mmproj(mmproj), m.vision.reset();
    else m.vision = Idefics3Vision::load_mmproj(mmproj, vision_q8_0), m.qwen_vision.reset();
  }
  return m;
}

}  // namespace tessera
