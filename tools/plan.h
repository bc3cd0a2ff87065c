// `tessera plan`: what a model, a screen setting and precisions cost on a device (this machine,
// calibrated, or an Apple M1-M4 from the table), and which options fit it (plan/predict.h).
#pragma once
#include <string>

#include "cli_common.h"

namespace tessera::cli {

struct PlanArgs {
  std::string model, mmproj,  // model: -m (the common option)
              device = "this", calibration, json, screen = "1920x1080";
  std::string weights = "as-is", vision_weights = "as-is";
  int memory_gb = 0, longest_edge = 0, question_tokens = 16, answer_tokens = 32, top = 12;
  int64_t max_pixels = 0;
  double cadence = 2.0, frames_changing = 0.5, tiles_changing = 0.15;
  double mem_budget_gb = 0, max_ttft = 3.0, max_cpu = 0.25;
  bool calibrate = false, options = false, list_devices = false;
};

void add_plan_options(CLI::App* sub, PlanArgs& p);
int cmd_plan(CommonArgs& a, const PlanArgs& p);

}  // namespace tessera::cli
