#include "models/open_model.h"

#include <filesystem>

namespace tessera {

HfModel open_model(const std::string& path, const std::string& mmproj) {
  std::error_code ec;
  HfModel m;
  if (std::filesystem::is_directory(path, ec)) m = load_hf_dir(path);
  else m.text = LlamaModel::load(path);
  if (!mmproj.empty()) m.vision = Idefics3Vision::load_mmproj(mmproj);
  return m;
}

}  // namespace tessera
