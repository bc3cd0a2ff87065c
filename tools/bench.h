// `tessera bench`: llama-bench's standard tests (pp512, tg128, pp512 at depth 512) plus the
// vision tests (one 512x512 tile through the encoder; one screenshot question end to end),
// repeated, as markdown or JSON with a fingerprint of the machine and build.
#pragma once
#include <string>

#include "cli_common.h"

namespace tessera::cli {

struct BenchArgs {
  int n_prompt = 512, n_gen = 128, depth = 512, reps = 5;
  std::string mmproj;              // enables the vision tests
  std::string image;               // screenshot for the question test (default: a 1920x1080 fixture)
  int question_tokens = 16;        // answer length in the screenshot test
  bool json = false;
  std::string output;              // file instead of stdout
};

void add_bench_options(CLI::App* sub, BenchArgs& b);
int cmd_bench(CommonArgs& a, const BenchArgs& b);

// CPU model, ISA levels, cores, memory, compiler and flags, commit: as a JSON object.
std::string fingerprint_json(int threads);

}  // namespace tessera::cli
