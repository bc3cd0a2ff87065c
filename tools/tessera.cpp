// The tessera command line: run, chat, bench, tokenize.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <iostream>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/mapped_file.h"
#include "core/output_file.h"
#include "kernels/kernels.h"
#include "profile/profiler.h"
#include "image/image.h"
#include "models/gguf_convert.h"
#include "models/hf_loader.h"
#include "models/qwen3vl/qwen3vl.h"
#include "models/smolvlm/idefics3.h"
#include "models/llama/llama.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "profile/probe.h"
#include "runtime/session.h"
#include "vlm_init.h"
#include "cli_common.h"
#include "bench.h"
#include "sustained.h"
#include "eval.h"
#include "plan.h"
#include "quantize.h"
#include "watch.h"
#include "serve.h"

using namespace tessera;
using namespace tessera::cli;

namespace {

struct VisionArgs {
  std::string mmproj, image;
  int64_t max_pixels = ImageLimits{}.max_pixels;
  int64_t resize_pixels = 0;  // Qwen3-VL: the processor's max_pixels (0: its own, 16 Mpx)
  int longest_edge = 0;       // SmolVLM: the processor's size.longest_edge (0: the mmproj's)
};

struct ProfileArgs {
  bool on = false;
  std::string trace, json, probe;
};

std::string probe_path(const ProfileArgs& pa) {
  return pa.probe.empty() ? std::string(TESSERA_SOURCE_DIR) + "/models/probe.json" : pa.probe;
}

// The probe's saved peaks, when present, must be a readable regular file (MappedFile's rule).
void probe_path_readable(const ProfileArgs& pa) {
  std::error_code ec;
  if (std::filesystem::exists(probe_path(pa), ec)) MappedFile check(probe_path(pa));
}

// After a profiled request: the report on stdout, JSON and trace files if asked.
void finish_profile(const ProfileArgs& pa, int threads) {
  if (!pa.on) return;
  prof::stop();
  const std::string probe = probe_path(pa);
  const prof::Peaks peaks = prof::load_peaks(probe, threads);
  std::printf("\n%s", prof::report_text(peaks).c_str());
  if (!pa.json.empty()) write_output_file(pa.json, prof::report_json(peaks));
  if (!pa.trace.empty()) {
    write_output_file(pa.trace, prof::trace_json());
    std::fprintf(stderr, "trace written to %s (open it in https://ui.perfetto.dev)\n", pa.trace.c_str());
  }
}

int cmd_run(CommonArgs& a, const std::string& prompt, int n_predict, bool raw, const std::string& system,
            const SamplerOptions& so, const std::string& out_path, const VisionArgs& va, const ProfileArgs& pa) {
  if (prompt.empty()) fail("the prompt is empty (pass -p TEXT)");
  check_output_path(out_path);
  if (va.image.empty() && !va.mmproj.empty()) fail("--mmproj given without --image");
  if (va.image.empty() && va.longest_edge) fail("--vision-longest-edge given without --image");
  const bool hf_dir = !a.model.empty() && std::filesystem::is_directory(a.model);
  if (!va.image.empty() && va.mmproj.empty() && !hf_dir)
    fail("--image needs the vision model: pass --mmproj MMPROJ.gguf (or -m a SmolVLM Hugging Face directory)");
  // read the image first: a bad image fails fast, before any model is loaded
  ImageRGB image;
  ImageLimits limits;
  limits.max_pixels = va.max_pixels;
  check_bf16_vision_applies(a, !va.image.empty(), "--image");
  if (!va.image.empty()) image = load_image(va.image, limits);
  check_output_path(pa.json);
  check_output_path(pa.trace);
  if (pa.on) probe_path_readable(pa);  // a bad --probe fails now, not after the whole request
  HfModel loaded = load_any(a, va.mmproj);
  std::unique_ptr<LlamaModel>& model = loaded.text;
  Sampler sampler(so);
  Session session(*model, session_options(a));
  if (!va.image.empty() && loaded.qwen_vision) {
    if (va.longest_edge) fail("--vision-longest-edge is SmolVLM's; Qwen3-VL takes --vision-max-pixels");
    vision_options(a, *loaded.qwen_vision);
    Qwen3VL vlm(*model, *loaded.qwen_vision);
    if (pa.on) prof::start(!pa.trace.empty());
    Qwen3VLPrompt ip = vlm.build(image, prompt, session.pool(), va.resize_pixels, 0, session.n_ctx());
    if (static_cast<int>(ip.tokens.size()) >= session.n_ctx())
      fail("the image prompt is %zu tokens, longer than the context of %d tokens (raise -c or lower --vision-max-pixels)", ip.tokens.size(),
           session.n_ctx());
    std::string collected;
    const GenerateStats st = generate(session, ip.tokens, n_predict, sampler, [&](const std::string& piece) {
      collected += piece;
      if (out_path.empty()) write_stdout(piece);
    }, nullptr, &ip.embeddings, nullptr, nullptr, &ip.positions);
    if (out_path.empty()) std::fputc('\n', stdout);
    else write_output_file(out_path, collected);
    note_context_full(st);
    std::fprintf(stderr, "\n[image %dx%d -> %dx%d patches, %d image tokens | %s vision | preprocess %.1f ms | vision encode %.1f ms]\n",
                 image.width, image.height, ip.grid_w, ip.grid_h, ip.grid_w * ip.grid_h / 4, loaded.qwen_vision->precision(),
                 ip.preprocess_s * 1e3, ip.encode_s * 1e3);
    std::fprintf(stderr, "[prefill: %d tokens, %.1f ms, %.1f tok/s | decode: %d tokens, %.1f ms, %.1f tok/s]\n", st.prompt_tokens,
                 st.prompt_seconds * 1e3, st.prompt_tps(), st.generated_tokens, st.generate_seconds * 1e3, st.generate_tps());
    finish_profile(pa, session.pool().size());
    return 0;
  }
  if (!va.image.empty()) {
    std::unique_ptr<Idefics3Vision> vision = vision_options(a, std::move(loaded.vision));
    if (!vision) fail("'%s' has no vision tower", a.model.c_str());
    if (va.resize_pixels) fail("--vision-max-pixels is Qwen3-VL's; SmolVLM takes --vision-longest-edge");
    if (va.longest_edge) vision->set_longest_edge(va.longest_edge);
    Idefics3 vlm(*model, *vision);
    VisionTimings tm;
    if (pa.on) prof::start(!pa.trace.empty());
    ImagePrompt ip = vlm.build(image, prompt, session.pool(), &tm);
    if (static_cast<int>(ip.tokens.size()) >= session.n_ctx())
      fail("the image prompt is %zu tokens, longer than the context of %d tokens (raise -c)", ip.tokens.size(), session.n_ctx());
    std::string collected;
    const GenerateStats st = generate(session, ip.tokens, n_predict, sampler, [&](const std::string& piece) {
      collected += piece;
      if (out_path.empty()) write_stdout(piece);  // a lost write stops the generation
    }, nullptr, &ip.embeddings);
    if (out_path.empty()) std::fputc('\n', stdout);
    else write_output_file(out_path, collected);
    note_context_full(st);
    std::fprintf(stderr, "\n[image %dx%d -> %d tiles (%dx%d grid + global) | %s vision | preprocess %.1f ms | vision encode %.1f ms (%.1f ms/tile) | connector %.1f ms]\n",
                 image.width, image.height, ip.tiles, ip.rows, ip.cols, vision->precision(), tm.preprocess_s * 1e3, tm.encode_total() * 1e3,
                 tm.encode_total() * 1e3 / std::max(1, ip.tiles), tm.connector_s * 1e3);
    std::fprintf(stderr, "[prefill: %d tokens, %.1f ms, %.1f tok/s | decode: %d tokens, %.1f ms, %.1f tok/s]\n", st.prompt_tokens,
                 st.prompt_seconds * 1e3, st.prompt_tps(), st.generated_tokens, st.generate_seconds * 1e3, st.generate_tps());
    finish_profile(pa, session.pool().size());
    return 0;
  }
  std::string text = prompt;
  if (!raw) {
    std::vector<ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", prompt});
    text = apply_chat_template(*model, msgs, true);
  }
  std::vector<int32_t> ids = model->tokenizer().encode(text, /*parse_special=*/!raw);
  // a raw prompt gets the BOS the tokenizer adds (Gemma), as llama.cpp does; the chat template has its own
  if (raw && !ids.empty() && model->config().add_bos && model->tokenizer().bos() >= 0 && ids[0] != model->tokenizer().bos())
    ids.insert(ids.begin(), model->tokenizer().bos());
  if (ids.empty()) fail("the prompt is empty after tokenization");
  if (static_cast<int>(ids.size()) >= session.n_ctx())
    fail("the prompt is %zu tokens, longer than the context of %d tokens (raise -c)", ids.size(), session.n_ctx());
  std::string collected;
  if (pa.on) prof::start(!pa.trace.empty());
  const GenerateStats st = generate(session, ids, n_predict, sampler, [&](const std::string& piece) {
    collected += piece;
    if (out_path.empty()) write_stdout(piece);  // a lost write stops the generation
  });
  if (out_path.empty()) std::fputc('\n', stdout);
  else write_output_file(out_path, collected);
  print_stats(st);
  finish_profile(pa, session.pool().size());
  return 0;
}

int cmd_chat(CommonArgs& a, int n_predict, const std::string& system, const SamplerOptions& so) {
  check_bf16_vision_applies(a, false, "an image to `run --image` (chat takes none)");
  auto model = load(a);
  Sampler sampler(so);
  Session session(*model, session_options(a));
  const bool tty = ::isatty(0);
  bool first = true;
  std::string line;
  for (;;) {
    if (tty) std::fputs("> ", stdout), std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    std::string text;
    if (first) {
      std::vector<ChatMessage> msgs;
      if (!system.empty()) msgs.push_back({"system", system});
      msgs.push_back({"user", line});
      text = apply_chat_template(*model, msgs, true);
    } else {
      // the cache already holds the assistant's <|im_end|>; close that line and add the turn
      text = "\n<|im_start|>user\n" + line + "<|im_end|>\n<|im_start|>assistant\n";
    }
    const std::vector<int32_t> ids = model->tokenizer().encode(text, true);
    if (session.n_past() + static_cast<int>(ids.size()) >= session.n_ctx()) {
      std::fprintf(stderr, "tessera: error: the conversation no longer fits in the context of %d tokens\n", session.n_ctx());
      return 1;
    }
    const GenerateStats st = generate(session, ids, n_predict, sampler, [](const std::string& piece) { write_stdout(piece); });
    std::fputc('\n', stdout);
    print_stats(st);
    first = false;
  }
  return 0;
}

// `tessera convert`: models/gguf_convert.h does the work.
int cmd_convert(const std::string& in, const std::string& out, const std::string& type, const std::vector<std::string>& tensor_types) {
  if (in.empty()) fail("pass the input model with -m");
  check_output_path(out);
  const DType to = convert_type_from_name(type);
  std::vector<TensorTypeOverride> overrides;
  for (const std::string& tt : tensor_types) {  // PATTERN=TYPE
    const size_t eq = tt.rfind('=');
    if (eq == std::string::npos || eq == 0) fail("--tensor-type '%s': use PATTERN=TYPE (e.g. ffn_down=q6_k)", tt.c_str());
    try {
      overrides.push_back({tt.substr(0, eq), convert_type_from_name(tt.substr(eq + 1))});
    } catch (const Error&) {
      fail("--tensor-type '%s': unknown type '%s'", tt.c_str(), tt.substr(eq + 1).c_str());
    }
  }
  auto f = GgufFile::open(in);
  convert_gguf(*f, to, out, overrides);
  std::fprintf(stderr, "wrote %s (%zu tensors, matrices as %s)\n", out.c_str(), f->tensors().size(), dtype_name(to));
  return 0;
}

int cmd_tokenize(CommonArgs& a, const std::string& text, bool special) {
  check_bf16_vision_applies(a, false, "an image to `run --image` (tokenize runs no model)");
  auto model = load(a);
  const auto ids = model->tokenizer().encode(text, special);
  for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  guard_standard_descriptors();    // a closed stdout must not become the next file opened
  report_sigbus_in_mapped_files();  // a model file truncated while mapped: one line, exit 1
  CLI::App app{"tessera: on-device inference for small vision-language models"};
  app.require_subcommand(1);
  CommonArgs common;
  SamplerOptions samp;
  std::string prompt, system, out_path, text;
  int n_predict = 256;
  bool raw = false, special = false;

  VisionArgs vision;
  auto add_run_options = [&](CLI::App* sub) {
    add_common(sub, common);
    add_sampling(sub, samp);
    sub->add_option("-p,--prompt", prompt, "the prompt")->required();
    sub->add_option("-n,--n-predict", n_predict, "tokens to generate at most")->check(CLI::Range(0, 1 << 24));
    sub->add_flag("--raw", raw, "pass the prompt as is (no chat template, special-token text not parsed)");
    sub->add_option("--system", system, "system prompt (default: the model's own)");
    sub->add_option("-o,--output", out_path, "write the generated text to this file instead of stdout");
    sub->add_option("--mmproj", vision.mmproj, "vision model (llama.cpp mmproj GGUF) for --image");
    sub->add_option("--image", vision.image, "a PNG or JPEG image to ask about (SmolVLM, Qwen3-VL)");
    sub->add_option("--vision-max-pixels", vision.resize_pixels,
                    "Qwen3-VL: resize the image to at most this many pixels before encoding (the processor's max_pixels; "
                    "fewer image tokens, faster, less detail)")->check(CLI::Range(int64_t{1024}, int64_t{1} << 26));
    sub->add_option("--vision-longest-edge", vision.longest_edge,
                    "SmolVLM: resize the image's longest edge to this before cutting 512 tiles (the processor's size.longest_edge; "
                    "fewer tiles, faster, less detail)")->check(CLI::Range(64, 16384));
    sub->add_option("--image-max-pixels", vision.max_pixels, "refuse larger images (memory budget)")->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  };
  auto* run = app.add_subcommand("run", "generate a reply to one prompt");
  add_run_options(run);
  ProfileArgs pa;
  auto* profile = app.add_subcommand("profile", "run one request and report where the time goes (phases, ops, roofline)");
  add_run_options(profile);
  profile->add_option("--trace", pa.trace, "write a Chrome/Perfetto trace (JSON) of the request");
  profile->add_option("--json", pa.json, "write the report as JSON");
  profile->add_option("--probe", pa.probe, "the probe's saved peaks (default models/probe.json)");

  auto* chat = app.add_subcommand("chat", "interactive chat; the KV cache is kept between turns");
  add_common(chat, common);
  add_sampling(chat, samp);
  chat->add_option("-n,--n-predict", n_predict, "tokens to generate at most per turn")->check(CLI::Range(0, 1 << 24));
  chat->add_option("--system", system, "system prompt (default: the model's own)");

  auto* bench = app.add_subcommand("bench", "standard speed tests (like llama-bench, plus vision): markdown or JSON with a machine fingerprint");
  add_common(bench, common);
  BenchArgs bargs;
  add_bench_options(bench, bargs);
  auto* watch = app.add_subcommand("watch", "ask a standing question of screen frames, reusing work across frames (JSON lines)");
  add_common(watch, common);
  WatchArgs wargs;
  add_watch_options(watch, wargs);
  auto* serve = app.add_subcommand("serve", "an OpenAI-compatible HTTP server (/v1/chat/completions, streaming, /metrics)");
  add_common(serve, common);
  ServeArgs serve_args;
  add_serve_options(serve, serve_args);
  auto* sustained = app.add_subcommand("sustained", "run one workload for minutes: throughput and latency per time window");
  add_common(sustained, common);
  SustainedArgs sargs;
  add_sustained_options(sustained, sargs);

  auto* eval = app.add_subcommand("eval", "perplexity over a text, and KL divergence from a reference model (as llama-perplexity)");
  add_common(eval, common);
  EvalArgs eargs;
  add_eval_options(eval, eargs);

  auto* plan = app.add_subcommand("plan", "predict memory and time per phase for a model, screen and device; list the options that fit");
  add_common(plan, common);
  PlanArgs pargs;
  add_plan_options(plan, pargs);

  auto* quantize = app.add_subcommand("quantize", "mixed precision: per-tensor types searched for a KL-divergence or size budget, "
                                                   "from sensitivities measured on a calibration text");
  add_common(quantize, common);
  QuantizeArgs qargs;
  add_quantize_options(quantize, qargs);

  auto* tokenize = app.add_subcommand("tokenize", "print the token ids of a text");
  add_common(tokenize, common);
  tokenize->add_option("-p,--prompt", text, "text")->required();
  tokenize->add_flag("--special", special, "parse special-token text such as <|im_start|>");

  auto* convert = app.add_subcommand("convert", "rewrite a GGUF with its weights in another type (float or quantized)");
  std::string conv_in, conv_type = "f32";
  convert->add_option("-m,--model", conv_in, "input GGUF")->required();
  convert->add_option("-o,--output", out_path, "output GGUF")->required();
  convert->add_option("--type", conv_type, "f32 (exact), f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q3_k, q4_k, q5_k or q6_k "
                    "(K types: rows not a multiple of 256 take llama-quantize's fallback, q4_0 / q5_0 / q5_1 / q8_0)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q3_k", "q4_k", "q5_k", "q6_k"}));
  std::vector<std::string> tensor_types;
  convert->add_option("--tensor-type", tensor_types,
                      "PATTERN=TYPE: tensors whose name matches the regular expression take TYPE (as llama-quantize's; the first match wins)");

  auto* init = app.add_subcommand("vlm-init", "make a SmolVLM-shaped text GGUF + random-vision mmproj from a SmolLM2 GGUF");
  VlmInitOptions vi;
  init->add_option("-m,--model", vi.text_in, "SmolLM2 text GGUF (default: the bundled model)");
  init->add_option("--out-text", vi.text_out, "output text GGUF")->required();
  init->add_option("--out-mmproj", vi.mmproj_out, "output mmproj GGUF")->required();
  init->add_option("--seed", vi.seed, "random seed");
  init->add_option("--vision-hidden", vi.hidden, "encoder width")->check(CLI::Range(16, 4096));
  init->add_option("--vision-layers", vi.layers, "encoder layers")->check(CLI::Range(1, 64));
  init->add_option("--vision-heads", vi.heads, "attention heads")->check(CLI::Range(1, 64));
  init->add_option("--vision-ff", vi.ff, "MLP width")->check(CLI::Range(16, 16384));

  auto* probe = app.add_subcommand("probe", "measure this machine's compute and bandwidth peaks");
  ProbeOptions po;
  std::string probe_out;
  probe->add_option("-t,--threads", po.threads, "threads for the all-core figures (default: all cores)")->check(CLI::Range(1, 1024));
  probe->add_option("-r,--repetitions", po.repetitions, "timed runs per figure (median reported)")->check(CLI::Range(1, 100));
  probe->add_option("-o,--output", probe_out, "write the results as JSON (default: models/probe.json; with --read-bytes, only when given)");
  probe->add_option("--read-bytes", po.read_bytes,
                    "only the read rates, plus read_set: reading this many bytes in all, split across the threads (a decode's bytes per token)")
      ->check(CLI::Range(int64_t{1} << 16, int64_t{64} << 30));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    std::fprintf(stderr, "tessera: error: %s (see tessera --help)\n", msg.c_str());
    return 2;
  }
  // every command's exit status covers its standard output: a write lost to a full disk or a
  // closed descriptor is an error (flush_stdout), not exit 0
  auto dispatch = [&]() -> int {
    apply_isa_cap(common);
    if (*run) return cmd_run(common, prompt, n_predict, raw, system, samp, out_path, vision, ProfileArgs{});
    if (*profile) {
      pa.on = true;
      return cmd_run(common, prompt, n_predict, raw, system, samp, out_path, vision, pa);
    }
    if (*chat) return cmd_chat(common, n_predict, system, samp);
    if (*bench) return cmd_bench(common, bargs);
    if (*sustained) return cmd_sustained(common, sargs);
    if (*watch) return cmd_watch(common, wargs);
    if (*serve) return cmd_serve(common, serve_args);
    if (*tokenize) return cmd_tokenize(common, text, special);
    if (*eval) return cmd_eval(common, eargs, eval->count("-c") ? common.ctx : 512);
    if (*plan) return cmd_plan(common, pargs);
    if (*quantize) return cmd_quantize(common, qargs, quantize->count("-c") ? common.ctx : 512);
    if (*convert) return cmd_convert(conv_in, out_path, conv_type, tensor_types);
    if (*probe) {
      // a read-only run does not replace the saved peaks the profiler reads
      const std::string path = !probe_out.empty() ? probe_out : po.read_bytes > 0 ? "" : std::string(TESSERA_SOURCE_DIR) + "/models/probe.json";
      if (!path.empty()) check_output_path(path);
      if (po.threads > 0) po.threads = cap_threads(po.threads);
      const auto res = run_probe(po);
      std::printf("| measure | threads | median | unit | min | max |\n|---|---|---|---|---|---|\n");
      for (const auto& r : res) {
        const auto [mn, mx] = std::minmax_element(r.samples.begin(), r.samples.end());
        std::printf("| %s | %d | %.1f | %s | %.1f | %.1f |\n", r.name.c_str(), r.threads, r.value, r.unit.c_str(), *mn, *mx);
      }
      for (const std::string& w : probe_contended(res)) std::fprintf(stderr, "probe: warning: %s\n", w.c_str());
      if (path.empty()) return 0;
      write_output_file(path, probe_to_json(res));
      std::fprintf(stderr, "saved %s\n", path.c_str());
      return 0;
    }
    if (*init) {
      if (vi.text_in.empty()) vi.text_in = default_model_path();
      vlm_init(vi);
      return 0;
    }
    return 0;
  };
  try {
    const int rc = dispatch();
    flush_stdout();
    return rc;
  } catch (const Error& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tessera: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 1;
  }
}
