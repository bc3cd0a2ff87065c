// `tessera quantize`: a mixed-precision GGUF under a KL-divergence or size budget, searched from
// per-tensor sensitivities measured on a calibration text (runtime/mixed_precision.h).
#pragma once
#include <string>

#include "cli_common.h"

namespace tessera::cli {

struct QuantizeArgs {
  std::string output, file = "/usr/share/common-licenses/GPL-3", types = "q4_k,q5_k,q6_k,q8_0";
  std::string sensitivity, save_sensitivity, max_size;
  double max_kld = -1, max_bpw = -1;
  int calib_chunks = 1, layer_bands = 0;
};

void add_quantize_options(CLI::App* sub, QuantizeArgs& q);
// `chunk`: tokens per calibration chunk (-c when given, else 512).
int cmd_quantize(CommonArgs& a, const QuantizeArgs& q, int chunk);

}  // namespace tessera::cli
