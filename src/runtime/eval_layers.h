// Per-layer divergence for `tessera eval --per-layer`: where along the depth a quantized model's
// hidden states leave the reference's. Attached to the two sessions before evaluate() runs them
// (it evaluates the reference's chunk first, then the model's), it compares, after every layer,
// each scored position's hidden state (the residual stream): |h_model - h_ref| / |h_ref| in L2.
#pragma once
#include <vector>

#include "runtime/session.h"

namespace tessera {

struct LayerDivergence {
  double mean = 0, p99 = 0, max = 0;  // over the scored positions
};

class LayerDivergenceProbe {
 public:
  // Positions [n_ctx / 2, n_ctx - 1) of each chunk are compared, as evaluate() scores them.
  LayerDivergenceProbe(Session& model, Session& reference, int n_ctx);
  ~LayerDivergenceProbe();  // detaches the hooks
  LayerDivergenceProbe(const LayerDivergenceProbe&) = delete;
  LayerDivergenceProbe& operator=(const LayerDivergenceProbe&) = delete;
  std::vector<LayerDivergence> results() const;

 private:
  Session& model_;
  Session& ref_;
  int first_, last_, E_;
  std::vector<float> ref_rows_;               // layers x scored positions x n_embd, this chunk's
  std::vector<std::vector<double>> errors_;   // per layer, every compared position
};

}  // namespace tessera
