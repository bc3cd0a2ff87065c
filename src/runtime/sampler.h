// Token sampling: greedy, or seeded sampling with llama.cpp's default order
// (repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace tessera {

struct SamplerOptions {
  float temperature = 0.0f;  // <= 0: greedy
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& opt);
  // Picks the next token from n_vocab logits, then remembers it for the repetition penalty.
  int32_t sample(const float* logits, int n_vocab);
  void accept(int32_t token);  // remember a token (e.g. from the prompt) for the penalty

 private:
  SamplerOptions opt_;
  std::mt19937_64 rng_;
  std::vector<int32_t> recent_;  // a ring: the last repeat_last_n accepted tokens
  size_t recent_next_ = 0;
  std::vector<float> prob_;      // sample()'s scratch, kept so a step allocates nothing
  std::vector<double> weight_;
  std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace tessera
