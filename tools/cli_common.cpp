#include "cli_common.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/output_file.h"
#include "kernels/bf16_tiles.h"
#include "kernels/f16_tiles.h"
#include "kernels/kernels.h"

namespace tessera::cli {

std::string default_model_path() {
  if (const char* e = std::getenv("TESSERA_MODEL")) return e;
  const std::string rel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (std::filesystem::exists(rel)) return rel;
  return std::string(TESSERA_SOURCE_DIR) + "/" + rel;
}

void add_common(CLI::App* app, CommonArgs& a) {
  app->add_option("-m,--model", a.model, "GGUF model file (default: the bundled SmolLM2-135M-Instruct Q4_1)");
  app->add_option("-t,--threads", a.threads, "threads (default: all cores)")->check(CLI::Range(1, 1024));
  app->add_option("-c,--ctx-size", a.ctx, "context size in tokens")->check(CLI::Range(1, 1 << 24));
  app->add_option("-b,--batch-size", a.batch, "tokens per forward pass")->check(CLI::Range(1, 8192));
  app->add_option("--cache-type", a.cache_type, "KV cache element type: f16 (default), f32, bf16, q8 (int8 + a scale per row) or q4 (alias q4_0: "
                  "llama.cpp's q4_0 blocks, 4 bits + an fp16 scale per 32, after its Walsh-Hadamard rotation; head dim a multiple of 32)")
      ->check(CLI::IsMember(kv_type_choices()));
  app->add_flag("--no-kv-rotation", a.no_kv_rotation,
                "q4 KV cache without llama.cpp's Walsh-Hadamard rotation of q/k/v (as LLAMA_ATTN_ROT_DISABLE=1)");
  app->add_flag("--q8-activations", a.q8_act,
                "8-bit activations (per 32, as llama.cpp's CPU backend) in a quantized mmproj's layers on any CPU, and "
                "with --bf16-vision, --f16-vision or --fp32-vision; the default for the text model's quantized matrices, "
                "and for a quantized mmproj's where they are the fast path (AVX-512 VNNI without AMX)");
  app->add_flag("--f32-activations", a.f32_act,
                "quantized matrices on float activations instead of the default 8-bit ones (llama.cpp's W4A8 numerics): the "
                "text model's in fp32 (closer to float64, slower), a quantized mmproj's on the vision path's own precision "
                "(unless --q8-activations is given too)");
  app->add_flag("--q8-vision", a.q8_vision,
                "every vision linear layer but the patch embedding on 8-bit activations (as --q8-activations), a float "
                "(f16) mmproj's weights quantized to Q8_0 at load first: the bytes `tessera convert --type q8_0` writes, "
                "so the same results as that file; the attention keeps the float path. The default for a float mmproj "
                "where it is faster than bf16 (AVX-512 VNNI with fast bf16, no AMX: AMD Zen 4); --f32-activations or a "
                "named --bf16/--f16/--fp32-vision keeps the float weights");
  auto* bf16 = app->add_flag("--bf16-vision", a.bf16_vision,
                             "vision encoder matmuls and attention in bf16 (inputs rounded to bf16, fp32 sums; needs AMX bf16 or "
                             "AVX512_BF16; the default where they are fast: AMX, AMD Zen 4 and later)");
  auto* f16 = app->add_flag("--f16-vision", a.f16_vision,
                            "vision encoder matmuls in fp16 (inputs rounded to fp16, fp16 sums over 128 k, fp32 across them; "
                            "needs AVX512-FP16; the default where bf16 is not fast: Intel without AMX)")
                   ->excludes(bf16);
  app->add_flag("--fp32-vision", a.fp32_vision,
                "vision encoder in fp32 (the reference numerics) where bf16 or fp16 would be the default")
      ->excludes(bf16)
      ->excludes(f16);
  app->add_option("--isa", a.isa, "cap the kernel instruction set: scalar, neon, avx2, avx512, avx512vnni or amx")
      ->check(CLI::IsMember({"scalar", "neon", "avx2", "avx512", "avx512vnni", "amx"}));
}

void apply_isa_cap(const CommonArgs& a) {
  if (!a.isa.empty()) set_isa_cap(isa_from_name(a.isa, "--isa"));
}

HfModel load_any(CommonArgs& a, const std::string& mmproj) {
  if (a.model.empty()) {
    a.model = default_model_path();
    if (!std::filesystem::exists(a.model))
      fail("default model not found at '%s': run scripts/setup.sh (or pass -m MODEL.gguf)", a.model.c_str());
  }
  return open_model(a.model, mmproj, vision_q8_0_at_load(a));
}

bool vision_q8_0_at_load(const CommonArgs& a) {
  // a float mmproj quantized to Q8_0 at load, where that beats the bf16 path it would take (Zen 4;
  // with AVX512-FP16 the fp16 path stays: as fast, a tenth of its error; docs/numerics.md)
  const bool named = a.bf16_vision || a.f16_vision || a.fp32_vision;
  return a.q8_vision || (!a.f32_act && !named && q8_vision_fast() && bf16_gemm_fast());
}

std::unique_ptr<LlamaModel> load(CommonArgs& a) { return std::move(load_any(a).text); }

int cap_threads(int requested) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (requested <= cores) return requested;
  static bool warned = false;
  if (!std::exchange(warned, true))
    std::fprintf(stderr, "tessera: warning: -t %d is more threads than the %d cores here; using %d\n", requested, cores, cores);
  return cores;
}

SessionOptions session_options(const CommonArgs& a) {
  SessionOptions o;
  o.n_ctx = a.ctx;
  o.n_batch = a.batch;
  o.n_threads = cap_threads(a.threads);
  o.kv_type = kv_type_from_name(a.cache_type);
  o.q8_activations = !a.f32_act;
  o.kv_rotation = !a.no_kv_rotation;
  return o;
}

void check_bf16_vision_applies(const CommonArgs& a, bool runs_vision, const char* what_runs_it) {
  if (a.bf16_vision && !runs_vision) fail("--bf16-vision applies to the vision encoder: give %s", what_runs_it);
  if (a.f16_vision && !runs_vision) fail("--f16-vision applies to the vision encoder: give %s", what_runs_it);
  if (a.fp32_vision && !runs_vision) fail("--fp32-vision applies to the vision encoder: give %s", what_runs_it);
  if (a.q8_vision && !runs_vision) fail("--q8-vision applies to the vision encoder: give %s", what_runs_it);
}

VisionPrecision vision_precision(const CommonArgs& a) {
  if (a.bf16_vision) return VisionPrecision::Bf16;
  if (a.f16_vision) return VisionPrecision::F16;
  if (a.fp32_vision) return VisionPrecision::Fp32;
  // by default the fastest 16-bit path this CPU has (kernels/bf16_tiles.h, kernels/f16_tiles.h;
  // their quality cost: docs/numerics.md), else fp32
  if (bf16_gemm_fast()) return VisionPrecision::Bf16;
  if (f16_gemm_fast()) return VisionPrecision::F16;
  return VisionPrecision::Fp32;
}

std::unique_ptr<Idefics3Vision> vision_options(const CommonArgs& a, std::unique_ptr<Idefics3Vision> v) {
  if (!v) return v;
  // 8-bit activations in a quantized mmproj's layers: asked for, or by default where they are the
  // fast path and no vision precision was named (their quality cost: docs/numerics.md)
  const bool named = a.bf16_vision || a.f16_vision || a.fp32_vision;
  if (a.q8_vision || a.q8_act || (!a.f32_act && !named && q8_vision_fast())) v->use_q8_activations();
  // a float mmproj's layers on Q8_0: done at load where the tower came from load_any (no pool to
  // start then), else here
  if (vision_q8_0_at_load(a) && v->quantized_at_load() == 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    ThreadPool pool(a.threads > 0 ? cap_threads(a.threads) : cores);
    v->quantize_to_q8_0(pool);
  }
  const VisionPrecision p = vision_precision(a);
  if (p == VisionPrecision::Bf16) v->use_bf16_gemm();
  if (p == VisionPrecision::F16) v->use_f16_gemm();
  return v;
}

void vision_options(const CommonArgs& a, Qwen3VLVision& v) {
  if (a.q8_vision) fail("--q8-vision: Qwen3-VL's vision tower has no 8-bit path (SmolVLM's has)");
  const VisionPrecision p = vision_precision(a);
  if (p == VisionPrecision::Bf16) v.use_bf16_gemm();
  if (p == VisionPrecision::F16) v.use_f16_gemm();
}

namespace {

// A real-number range whose ends may be open, checked and described exactly as the sampler
// checks it at run time (CLI::Range only knows closed ranges).
CLI::Validator real_range(double lo, bool lo_closed, double hi, bool hi_closed) {
  const std::string desc = format("FLOAT in %c%g, %g%c", lo_closed ? '[' : '(', lo, hi, hi_closed ? ']' : ')');
  return CLI::Validator(
      [=](std::string& in) -> std::string {
        double v;
        const char* end = in.data() + in.size();
        const auto r = std::from_chars(in.data(), end, v);
        const bool ok = r.ec == std::errc() && r.ptr == end && (lo_closed ? v >= lo : v > lo) && (hi_closed ? v <= hi : v < hi);
        return ok ? std::string() : "value " + in + " is not in " + desc.substr(9);
      },
      desc);
}

// A 64-bit seed: any whole number in [0, 2^64 - 1]; anything else (negative, too large, not a
// number) is refused rather than wrapped or clamped.
CLI::Validator seed_range() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        uint64_t v;
        const char* end = in.data() + in.size();
        const auto r = std::from_chars(in.data(), end, v);
        return r.ec == std::errc() && r.ptr == end ? std::string() : "seed " + in + " is not a whole number in [0, 18446744073709551615]";
      },
      "UINT64");
}

}  // namespace

void add_sampling(CLI::App* app, SamplerOptions& s) {
  app->add_option("--temp", s.temperature, "temperature (0: greedy)")->check(real_range(0.0, true, 100.0, true));
  app->add_option("--top-k", s.top_k, "top-k (0: off)")->check(CLI::Range(0, 1 << 24));
  app->add_option("--top-p", s.top_p, "top-p (1: off)")->check(real_range(0.0, false, 1.0, true));
  app->add_option("--min-p", s.min_p, "min-p (0: off)")->check(real_range(0.0, true, 1.0, false));
  app->add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty (1: off)")->check(real_range(0.0, false, 100.0, true));
  app->add_option("--repeat-last-n", s.repeat_last_n, "tokens the penalty looks back over")->check(CLI::Range(0, 1 << 20));
  app->add_option("-s,--seed", s.seed, "random seed")->check(seed_range());
}

void print_stats(const GenerateStats& st) {
  note_context_full(st);
  std::fprintf(stderr, "\n[prompt: %d tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s]\n",
               st.prompt_tokens, st.prompt_tps(), st.generated_tokens, st.generate_tps());
}

void note_context_full(const GenerateStats& st) {
  if (st.stopped_by_context)
    std::fprintf(stderr, "\nnote: stopped after %d generated tokens: the context is full (raise -c)\n", st.generated_tokens);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now_seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string json_escape(const std::string& s) {
  std::string o;
  char buf[8];
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o;
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail("cannot read the text '%s' (not a regular file)", path.c_str());
  if (std::filesystem::file_size(path, ec) > (size_t{256} << 20)) fail("the text '%s' is over 256 MiB", path.c_str());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read the text '%s'", path.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) fail("the text '%s' is empty", path.c_str());
  return ss.str();
}

}  // namespace tessera::cli
