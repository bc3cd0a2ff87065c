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
};

void add_serve_options(CLI::App* sub, ServeArgs& s);
int cmd_serve(CommonArgs& a, ServeArgs& s);

}  // namespace tessera::cli
