// GGUF v3 writer: metadata in insertion order, tensors aligned. Writes to a temporary file
// and renames it into place, so a failed write never leaves a half-written model behind.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf.h"

namespace tessera {

class GgufWriter {
 public:
  void set(const std::string& key, GgufValue value);
  // `data` must hold exactly row_bytes(type, dims[0]) * (product of the other dims) bytes.
  void add_tensor(const std::string& name, DType type, const std::vector<uint64_t>& dims,
                  std::vector<uint8_t> data);
  void set_alignment(uint32_t alignment);

  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;  // throws tessera::Error

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<uint64_t> dims;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace tessera
