// A GGUF's tensors requantized at load to another weight layout, without writing a file: how
// `tessera eval --requantize` measures layouts `tessera convert` cannot write (MLX's affine 4-bit,
// A4G64 and its group-32 form) against the same reference as the converted files.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "models/tensor_source.h"

namespace tessera {

// What the tensors become: `type` by the quantizer `tessera convert` uses (ggml's rounding), or
// with `mlx` by MLX's affine rule (kernels/quantize.h: quantize_row_mlx_affine; type A4G64 for
// group 64, Q4_1 blocks for group 32).
struct RequantizeTarget {
  DType type = DType::F32;
  bool mlx = false;
};
// By name: "a4g64", "a4g32" (MLX's affine 4-bit, groups of 64 / 32) or a `tessera convert --type`
// name ("q4_1", ...). Fails (tessera::Error) on another name.
RequantizeTarget requantize_target_from_name(const std::string& name);

// Over the tensors of `f` (which must outlive it): each tensor `tessera convert` would quantize
// (convert_target_type: the matrices, the token embedding included; norms, 1-D tensors, rows
// that are not whole groups and position embeddings stay; K types fall back as there) is
// dequantized to fp32 and requantized to the target the first time the loader asks for it; the
// others are the file's own bytes. A tensor already of a ggml-rule target's type keeps its bytes
// (as convert copies it); the MLX rule always requantizes (its grid is not ggml's).
class RequantizedSource : public TensorSource {
 public:
  // `threads` requantize each tensor (0: one per core); they exist only while a tensor is made.
  RequantizedSource(const GgufFile& f, RequantizeTarget target, int threads = 0);
  const TensorView* find(const std::string& name) const override;
  std::string describe() const override;
  // the file's own pages only (requantized tensors live in memory)
  size_t release(const uint8_t* p, size_t n) const override;

  // The type tensor `t` has here.
  DType type_of(const GgufTensor& t) const;
  // Bytes every tensor of the file takes in its type here, minus what it takes in the file: a
  // file of these layouts is the original's size plus this (up to the tensors' alignment).
  int64_t size_change() const;

 private:
  bool requantized(const GgufTensor& t) const;
  struct Entry {
    TensorView view;
    std::vector<uint8_t> data;
  };
  const GgufFile& file_;
  RequantizeTarget target_;
  int threads_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Entry> views_;  // node-based: pointers stay valid
};

}  // namespace tessera
