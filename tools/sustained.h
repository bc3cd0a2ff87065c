// `tessera sustained`: throughput and latency of one workload over minutes (drift from heat,
// other tenants, contention), window by window.
#pragma once
#include <string>

#include "cli_common.h"

namespace tessera::cli {

struct SustainedArgs {
  double minutes = 2, window_s = 15, period_s = 0;
  std::string workload = "text", mmproj, image;
  bool json = false;
};

void add_sustained_options(CLI::App* sub, SustainedArgs& s);
int cmd_sustained(CommonArgs& a, const SustainedArgs& s);

}  // namespace tessera::cli
