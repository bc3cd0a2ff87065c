// `tessera eval`: perplexity of a model over a text file, and its divergence from a reference
// model (runtime/eval.h), as llama-perplexity [--kl-divergence] reports them.
#pragma once
#include <string>
#include <vector>

#include "cli_common.h"

namespace tessera::cli {

struct EvalArgs {
  std::string file, reference, json, reference_cache_type;
  std::string requantize;  // the model's weights requantized at load (models/requantized_source.h)
  int chunks = -1;
  // vision (--image): the towers, the question, Qwen3-VL's resize bound
  std::vector<std::string> images;
  std::string mmproj, reference_mmproj, question = "What is on the screen?";
  int64_t max_pixels = 0;
  bool reference_fp32_vision = false;
  bool reference_f32_activations = false;
  bool per_layer = false;  // with --reference: the hidden states' divergence after each layer
};

void add_eval_options(CLI::App* sub, EvalArgs& e);
// `chunk`: tokens per chunk (-c when given, else 512 as llama-perplexity's usual setting).
int cmd_eval(CommonArgs& a, const EvalArgs& e, int chunk);

}  // namespace tessera::cli
