// `tessera sustained`: one workload run again and again for N minutes -- a screen is watched all
// day -- reporting, per time window, requests completed, latency (median, p90, max) and the CPU
// time used, so drift from heat, other tenants or contention shows up as a trend.
#include "sustained.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <sys/resource.h>
#include <thread>

#include "bench.h"
#include "core/error.h"
#include "core/output_file.h"
#include "image/image.h"
#include "models/smolvlm/idefics3.h"

namespace tessera::cli {

namespace {

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

void add_sustained_options(CLI::App* sub, SustainedArgs& s) {
  sub->add_option("--minutes", s.minutes, "how long to run")->check(CLI::Range(0.05, 24 * 60.0));
  sub->add_option("--window", s.window_s, "seconds per reported window")->check(CLI::Range(1.0, 3600.0));
  sub->add_option("--period", s.period_s, "start a request every PERIOD seconds (0: back to back), e.g. 1 for a 1 fps watcher")
      ->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--workload", s.workload, "text (a chat turn: prompt + 32-token answer) or screen (a screenshot question)")
      ->check(CLI::IsMember({"text", "screen"}));
  sub->add_option("--mmproj", s.mmproj, "vision model for --workload screen");
  sub->add_option("--image", s.image, "screenshot for --workload screen (default: a 1920x1080 fixture)");
  sub->add_flag("--json", s.json, "one JSON line per window instead of a table");
}

int cmd_sustained(CommonArgs& a, const SustainedArgs& s) {
  if (s.workload == "screen" && s.mmproj.empty()) fail("--workload screen needs --mmproj");
  ImageRGB image;
  check_bf16_vision_applies(a, s.workload == "screen", "the screen workload");
  if (s.workload == "screen")
    image = load_image(s.image.empty() ? std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/vision/screens/desktop_1920x1080.png" : s.image,
                       ImageLimits{});
  auto model = load(a);
  Session session(*model, session_options(a));
  std::unique_ptr<Idefics3Vision> vision;
  if (s.workload == "screen") vision = vision_options(a, Idefics3Vision::load_mmproj(s.mmproj, vision_q8_0_at_load(a)));
  const std::vector<int32_t> chat = model->tokenizer().encode(
      apply_chat_template(*model, {{"user", "Summarise what a developer does when they refactor a large C++ codebase."}}, true), true);
  SamplerOptions greedy;
  greedy.temperature = 0;

  auto request = [&] {
    session.truncate(0);
    Sampler sampler(greedy);
    if (vision) {
      Idefics3 vlm(*model, *vision);
      const ImagePrompt ip = vlm.build(image, "What is the user working on?", session.pool(), nullptr);
      generate(session, ip.tokens, 16, sampler, [](const std::string&) {}, nullptr, &ip.embeddings);
    } else {
      generate(session, chat, 32, sampler, [](const std::string&) {});
    }
  };

  const int threads = session.pool().size();
  std::printf("%s\n", s.json ? ("{\"machine\": " + fingerprint_json(threads) + ", \"workload\": \"" + s.workload + "\"}").c_str()
                            : ("machine: " + fingerprint_json(threads) + "\nworkload: " + s.workload).c_str());
  if (!s.json)
    std::printf("\n| window | t (s) | requests | latency median ms | p90 ms | max ms | CPU busy (cores) |\n|---|---|---|---|---|---|---|\n");
  const double t_start = now_seconds(), t_end = t_start + s.minutes * 60.0;
  double next = t_start, w_start = t_start, w_cpu = cpu_seconds();
  std::vector<double> lat, first_lat, last_lat;
  int window = 0;
  while (now_seconds() < t_end) {
    if (s.period_s > 0) {  // a cadence: wait for the next tick (a late request starts at once)
      const double wait = next - now_seconds();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      next += s.period_s;
    }
    const double t0 = now_seconds();
    request();
    lat.push_back((now_seconds() - t0) * 1e3);
    const double t = now_seconds();
    if (t - w_start >= s.window_s || t >= t_end) {
      const double busy = (cpu_seconds() - w_cpu) / (t - w_start);
      ++window;
      if (window == 1) first_lat = lat;
      last_lat = lat;
      if (s.json)
        std::printf("{\"window\": %d, \"t_s\": %.1f, \"requests\": %zu, \"latency_ms\": {\"median\": %.1f, \"p90\": %.1f, \"max\": %.1f}, "
                    "\"cpu_cores_busy\": %.2f}\n",
                    window, t - t_start, lat.size(), median(lat), pct(lat, 0.9), pct(lat, 1.0), busy);
      else
        std::printf("| %d | %.0f | %zu | %.1f | %.1f | %.1f | %.2f |\n", window, t - t_start, lat.size(), median(lat), pct(lat, 0.9),
                    pct(lat, 1.0), busy);
      flush_stdout();
      lat.clear();
      w_start = t;
      w_cpu = cpu_seconds();
    }
  }
  if (!first_lat.empty() && !last_lat.empty())
    std::printf(s.json ? "{\"drift_last_over_first_median\": %.3f}\n" : "\ndrift: last window's median latency / first window's = %.3f\n",
                median(last_lat) / median(first_lat));
  return 0;
}

}  // namespace tessera::cli
