// `tessera watch`: a standing question over a stream of screen frames with exact (default) and
// opt-in approximate reuse of the previous frames' work (src/watch/watcher.h).
#pragma once
#include <string>

#include "cli_common.h"

namespace tessera::cli {

struct WatchArgs {
  std::string frames, mmproj, reference_mmproj, question = "What is the user working on?";
  int n_predict = 16, cache_mb = 256, validate = 0;
  int64_t max_pixels = 0;  // Qwen3-VL: --vision-max-pixels
  double cadence_s = 0, approx_global = -1, approx_kv = -1;
  bool no_reuse = false, approx_gate = false;
  bool validate_fp32_vision = false;  // the full recompute with the default fp32 vision path: the quality cost of --bf16-vision/--q8-activations
};

void add_watch_options(CLI::App* sub, WatchArgs& w);
int cmd_watch(CommonArgs& a, const WatchArgs& w);

}  // namespace tessera::cli
