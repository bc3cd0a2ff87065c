// Hugging Face safetensors reader, as strict as the GGUF one: the header length, the JSON
// header, every dtype, shape and offset are checked (offsets in range, sizes equal to
// shape x dtype, tensors not overlapping) before any tensor is handed out.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace tessera {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;             // as written ("F32", "BF16", ...)
  bool known_dtype = false;      // maps to a DType the engine reads
  DType type = DType::F32;
  std::vector<uint64_t> shape;   // PyTorch order (outermost first)
  const uint8_t* data = nullptr;
  uint64_t n_bytes = 0;
};

class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  static std::unique_ptr<SafetensorsFile> parse(const uint8_t* data, size_t size, const std::string& name = "<memory>");

  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& name() const { return name_; }
  size_t release(const uint8_t* p, size_t n) const { return map_ ? map_->release(p, n) : 0; }

 private:
  SafetensorsFile() = default;
  void parse_impl(const uint8_t* data, size_t size);
  std::unique_ptr<MappedFile> map_;
  std::string name_;
  std::map<std::string, SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tessera
