#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tessera {

Sampler::Sampler(const SamplerOptions& opt) : opt_(opt), rng_(opt.seed) {
  if (!(opt.temperature >= 0.0f) || std::isinf(opt.temperature)) fail("temperature must be >= 0");
  if (!(opt.top_p > 0.0f && opt.top_p <= 1.0f)) fail("top-p must be in (0, 1]");
  if (!(opt.min_p >= 0.0f && opt.min_p < 1.0f)) fail("min-p must be in [0, 1)");
  if (!(opt.repeat_penalty > 0.0f) || std::isinf(opt.repeat_penalty)) fail("repeat penalty must be > 0");
  if (opt.repeat_last_n < 0) fail("repeat-last-n must be >= 0");
  recent_.reserve(static_cast<size_t>(opt.repeat_last_n));
}

void Sampler::accept(int32_t token) {
  if (opt_.repeat_last_n == 0) return;
  // a ring of the last repeat_last_n tokens (their order does not matter to the penalty)
  const size_t cap = static_cast<size_t>(opt_.repeat_last_n);
  if (recent_.size() < cap) recent_.push_back(token);
  else recent_[recent_next_] = token;
  recent_next_ = (recent_next_ + 1) % cap;
}

int32_t Sampler::sample(const float* logits, int n_vocab) {
  if (opt_.temperature <= 0.0f && opt_.repeat_penalty == 1.0f && n_vocab > 0) {
    // greedy without penalties: a plain argmax, the first of equal maxima (as below), in two
    // passes: the max over 8 independent running maxima (one dependent compare per logit took
    // 68 µs for 49152 logits, 2.6% of a SmolLM2 token), then the first index holding it. NaN
    // logits are never the max, as in a `>` scan; a NaN first logit (no `>` is ever true) keeps 0.
    int32_t best = 0;
    if (!std::isnan(logits[0])) {
      float m[8];
      std::fill(m, m + 8, logits[0]);
      int i = 0;
      for (; i + 8 <= n_vocab; i += 8)
        for (int j = 0; j < 8; ++j) m[j] = logits[i + j] > m[j] ? logits[i + j] : m[j];
      for (; i < n_vocab; ++i) m[0] = logits[i] > m[0] ? logits[i] : m[0];
      for (int j = 1; j < 8; ++j) m[0] = m[j] > m[0] ? m[j] : m[0];
      while (!(logits[best] == m[0])) ++best;
    }
    accept(best);
    return best;
  }
  cand_.resize(static_cast<size_t>(n_vocab));
  for (int i = 0; i < n_vocab; ++i) cand_[static_cast<size_t>(i)] = {logits[i], i};
  if (opt_.repeat_penalty != 1.0f) {
    for (int32_t t : recent_) {
      if (t < 0 || t >= n_vocab) continue;
      float& l = cand_[static_cast<size_t>(t)].first;
      l = l > 0 ? l / opt_.repeat_penalty : l * opt_.repeat_penalty;
    }
  }
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  int32_t chosen;
  if (opt_.temperature <= 0.0f) {
    chosen = std::min_element(cand_.begin(), cand_.end(), by_logit)->second;
  } else {
    size_t n = cand_.size();
    if (opt_.top_k > 0 && static_cast<size_t>(opt_.top_k) < n) n = static_cast<size_t>(opt_.top_k);
    std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(n), cand_.end(), by_logit);
    cand_.resize(n);
    // softmax over the kept candidates (sorted, so cand_[0] is the max)
    std::vector<float>& p = prob_;  // members: a decode step allocates nothing
    p.resize(n);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += p[i] = std::exp(cand_[i].first - cand_[0].first);
    if (opt_.top_p < 1.0f) {
      double cum = 0;
      size_t keep = n;
      for (size_t i = 0; i < n; ++i) {
        cum += p[i] / sum;
        if (cum >= opt_.top_p) {
          keep = i + 1;
          break;
        }
      }
      n = keep;
    }
    if (opt_.min_p > 0.0f) {
      size_t keep = 1;
      while (keep < n && p[keep] >= opt_.min_p * p[0]) ++keep;  // p[0] is the max probability
      n = keep;
    }
    // temperature, then draw
    std::vector<double>& w = weight_;
    w.resize(n);
    double tot = 0;
    for (size_t i = 0; i < n; ++i)
      tot += w[i] = std::exp(static_cast<double>(cand_[i].first - cand_[0].first) / opt_.temperature);
    std::uniform_real_distribution<double> uni(0.0, tot);
    double r = uni(rng_), acc = 0;
    chosen = cand_[n - 1].second;
    for (size_t i = 0; i < n; ++i) {
      acc += w[i];
      if (r < acc) {
        chosen = cand_[i].second;
        break;
      }
    }
  }
  accept(chosen);
  return chosen;
}

}  // namespace tessera
