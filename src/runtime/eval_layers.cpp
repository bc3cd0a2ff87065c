#include "runtime/eval_layers.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tessera {

LayerDivergenceProbe::LayerDivergenceProbe(Session& model, Session& reference, int n_ctx)
    : model_(model), ref_(reference), first_(n_ctx / 2), last_(n_ctx - 1), E_(model.model().config().n_embd) {
  const LlamaConfig& c = model.model().config();
  if (reference.model().config().n_layer != c.n_layer || reference.model().config().n_embd != E_)
    fail("eval --per-layer: the reference has another shape (%d layers of %d, the model %d of %d)", reference.model().config().n_layer,
         reference.model().config().n_embd, c.n_layer, E_);
  const size_t per_layer = static_cast<size_t>(last_ - first_) * static_cast<size_t>(E_);
  ref_rows_.assign(static_cast<size_t>(c.n_layer) * per_layer, 0.0f);
  errors_.resize(static_cast<size_t>(c.n_layer));
  // rows of a batch [pos0, pos0 + n) that fall in the scored range, as (row, index in the range)
  const auto each_scored = [this](int pos0, int n, auto&& f) {
    for (int i = std::max(0, first_ - pos0); i < n && pos0 + i < last_; ++i) f(i, pos0 + i - first_);
  };
  ref_.set_layer_hook([this, per_layer, each_scored](int l, int pos0, int n, const float* h) {
    each_scored(pos0, n, [&](int i, int k) {
      std::copy(h + static_cast<size_t>(i) * E_, h + static_cast<size_t>(i + 1) * E_,
                ref_rows_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(l) * per_layer + static_cast<size_t>(k) * E_));
    });
  });
  model_.set_layer_hook([this, per_layer, each_scored](int l, int pos0, int n, const float* h) {
    each_scored(pos0, n, [&](int i, int k) {
      const float* a = h + static_cast<size_t>(i) * E_;
      const float* b = ref_rows_.data() + static_cast<size_t>(l) * per_layer + static_cast<size_t>(k) * E_;
      double d = 0, r = 0;
      for (int e = 0; e < E_; ++e) {
        const double x = static_cast<double>(a[e]) - b[e];
        d += x * x, r += static_cast<double>(b[e]) * b[e];
      }
      errors_[static_cast<size_t>(l)].push_back(r > 0 ? std::sqrt(d / r) : std::sqrt(d));
    });
  });
}

LayerDivergenceProbe::~LayerDivergenceProbe() {
  model_.set_layer_hook({});
  ref_.set_layer_hook({});
}

std::vector<LayerDivergence> LayerDivergenceProbe::results() const {
  std::vector<LayerDivergence> out(errors_.size());
  for (size_t l = 0; l < errors_.size(); ++l) {
    std::vector<double> e = errors_[l];
    if (e.empty()) continue;
    double s = 0;
    for (double x : e) s += x;
    out[l].mean = s / static_cast<double>(e.size());
    std::sort(e.begin(), e.end());
    out[l].p99 = e[std::min(e.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(e.size() - 1) + 0.5))];
    out[l].max = e.back();
  }
  return out;
}

}  // namespace tessera
