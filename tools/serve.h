// `tessera serve`: the OpenAI-compatible HTTP server (src/serve/).
#pragma once
#include <string>

#include "cli_common.h"
#include "serve/server.h"

namespace tessera::cli {

struct ServeArgs {
  std::string mmproj;
  serve::ServerOptions server;
  double max_body_mb = 48;
  int64_t max_image_pixels = int64_t{1} << 24;
  int64_t vision_max_pixels = 0;  // Qwen3-VL: images and screen frames resized to at most this
  int screen_cache_mb = 64;
  int mem_budget_mb = 0;       // 0: none
  std::string screen;          // "x11" or "x11:DISPLAY"
  double capture_period_s = 1.0;
};

void add_serve_options(CLI::App* sub, ServeArgs& s);
int cmd_serve(CommonArgs& a, ServeArgs& s);

}  // namespace tessera::cli
