// TensorSource over a GGUF file's tensors.
#pragma once
#include <map>

#include "formats/gguf.h"
#include "models/tensor_source.h"

namespace tessera {

class GgufTensorSource : public TensorSource {
 public:
  explicit GgufTensorSource(const GgufFile& f) : file_(f) {
    for (const auto& t : f.tensors()) views_[t.name] = TensorView{t.name, t.type, t.dims, t.data};
  }
  const TensorView* find(const std::string& name) const override {
    auto it = views_.find(name);
    return it == views_.end() ? nullptr : &it->second;
  }
  std::string describe() const override { return file_.name(); }
  size_t release(const uint8_t* p, size_t n) const override { return file_.release(p, n); }

 private:
  const GgufFile& file_;
  std::map<std::string, TensorView> views_;
};

}  // namespace tessera
