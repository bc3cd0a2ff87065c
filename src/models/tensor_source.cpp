#include "models/tensor_source.h"

#include "core/error.h"
#include "kernels/exact_repack.h"

namespace tessera {

namespace {
std::string shape_str(const std::vector<uint64_t>& d) {
  std::string s;
  for (auto x : d) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}
}  // namespace

const TensorView& TensorSource::need(const std::string& name, const std::vector<uint64_t>& dims, Form form) const {
  const TensorView* t = find(name);
  if (!t) fail("%s: missing tensor '%s'", describe().c_str(), name.c_str());
  if (t->dims != dims)
    fail("%s: tensor '%s' has shape %s, expected %s", describe().c_str(), name.c_str(), shape_str(t->dims).c_str(),
         shape_str(dims).c_str());
  if (!loadable_type(t->type))
    fail("%s: tensor '%s' has type %s, which this engine cannot compute with yet", describe().c_str(), name.c_str(),
         dtype_name(t->type));
  if (dims[0] % info(t->type).block_elems != 0)
    fail("%s: tensor '%s' rows are not whole blocks", describe().c_str(), name.c_str());
  const bool stored = form == Form::Stored && supports_q8_activations(t->type);
  return needs_exact_repack(t->type) && !stored ? repacked(*t) : *t;
}

const TensorView& TensorSource::repacked(const TensorView& t) const {
  std::lock_guard<std::mutex> lock(repack_mu_);
  if (auto it = repacked_.find(t.name); it != repacked_.end()) return it->second.view;
  const DType held = exact_repack_type(t.type);
  uint64_t rows = 1;
  for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
  const uint64_t n = t.dims[0];
  Repacked r;
  r.data.resize(static_cast<size_t>(rows) * row_bytes(held, n));
  for (uint64_t i = 0; i < rows; ++i)
    exact_repack_row(t.type, t.data + i * row_bytes(t.type, n), r.data.data() + i * row_bytes(held, n), static_cast<int64_t>(n));
  r.view = TensorView{t.name, held, t.dims, nullptr};
  Repacked& kept = repacked_[t.name] = std::move(r);
  kept.view.data = kept.data.data();
  release(t.data, static_cast<size_t>(rows) * row_bytes(t.type, n));
  return kept.view;
}

WeightMatrix TensorSource::matrix(const std::string& name, int64_t rows, int64_t cols, Form form) const {
  const TensorView& t = need(name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}, form);
  WeightMatrix w;
  w.type = t.type;
  w.rows = rows;
  w.cols = cols;
  w.data = t.data;
  w.row_stride = row_bytes(t.type, static_cast<uint64_t>(cols));
  return w;
}

std::vector<float> TensorSource::floats(const std::string& name, const std::vector<uint64_t>& dims) const {
  const TensorView& t = need(name, dims);
  uint64_t n = 1;
  for (auto d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  const uint64_t row = dims[0];
  for (uint64_t r = 0; r < n / row; ++r)
    dequantize_row(t.type, t.data + r * row_bytes(t.type, row), v.data() + r * row, static_cast<int64_t>(row));
  return v;
}

}  // namespace tessera
