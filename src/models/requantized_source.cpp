#include "models/requantized_source.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/exact_repack.h"
#include "kernels/kernels.h"
#include "kernels/quantize.h"
#include "models/gguf_convert.h"

namespace tessera {

RequantizeTarget requantize_target_from_name(const std::string& name) {
  if (name == "a4g64") return {DType::A4G64, true};
  if (name == "a4g32") return {DType::Q4_1, true};  // an MLX group of 32 is a Q4_1 block
  try {
    return {convert_type_from_name(name), false};  // convert's own names
  } catch (const Error&) {
    fail("unknown requantization '%s' (one of a4g64, a4g32, %s)", name.c_str(), kConvertTypeNames);
  }
}

RequantizedSource::RequantizedSource(const GgufFile& f, RequantizeTarget target, int threads)
    : file_(f), target_(target), threads_(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
  if (!can_quantize_to(target.type)) fail("cannot requantize to %s", dtype_name(target.type));
  if (target.mlx && target.type != DType::A4G64 && target.type != DType::Q4_1)
    fail("MLX's affine rule writes A4G64 or Q4_1 blocks, not %s", dtype_name(target.type));
  for (const GgufTensor& t : f.tensors())
    if (!loadable_type(t.type))
      fail("%s: tensor '%s' has type %s, which cannot be requantized", f.name().c_str(), t.name.c_str(), dtype_name(t.type));
}

DType RequantizedSource::type_of(const GgufTensor& t) const { return convert_target_type(t.name, t.dims, t.type, target_.type); }

bool RequantizedSource::requantized(const GgufTensor& t) const {
  const DType tt = type_of(t);
  if (tt != t.type) return true;
  // the MLX rule on a tensor convert would give the target type whatever its type (not one kept
  // as it is: norms, odd rows, position embeddings), even one already of that type
  return target_.mlx && convert_target_type(t.name, t.dims, DType::F32, target_.type) == target_.type;
}

const TensorView* RequantizedSource::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = views_.find(name); it != views_.end()) return &it->second.view;
  const GgufTensor* t = file_.find_tensor(name);
  if (!t) return nullptr;
  Entry e;
  e.view = TensorView{t->name, t->type, t->dims, t->data};
  if (requantized(*t)) {
    const DType tt = type_of(*t);
    const uint64_t n = t->dims[0], rows = t->n_elements / n;
    const size_t in_row = row_bytes(t->type, n), out_row = row_bytes(tt, n);
    e.data.resize(out_row * rows);
    uint8_t* out = e.data.data();
    const bool mlx = target_.mlx;
    const int group = tt == DType::A4G64 ? 64 : 32;
    ThreadPool pool(threads_);
    pool.parallel_for(static_cast<int64_t>(rows), 4, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(n);
      for (int64_t r = r0; r < r1; ++r) {
        dequantize_row(t->type, t->data + static_cast<uint64_t>(r) * in_row, row.data(), static_cast<int64_t>(n));
        uint8_t* dst = out + static_cast<uint64_t>(r) * out_row;
        if (mlx) quantize_row_mlx_affine(group, row.data(), static_cast<int64_t>(n), dst);
        else quantize_row(tt, row.data(), static_cast<int64_t>(n), dst);
      }
    });
    e.view.type = tt;
    e.view.data = e.data.data();
  }
  return &views_.emplace(name, std::move(e)).first->second.view;
}

std::string RequantizedSource::describe() const { return file_.name(); }

size_t RequantizedSource::release(const uint8_t* p, size_t n) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, e] : views_)
    if (!e.data.empty() && p >= e.data.data() && p < e.data.data() + e.data.size()) return 0;
  return file_.release(p, n);
}

int64_t RequantizedSource::size_change() const {
  int64_t d = 0;
  for (const GgufTensor& t : file_.tensors())
    d += static_cast<int64_t>(row_bytes(type_of(t), t.dims[0]) * (t.n_elements / t.dims[0])) - static_cast<int64_t>(t.n_bytes);
  return d;
}

}  // namespace tessera
