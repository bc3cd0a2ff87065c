// Pieces every `tessera` subcommand shares: model loading from the common flags, session
// options, sampling flags, and output files written atomically.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "core/output_file.h"
#include "models/hf_loader.h"
#include "models/open_model.h"
#include "models/llama/llama.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace tessera::cli {

std::string default_model_path();

struct CommonArgs {
  std::string model;
  int threads = 0;
  int ctx = 4096;
  int batch = 512;
  std::string isa;
  std::string cache_type = "f16";
  bool q8_act = false;   // --q8-activations: 8-bit activations in a quantized mmproj's layers on any CPU
  bool f32_act = false;  // --f32-activations: quantized matrices (text, mmproj) on float activations
  bool no_kv_rotation = false;
  bool bf16_vision = false;   // --bf16-vision: the bf16 vision path, failing where there is none
  bool f16_vision = false;    // --f16-vision: the fp16 vision GEMMs, failing where there are none
  bool fp32_vision = false;   // --fp32-vision: the fp32 vision path even where bf16 or fp16 is the default
  bool q8_vision = false;     // --q8-vision: every vision linear layer on 8-bit activations, a float mmproj quantized to Q8_0 at load
};

void add_common(CLI::App* app, CommonArgs& a);
// --isa: caps the kernels' instruction set for the whole process (called once, after parsing).
void apply_isa_cap(const CommonArgs& a);
// -m FILE.gguf, or -m DIR for a Hugging Face directory (which may hold a vision tower too), with
// an optional mmproj (models/open_model.h); the default model when -m is absent.
HfModel load_any(CommonArgs& a, const std::string& mmproj = "");
// Whether the flags (or this CPU's default) put a float mmproj's layers on Q8_0 (--q8-vision): then
// the tower is loaded so (Idefics3Vision::load_mmproj's q8_0), never holding the float panels.
bool vision_q8_0_at_load(const CommonArgs& a);
std::unique_ptr<LlamaModel> load(CommonArgs& a);
SessionOptions session_options(const CommonArgs& a);
// -t above the machine's core count runs no faster and spins: warn once and use the cores.
int cap_threads(int requested);
// The vision tower as the common flags ask for it (--q8-activations: 8-bit activations on a
// quantized mmproj's layers, which the text model has by default; --q8-vision: a float mmproj's
// too, quantized to Q8_0 at load; each by default where it is the fast path); null stays null.
std::unique_ptr<Idefics3Vision> vision_options(const CommonArgs& a, std::unique_ptr<Idefics3Vision> v);
// The same policy for Qwen3-VL's tower (no 8-bit-activation path there yet).
void vision_options(const CommonArgs& a, Qwen3VLVision& v);
// --bf16-vision where this command runs no vision encoder is an error, not a silent no-op.
// The vision encoder's arithmetic: the flag given, else the fastest this CPU has.
enum class VisionPrecision { Fp32, Bf16, F16 };
VisionPrecision vision_precision(const CommonArgs& a);
void check_bf16_vision_applies(const CommonArgs& a, bool runs_vision, const char* what_runs_it);
void add_sampling(CLI::App* app, SamplerOptions& s);
void print_stats(const GenerateStats& st);  // with note_context_full
// A note on stderr when generation stopped short of -n because the context filled up.
void note_context_full(const GenerateStats& st);
double median(std::vector<double> v);
// The text as the inside of a JSON string (quotes, backslashes and control characters escaped).
std::string json_escape(const std::string& s);
// A text to score (eval, quantize's calibration): a regular file, not empty, at most 256 MiB.
std::string read_text_file(const std::string& path);
double now_seconds();  // steady clock
double cpu_seconds();  // user + system time of this process

}  // namespace tessera::cli
