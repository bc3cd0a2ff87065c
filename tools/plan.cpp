#include "plan.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/output_file.h"
#include "models/gguf_convert.h"
#include "plan/predict.h"

namespace tessera::cli {

using namespace tessera::plan;

namespace {

std::string default_calibration() { return std::string(TESSERA_SOURCE_DIR) + "/models/plan_device.json"; }

std::string read_small_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail("cannot read '%s' (not a regular file)", path.c_str());
  if (std::filesystem::file_size(path, ec) > (1u << 20)) fail("'%s' is over 1 MiB: not a device profile", path.c_str());
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// This machine's rates: the saved calibration, or a new one (saved) when there is none or asked.
DeviceProfile this_machine(const PlanArgs& p, int threads) {
  const std::string path = p.calibration.empty() ? default_calibration() : p.calibration;
  std::error_code ec;
  if (!p.calibrate && std::filesystem::exists(path, ec)) {
    DeviceProfile d = device_from_json(read_small_file(path), path);
    if (threads > 0 && threads != d.threads)
      fail("%s was measured with %d threads, not %d: run tessera plan --calibrate -t %d", path.c_str(), d.threads, threads, threads);
    return d;
  }
  check_output_path(path);
  std::fprintf(stderr, "plan: timing this machine's kernels (once; saved to %s)...\n", path.c_str());
  DeviceProfile d = calibrate_this_machine(threads);
  write_output_file(path, device_to_json(d));
  return d;
}

std::pair<int, int> parse_screen(const std::string& s) {
  int w = 0, h = 0;
  char x = 0, extra = 0;
  if (std::sscanf(s.c_str(), "%d%c%d%c", &w, &x, &h, &extra) != 3 || (x != 'x' && x != 'X') || w < 16 || h < 16 || w > 16384 ||
      h > 16384)
    fail("--screen '%s': use WIDTHxHEIGHT, each 16 to 16384 (e.g. 2560x1600)", s.c_str());
  return {w, h};
}

DType weight_type(const std::string& name, const char* flag) {
  if (name == "as-is") return kKeepType;
  try {
    return convert_type_from_name(name);
  } catch (const Error&) {
    fail("%s '%s': use as-is or one of %s", flag, name.c_str(), kConvertTypeNames);
  }
}

double mib(double b) { return b / (1 << 20); }

std::string json_prediction(const ModelSpec& m, const Scenario& s, const DeviceProfile& d, const Prediction& p) {
  return format(
      "{\"model\": \"%s\", \"device\": \"%s\", \"screen\": [%d, %d], \"longest_edge\": %d, \"max_pixels\": %lld, \"n_ctx\": %d, "
      "\"text_type\": \"%s\", \"activations\": \"%s\", \"vision_q8\": %s, \"kv_type\": \"%s\", \"tiles\": %d, \"patches\": %lld, \"image_tokens\": %d, \"prompt_tokens\": %d, "
      "\"memory\": {\"weights\": %.0f, \"vision_weights\": %.0f, \"kv_full\": %.0f, \"kv_question\": %.0f, \"activations\": %.0f, "
      "\"vision_buffers\": %.0f, \"frames\": %.0f, \"process\": %.0f, \"screen_cache\": %.0f, \"peak_question\": %.0f, \"reserved\": %.0f}, "
      "\"ms\": {\"preprocess\": %.3f, \"vision\": %.3f, \"vision_per_tile\": %.3f, \"prefill\": %.3f, \"prefill_question\": %.3f, "
      "\"decode_per_token\": %.4f, \"ttft_cold\": %.3f, \"ttft_watched\": %.3f, \"answer\": %.3f, \"watch_per_frame\": %.3f}, "
      "\"watch_cpu_share\": %.4f}",
      json_escape(m.name).c_str(), json_escape(d.name).c_str(), s.screen_w, s.screen_h, s.longest_edge, static_cast<long long>(s.max_pixels),
      s.n_ctx, dtype_name(as_computed(m, s.q8_activations).main_type(false)), s.q8_activations ? "q8" : "f32", p.vision_q8 ? "true" : "false", dtype_name(s.kv_type), p.tiles, static_cast<long long>(p.patches), p.image_tokens,
      p.prompt_tokens, p.weights, p.vision_weights, p.kv_full, p.kv_question, p.activations, p.vision_buffers, p.frames, p.process,
      p.screen_cache, p.peak_question, p.reserved, p.preprocess_ms, p.vision_ms, p.vision_per_tile_ms, p.prefill_ms, p.prefill_question_ms,
      p.decode_ms_per_token, p.ttft_cold_ms, p.ttft_watched_ms, p.answer_ms, p.watch_ms_per_frame, p.watch_cpu_share);
}

void print_report(const ModelSpec& spec, const Scenario& s, const DeviceProfile& d, const Prediction& p) {
  const ModelSpec m = as_computed(spec, s.q8_activations);  // the types computed with (IQ4_NL as stored on 8-bit activations)
  std::printf("model   %s (%s)\n", m.name.c_str(), m.source.c_str());
  std::printf("        text %.0fM weights, %s, %.1f MiB, %s activations", m.params(false) / 1e6, dtype_name(m.main_type(false)),
              mib(static_cast<double>(m.bytes(false))), s.q8_activations ? "8-bit" : "fp32");
  if (m.vision != VisionFamily::None)
    std::printf("; vision %.0fM weights, %s, %.1f MiB%s", m.params(true) / 1e6, dtype_name(m.main_type(true)), mib(static_cast<double>(m.bytes(true))),
                !p.vision_q8 ? "" : p.vision_q8_type != m.main_type(true) ? ", as Q8_0 (quantized at load), 8-bit activations" : ", 8-bit activations");
  std::printf("\ndevice  %s: %d threads, %.1f GiB, DRAM %.1f GB/s (%s)\n", d.name.c_str(), d.threads, d.mem_bytes / (1u << 30), d.dram_gbs,
              d.source.c_str());
  if (m.vision == VisionFamily::Idefics3)
    std::printf("screen  %dx%d, longest edge %d: %d tiles, %d image tokens, prompt %d tokens\n", s.screen_w, s.screen_h,
                s.longest_edge ? s.longest_edge : m.idefics3.longest_edge, p.tiles, p.image_tokens, p.prompt_tokens);
  else if (m.vision == VisionFamily::Qwen3VL)
    std::printf("screen  %dx%d, max pixels %s: %lld patches, %d image tokens, prompt %d tokens\n", s.screen_w, s.screen_h,
                s.max_pixels ? std::to_string(s.max_pixels).c_str() : "(the processor's, 16777216)", static_cast<long long>(p.patches),
                p.image_tokens, p.prompt_tokens);
  std::printf("\n| memory | MiB |\n|---|---|\n");
  const std::pair<const char*, double> mem[] = {{"text weights", p.weights}, {"vision weights", p.vision_weights},
                                                {"KV cache touched by a question", p.kv_question}, {"activations", p.activations},
                                                {"vision buffers", p.vision_buffers}, {"image and its tiles", p.frames},
                                                {"process", p.process}};
  for (const auto& [k, v] : mem) std::printf("| %s | %.1f |\n", k, mib(v));
  std::printf("| **resident after an image question** | **%.1f** |\n", mib(p.peak_question));
  std::printf("| KV cache at -c %d (%s) | %.1f |\n", s.n_ctx, dtype_name(s.kv_type), mib(p.kv_full));
  if (m.vision != VisionFamily::None) std::printf("| watching: the screen's encoding and its saved prompt | %.1f |\n", mib(p.screen_cache));
  std::printf("| **to reserve (cache full%s)** | **%.1f** |\n", m.vision != VisionFamily::None ? ", a screen watched" : "", mib(p.reserved));
  std::printf("\n| time | ms |\n|---|---|\n");
  if (m.vision != VisionFamily::None)
    std::printf("| preprocess | %.1f |\n| vision encode (%d x %.1f) | %.1f |\n", p.preprocess_ms, p.tiles, p.vision_per_tile_ms, p.vision_ms);
  std::printf("| prefill, %d tokens | %.1f |\n| decode, per token | %.2f (%.1f tok/s) |\n", p.prompt_tokens, p.prefill_ms,
              p.decode_ms_per_token, 1e3 / p.decode_ms_per_token);
  std::printf("| time to first token, new screen | %.1f |\n", p.ttft_cold_ms);
  if (m.vision != VisionFamily::None) std::printf("| time to first token, screen already watched | %.1f |\n", p.ttft_watched_ms);
  std::printf("| answer of %d tokens, new screen | %.1f |\n", s.answer_tokens, p.answer_ms);
  if (m.vision != VisionFamily::None)
    std::printf("\nwatching a frame every %.1f s (%.0f%% of frames changing, %.0f%% of tiles each): %.1f ms per frame on average, "
                "%.1f%% of the device's %d cores\n",
                s.cadence_s, 100 * s.frames_changing, 100 * s.tiles_changing, p.watch_ms_per_frame, 100 * p.watch_cpu_share, d.cores);
}

// Every model x resolution x precision, the ones that fit first, best first: the largest model,
// then the most image tokens, then the most bits per weight.
void print_options(const std::vector<ModelSpec>& models, const Scenario& base, const DeviceProfile& d, const PlanArgs& pa) {
  struct Row {
    ModelSpec m;
    DType asked;
    Scenario s;
    Prediction p;
    bool fits;
    std::string why;
    double params;  // the model's and its weights' sums, once per row for the sort
    size_t bytes;
  };
  std::vector<Row> rows;
  const double budget = pa.mem_budget_gb > 0 ? pa.mem_budget_gb * (1u << 30) : 0.5 * d.mem_bytes;
  for (const ModelSpec& m0 : models)
    for (DType t : {DType::F16, DType::Q8_0, DType::Q6_K, DType::Q5_K, DType::Q4_K}) {
      const ModelSpec m = with_weight_types(m0, t, DType::F16);
      std::vector<Scenario> res;
      for (int k = 1; k <= 4; ++k) {
        Scenario s = base;
        if (m.vision == VisionFamily::Idefics3) s.longest_edge = 512 * k;
        else if (m.vision == VisionFamily::Qwen3VL) s.max_pixels = int64_t{256} * 256 * k * k;
        else if (k > 1) break;
        res.push_back(s);
      }
      for (const Scenario& s : res) {
        const Prediction p = predict(m, s, d);
        std::string why;
        if (p.reserved > budget) why = format("memory %.0f > %.0f MiB", mib(p.reserved), mib(budget));
        else if (p.prompt_tokens + s.answer_tokens > s.n_ctx) why = "prompt over -c";
        else if (p.ttft_watched_ms > pa.max_ttft * 1e3) why = format("TTFT %.1f s > %.1f s", p.ttft_watched_ms / 1e3, pa.max_ttft);
        else if (p.watch_cpu_share > pa.max_cpu) why = format("watching %.0f%% CPU > %.0f%%", 100 * p.watch_cpu_share, 100 * pa.max_cpu);
        rows.push_back({m, t, s, p, why.empty(), why, m.params(false), m.bytes(false)});
      }
    }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.fits != b.fits) return a.fits;
    if (a.params != b.params) return a.params > b.params;
    if (a.p.image_tokens != b.p.image_tokens) return a.p.image_tokens > b.p.image_tokens;
    return a.bytes > b.bytes;
  });
  const size_t fit = static_cast<size_t>(std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.fits; }));
  std::printf("\n%zu of %zu options fit %s (memory budget %.0f MiB, TTFT on a watched screen <= %.1f s, watching <= %.0f%% CPU); best first:\n\n",
              fit, rows.size(), d.name.c_str(), mib(budget), pa.max_ttft, 100 * pa.max_cpu);
  std::printf("| # | model | weights | resolution | image tokens | reserve MiB | TTFT watched s | TTFT new screen s | decode tok/s | watching CPU | fits |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < rows.size() && i < static_cast<size_t>(pa.top); ++i) {
    const Row& r = rows[i];
    const std::string res = r.m.vision == VisionFamily::Idefics3 ? format("edge %d", r.s.longest_edge)
                            : r.m.vision == VisionFamily::Qwen3VL ? format("%lld px", static_cast<long long>(r.s.max_pixels))
                                                                  : "-";
    const std::string wt = r.asked == r.m.main_type(false) ? dtype_name(r.asked) : format("%s (%s on its rows)", dtype_name(r.asked), dtype_name(r.m.main_type(false)));
    std::printf("| %zu | %s | %s | %s | %d | %.0f | %.2f | %.1f | %.1f | %.1f%% | %s |\n", i + 1, r.m.name.c_str(), wt.c_str(),
                res.c_str(), r.p.image_tokens, mib(r.p.reserved), r.p.ttft_watched_ms / 1e3, r.p.ttft_cold_ms / 1e3, 1e3 / r.p.decode_ms_per_token,
                100 * r.p.watch_cpu_share, r.fits ? "yes" : r.why.c_str());
  }
}

}  // namespace

void add_plan_options(CLI::App* sub, PlanArgs& p) {
  sub->add_option("--mmproj", p.mmproj, "the vision tower's mmproj GGUF");
  sub->add_option("--device", p.device, "this (measured), or an Apple chip: m1, m1-pro, m1-max, m2, ..., m4-max (--list-devices)");
  sub->add_option("--memory-gb", p.memory_gb, "the Apple device's memory (default: its smallest)")->check(CLI::Range(1, 1024));
  sub->add_flag("--list-devices", p.list_devices, "print the Apple table and exit");
  sub->add_flag("--calibrate", p.calibrate, "time this machine's kernels again (a few seconds) and save them");
  sub->add_option("--calibration", p.calibration, "this machine's saved rates (default models/plan_device.json)");
  sub->add_option("--screen", p.screen, "screen size WIDTHxHEIGHT (default 1920x1080)");
  sub->add_option("--longest-edge", p.longest_edge, "SmolVLM: resize the screen's longest edge to this (a multiple of 512)")
      ->check(CLI::Range(512, 8192));
  sub->add_option("--max-pixels", p.max_pixels, "Qwen3-VL: resize the screen to at most this many pixels")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 26));
  sub->add_option("--weights", p.weights, "text weights as stored (as-is) or converted: f16, q8_0, q6_k, q5_k, q4_k, q4_1, q4_0, ...");
  sub->add_option("--vision-weights", p.vision_weights, "vision weights as stored (as-is) or converted: f16, q8_0");
  sub->add_option("--cadence", p.cadence, "seconds between screen frames")->check(CLI::Range(0.05, 3600.0));
  sub->add_option("--frames-changing", p.frames_changing, "share of frames that change")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--tiles-changing", p.tiles_changing, "SmolVLM: share of the tiles a changing frame touches")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--question-tokens", p.question_tokens, "tokens of a question (its template included)")->check(CLI::Range(1, 65536));
  sub->add_option("--answer-tokens", p.answer_tokens, "tokens of an answer")->check(CLI::Range(1, 65536));
  sub->add_flag("--options", p.options, "list the models x resolutions x precisions that fit the device, best first");
  sub->add_option("--mem-budget-gb", p.mem_budget_gb, "--options: memory the assistant may take (default: half the device's)")
      ->check(CLI::Range(0.01, 4096.0));
  sub->add_option("--max-ttft", p.max_ttft, "--options: seconds to first token on a watched screen")->check(CLI::Range(0.001, 3600.0));
  sub->add_option("--max-cpu", p.max_cpu, "--options: share of the cores watching may take")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--top", p.top, "--options: rows to print")->check(CLI::Range(1, 10000));
  sub->add_option("--json", p.json, "also write the prediction as JSON to this file");
}

int cmd_plan(CommonArgs& a, const PlanArgs& pa_in) {
  PlanArgs p = pa_in;
  p.model = a.model;  // -m: a text GGUF, a Hugging Face directory or config.json, or a built-in name
  check_output_path(p.json);
  if (p.list_devices) {
    std::printf("| device | P+E cores | memory GB | bandwidth GB/s | CPU fp32 GFLOP/s (derived) | GPU TFLOPS | Neural Engine TOPS | SME |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (const AppleChip& c : apple_chips()) {
      std::string mem;
      for (int g : c.memory_gb) mem += (mem.empty() ? "" : ", ") + std::to_string(g);
      std::printf("| %s | %d+%d | %s | %.0f | %.0f | %.1f | %.1f | %s |\n", c.name, c.p_cores, c.e_cores, mem.c_str(), c.dram_gbs,
                  c.cpu_fp32_gflops, c.gpu_tflops, c.ane_tops, c.sme ? "yes" : "no");
    }
    return 0;
  }
  if (p.device == "this" && p.memory_gb) fail("--memory-gb is for an Apple device; this machine's memory is measured");
  const auto [w, h] = parse_screen(p.screen);
  const DType text_type = weight_type(p.weights, "--weights"), vision_type = weight_type(p.vision_weights, "--vision-weights");
  if (p.device != "this") (void)find_apple_chip(p.device);  // a name the table has, before anything is measured
  std::vector<ModelSpec> models;
  if (p.model.empty() && p.options) {
    for (const std::string& n : builtin_models()) models.push_back(open_model_spec(n));
  } else {
    models.push_back(open_model_spec(p.model.empty() ? default_model_path() : p.model, p.mmproj));
  }
  if (p.longest_edge && models.front().vision != VisionFamily::Idefics3 && !p.options) fail("--longest-edge is SmolVLM's (Idefics3)");
  if (p.max_pixels && models.front().vision != VisionFamily::Qwen3VL && !p.options) fail("--max-pixels is Qwen3-VL's");
  // the flags and the model are sound: now this machine's rates (measured once, then read)
  const int threads = a.threads > 0 ? cap_threads(a.threads) : 0;
  const DeviceProfile here = this_machine(p, threads);
  const DeviceProfile d = p.device == "this" ? here : apple_device(p.device, p.memory_gb, here);
  Scenario s;
  s.screen_w = w, s.screen_h = h;
  s.longest_edge = p.longest_edge, s.max_pixels = p.max_pixels;
  s.n_ctx = a.ctx, s.n_batch = a.batch;
  s.kv_type = kv_type_from_name(a.cache_type);
  s.q8_activations = !a.f32_act;
  if (s.q8_activations && d.q8_decode_gbs.empty())
    std::fprintf(stderr, "plan: note: the saved calibration predates the 8-bit-activation rates: the fp32 ones stand in "
                 "(tessera plan --calibrate measures them)\n");
  s.question_tokens = p.question_tokens, s.answer_tokens = p.answer_tokens;
  s.cadence_s = p.cadence, s.frames_changing = p.frames_changing, s.tiles_changing = p.tiles_changing;
  const ModelSpec m = with_weight_types(models.front(), text_type, vision_type);
  // a session caps a sliding-window model's context at the window (runtime/session.h)
  if (m.text.swa_window > 0) s.n_ctx = std::min(s.n_ctx, m.text.swa_window);
  const Prediction pr = predict(m, s, d);
  if (pr.prompt_tokens + s.answer_tokens > s.n_ctx && !p.options)
    std::fprintf(stderr, "plan: note: the image prompt (%d tokens) and answer do not fit -c %d\n", pr.prompt_tokens, s.n_ctx);
  if (!p.options || !p.model.empty()) print_report(m, s, d, pr);
  if (p.options) print_options(models, s, d, p);
  if (!p.json.empty()) write_output_file(p.json, json_prediction(m, s, d, pr) + "\n");
  return 0;
}

}  // namespace tessera::cli
