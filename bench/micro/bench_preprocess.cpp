// Image preprocessing as a process runs it frame after frame: the first call (fresh pages for the
// resampler's intermediate images) and the calls after it, for SmolVLM's longest-edge settings and
// Qwen3-VL's max_pixels settings, on one screenshot. Prints one line per setting: the first call
// and the median of the next ones, in ms. `--fresh` gives the resampler's scratch back before
// every call (each call then pays what a first call pays).
// Usage: bench_preprocess IMAGE THREADS [--fresh] [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "image/image.h"
#include "image/resize.h"
#include "models/qwen3vl/preprocess.h"
#include "models/smolvlm/preprocess.h"

using namespace tessera;

namespace {
template <class F>
void row(const char* what, int reps, bool fresh, F&& f) {
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    if (fresh) release_resize_scratch();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const double first = t[0];
  t.erase(t.begin());
  std::sort(t.begin(), t.end());
  std::printf("%-28s first %7.1f ms   then median %7.1f ms (%.1f..%.1f)\n", what, first, t[t.size() / 2], t.front(), t.back());
}
}  // namespace

int main(int argc, char** argv) try {
  if (argc < 3) fail("usage: bench_preprocess IMAGE THREADS [--fresh] [--reps N]");
  const ImageRGB im = load_image(argv[1]);
  ThreadPool pool(std::max(1, std::atoi(argv[2])));
  bool fresh = false;
  int reps = 9;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--fresh")) fresh = true;
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else fail("bench_preprocess: unknown argument %s", argv[i]);
  }
  std::printf("%s: %d x %d, %d threads%s\n", argv[1], im.width, im.height, static_cast<int>(pool.size()), fresh ? ", scratch given back before each call" : "");
  char name[64];
  for (int edge : {512, 1024, 2048}) {
    Idefics3PreprocessConfig pc;
    pc.longest_edge = edge;
    std::snprintf(name, sizeof name, "SmolVLM edge %d", edge);
    row(name, reps, fresh, [&] { (void)preprocess_idefics3(im, pc, &pool); });
  }
  for (int64_t px : {65536, 262144, 589824, 1048576}) {
    const Qwen3VLPreprocessConfig pc = Qwen3VLPreprocessConfig{}.with_max_pixels(px);
    std::snprintf(name, sizeof name, "Qwen3-VL %lld px", static_cast<long long>(px));
    row(name, reps, fresh, [&] { (void)preprocess_qwen3vl(im, pc, &pool); });
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_preprocess: %s\n", e.what());
  return 1;
}
