#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "core/cpu.h"
#include "core/error.h"
#include "image/image.h"
#include "kernels/kernels.h"
#include "models/smolvlm/idefics3.h"
#include "models/smolvlm/preprocess.h"

namespace tessera::cli {

namespace {

double clock_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Row {
  std::string test, unit;  // unit: "t/s" (higher is better) or "ms" (lower is better)
  std::vector<double> v;
};

std::string first_line_with(const char* path, const char* key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) {
      const size_t c = line.find(':');
      std::string v = c == std::string::npos ? line : line.substr(c + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return "unknown";
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

std::string fingerprint_json(int threads) {
  const CpuFeatures& f = cpu_features();
  std::string feats;
  auto add = [&](bool on, const char* name) {
    if (on) feats += std::string(feats.empty() ? "" : " ") + name;
  };
  add(f.avx2 && f.fma, "avx2+fma");
  add(f.avx512f && f.os_avx512, "avx512");
  add(f.avx512vnni, "avx512_vnni");
  add(f.avx512bf16, "avx512_bf16");
  add(f.amx_tile && f.os_amx, "amx");
  add(f.dotprod, "dotprod");
  add(f.i8mm, "i8mm");
  const std::string src = TESSERA_SOURCE_DIR;
  std::string commit = run_capture("git -C '" + src + "' rev-parse --short HEAD 2>/dev/null");
  if (commit.empty()) commit = "unknown";
  else if (!run_capture("git -C '" + src + "' status --porcelain -uno 2>/dev/null").empty()) commit += "-dirty";
  std::ostringstream o;
  o << "{\"cpu\": \"" << json_escape(first_line_with("/proc/cpuinfo", "model name")) << "\", \"isa_in_use\": \"" << isa_name(active_isa())
    << "\", \"cpu_features\": \"" << feats << "\", \"cores\": " << std::thread::hardware_concurrency() << ", \"threads\": " << threads
    << ", \"memory\": \"" << json_escape(first_line_with("/proc/meminfo", "MemTotal")) << "\", \"compiler\": \"" << json_escape(__VERSION__)
    << "\", \"build\": \"" << json_escape(TESSERA_BUILD_FLAGS) << "\", \"commit\": \"" << json_escape(commit) << "\"}";
  return o.str();
}

void add_bench_options(CLI::App* sub, BenchArgs& b) {
  sub->add_option("-p,--n-prompt", b.n_prompt, "prompt tokens (pp test; 0: skip)")->check(CLI::Range(0, 1 << 16));
  sub->add_option("-n,--n-gen", b.n_gen, "generated tokens (tg test; 0: skip)")->check(CLI::Range(0, 1 << 16));
  sub->add_option("-d,--depth", b.depth, "context already filled for the pp@depth and tg@depth tests (0: skip)")->check(CLI::Range(0, 1 << 16));
  sub->add_option("-r,--repetitions", b.reps, "repetitions")->check(CLI::Range(1, 1000));
  sub->add_option("--mmproj", b.mmproj, "vision model: adds the 512-tile and screenshot-question tests");
  sub->add_option("--image", b.image, "screenshot for the question test (default: a 1920x1080 fixture)");
  sub->add_option("--question-tokens", b.question_tokens, "answer length in the screenshot test")->check(CLI::Range(1, 4096));
  sub->add_flag("--json", b.json, "JSON output");
  sub->add_option("-o,--output", b.output, "write the results to this file instead of stdout");
}

int cmd_bench(CommonArgs& a, const BenchArgs& b) {
  check_bf16_vision_applies(a, !b.mmproj.empty(), "--mmproj");
  check_output_path(b.output);
  std::string image_path = b.image;
  if (!b.mmproj.empty() && image_path.empty())
    image_path = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/vision/screens/desktop_1920x1080.png";
  ImageRGB image;
  if (!b.mmproj.empty()) image = load_image(image_path, ImageLimits{});
  auto model = load(a);
  SessionOptions so = session_options(a);
  so.n_ctx = std::max({so.n_ctx, b.n_prompt + b.n_gen + 1, b.depth + std::max(b.n_prompt, b.n_gen) + 1});
  so.n_batch = std::max(so.n_batch, std::max(b.n_prompt, b.depth));
  Session session(*model, so);
  const int nv = model->config().n_vocab;
  std::mt19937 rng(42);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(nv));
    return t;
  };
  std::vector<Row> rows;
  // pp: one batch of n_prompt random tokens in a fresh context; tg: single-token decodes from an
  // empty context; pp@d, tg@d: the same after `depth` tokens already in the cache.
  if (b.n_prompt > 0) {
    Row r{"pp" + std::to_string(b.n_prompt), "t/s", {}};
    for (int rep = -1; rep < b.reps; ++rep) {  // rep -1 warms up
      const auto toks = random_tokens(b.n_prompt);
      session.truncate(0);
      const double t0 = clock_s();
      session.eval(toks);
      if (rep >= 0) r.v.push_back(b.n_prompt / (clock_s() - t0));
    }
    rows.push_back(r);
  }
  // tg: n_gen greedy single-token decodes after `depth` cached tokens (0: from an empty context)
  auto decode_row = [&](int depth) {
    Row r{"tg" + std::to_string(b.n_gen) + (depth > 0 ? " @ d" + std::to_string(depth) : ""), "t/s", {}};
    for (int rep = -1; rep < b.reps; ++rep) {
      session.truncate(0);
      if (depth > 0) session.eval(random_tokens(depth));
      int32_t tok = random_tokens(1)[0];
      const double t0 = clock_s();
      for (int i = 0; i < b.n_gen; ++i) {
        session.eval({tok});
        tok = static_cast<int32_t>(std::max_element(session.logits(), session.logits() + nv) - session.logits());
      }
      if (rep >= 0) r.v.push_back(b.n_gen / (clock_s() - t0));
    }
    rows.push_back(r);
  };
  if (b.n_gen > 0) decode_row(0);
  if (b.n_prompt > 0 && b.depth > 0) {
    Row r{"pp" + std::to_string(b.n_prompt) + " @ d" + std::to_string(b.depth), "t/s", {}};
    for (int rep = -1; rep < b.reps; ++rep) {
      session.truncate(0);
      session.eval(random_tokens(b.depth));
      const auto toks = random_tokens(b.n_prompt);
      const double t0 = clock_s();
      session.eval(toks);
      if (rep >= 0) r.v.push_back(b.n_prompt / (clock_s() - t0));
    }
    rows.push_back(r);
  }
  if (b.n_gen > 0 && b.depth > 0) decode_row(b.depth);  // llama-bench's tg@d
  if (!b.mmproj.empty()) {
    auto vision = vision_options(a, Idefics3Vision::load_mmproj(b.mmproj, vision_q8_0_at_load(a)));
    const SiglipConfig& vc = vision->config();
    const PreprocessedImage pre = preprocess_idefics3(image, vision->preprocess_config());
    std::vector<float> chw(static_cast<size_t>(3) * vc.image_size * vc.image_size);
    std::vector<float> enc(static_cast<size_t>(vc.n_patches()) * vc.hidden);
    std::vector<float> proj(static_cast<size_t>(vc.tokens_per_tile()) * vc.text_hidden);
    Row tile{"vision tile " + std::to_string(vc.image_size) + "px (encoder + connector)", "ms", {}};
    for (int rep = -1; rep < b.reps; ++rep) {
      tile_to_chw(pre.tiles[0], vision->preprocess_config(), chw.data());
      const double t0 = clock_s();
      vision->encode_tile(chw.data(), enc.data(), session.pool());
      vision->connector(enc.data(), proj.data(), session.pool());
      if (rep >= 0) tile.v.push_back((clock_s() - t0) * 1e3);
    }
    rows.push_back(tile);
    // the whole question: preprocess, every tile, prefill, a greedy answer
    try {
      Idefics3 vlm(*model, *vision);
      Row q{"screenshot " + std::to_string(image.width) + "x" + std::to_string(image.height) + " question (" +
                std::to_string(pre.tiles.size()) + " tiles, " + std::to_string(b.question_tokens) + "-token answer)",
            "ms", {}};
      SamplerOptions greedy;
      greedy.temperature = 0;
      for (int rep = 0; rep < std::max(1, b.reps / 2); ++rep) {  // long: fewer repetitions, no warm-up
        session.truncate(0);
        Sampler sampler(greedy);
        const double t0 = clock_s();
        const ImagePrompt ip = vlm.build(image, "What is the user working on?", session.pool(), nullptr);
        if (static_cast<int>(ip.tokens.size()) + b.question_tokens >= session.n_ctx()) fail("raise -c for the screenshot test");
        generate(session, ip.tokens, b.question_tokens, sampler, [](const std::string&) {}, nullptr, &ip.embeddings);
        q.v.push_back((clock_s() - t0) * 1e3);
      }
      rows.push_back(q);
    } catch (const Error& e) {
      std::fprintf(stderr, "bench: screenshot question skipped: %s\n", e.what());
    }
  }

  const int threads = session.pool().size();
  const std::string name = std::filesystem::path(a.model).filename().string();
  std::ostringstream o;
  char buf[512];
  if (b.json) {
    o << "{\"machine\": " << fingerprint_json(threads) << ", \"model\": \"" << json_escape(name) << "\", \"kv_cache\": \"" << a.cache_type
      << "\", \"activations\": \"" << (so.q8_activations ? "q8" : "f32") << "\", \"results\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto [mn, mx] = std::minmax_element(rows[i].v.begin(), rows[i].v.end());
      std::snprintf(buf, sizeof buf, "%s{\"test\": \"%s\", \"unit\": \"%s\", \"median\": %.4f, \"min\": %.4f, \"max\": %.4f, \"samples\": [",
                    i ? ", " : "", json_escape(rows[i].test).c_str(), rows[i].unit.c_str(), median(rows[i].v), *mn, *mx);
      o << buf;
      for (size_t k = 0; k < rows[i].v.size(); ++k) o << (k ? ", " : "") << rows[i].v[k];
      o << "]}";
    }
    o << "]}\n";
  } else {
    o << "machine: " << fingerprint_json(threads) << "\n";
    o << "activations: " << (so.q8_activations ? "8-bit for quantized matrices (default)" : "fp32 (--f32-activations)") << "\n\n";
    o << "| model | isa | threads | test | median | min | max | unit |\n|---|---|---|---|---|---|---|---|\n";
    for (const Row& r : rows) {
      const auto [mn, mx] = std::minmax_element(r.v.begin(), r.v.end());
      std::snprintf(buf, sizeof buf, "| %s | %s | %d | %s | %.2f | %.2f | %.2f | %s |\n", name.c_str(), isa_name(active_isa()), threads,
                    r.test.c_str(), median(r.v), *mn, *mx, r.unit.c_str());
      o << buf;
    }
  }
  if (b.output.empty()) std::fputs(o.str().c_str(), stdout);
  else write_output_file(b.output, o.str());
  return 0;
}

}  // namespace tessera::cli
