// Named weight tensors from any container (GGUF, safetensors), shapes in GGUF order
// (dims[0] is the row length), so model loaders are written once.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace tessera {

struct TensorView {
  std::string name;
  DType type = DType::F32;
  std::vector<uint64_t> dims;
  const uint8_t* data = nullptr;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual const TensorView* find(const std::string& name) const = 0;
  virtual std::string describe() const = 0;  // file name, for messages
  // A hint that the loader has copied [p, p + n) elsewhere (repacked weights) and will not read
  // it again: sources backed by a file map drop those pages (MappedFile::release). Returns the
  // bytes dropped.
  virtual size_t release(const uint8_t* p, size_t n) const {
    (void)p;
    (void)n;
    return 0;
  }

  // How a type the engine holds exactly in another (Q3_K, IQ4_NL: kernels/exact_repack.h) comes
  // back. Held: in that type, repacked on first use into memory this source owns (the file's
  // pages are then released). Stored: as in the file where the 8-bit-activation kernels take it
  // (Q3_K, IQ4_NL), so that their panels are the only copy; a caller computing with it on fp32
  // activations makes its own held copy (Session).
  enum class Form { Held, Stored };

  // The tensor, checked to exist, to have exactly `dims` and a type the kernels compute with.
  const TensorView& need(const std::string& name, const std::vector<uint64_t>& dims, Form form = Form::Held) const;
  // A rows x cols matrix (dims {cols, rows}) as a kernel operand.
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols, Form form = Form::Held) const;
  // A tensor of n elements (any dims whose product is n: conv kernels, position tables) as fp32.
  std::vector<float> floats(const std::string& name, const std::vector<uint64_t>& dims) const;

 private:
  const TensorView& repacked(const TensorView& t) const;
  struct Repacked {
    TensorView view;
    std::vector<uint8_t> data;
  };
  mutable std::mutex repack_mu_;
  mutable std::map<std::string, Repacked> repacked_;  // node-based: views stay put
};

}  // namespace tessera
