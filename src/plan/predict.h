// `tessera plan`'s model of the engine: memory and time per phase for one model, one screen
// setting and one device, from the model's shapes and the device's kernel rates. Every term
// follows what the engine does (docs/plan.md lists them): the text model's matrices streamed
// once per decoded token and multiplied once per prefill chunk, attention over the cache, the
// vision encoder per 512 tile (SmolVLM) or per image (Qwen3-VL, whose attention spans the whole
// image), each kernel call's fixed cost, and the buffers each part allocates.
#pragma once
#include <string>
#include <vector>

#include "plan/device.h"
#include "plan/model_spec.h"

namespace tessera::plan {

struct Scenario {
  int screen_w = 1920, screen_h = 1080;
  int longest_edge = 0;      // SmolVLM: the processor's size.longest_edge (0: the model's own)
  int64_t max_pixels = 0;    // Qwen3-VL: the processor's max_pixels (0: the model's own)
  int n_ctx = 4096;
  DType kv_type = DType::F16;
  bool q8_activations = true;  // the text model's quantized matrices on 8-bit activations (the engine's default)
  int n_batch = 512;         // tokens per forward pass
  int question_tokens = 24;  // the question's text around the image (chat template included)
  int answer_tokens = 32;
  double cadence_s = 2.0;    // seconds between screen frames
  double frames_changing = 0.5;  // share of frames that differ from the one before
  double tiles_changing = 0.15;  // share of a SmolVLM grid's tiles a changing frame touches
};

struct Prediction {
  // geometry
  int tiles = 0;            // SmolVLM: encoder passes (grid + global); Qwen3-VL: 1
  int64_t patches = 0;      // Qwen3-VL: patches of the resized image
  int image_tokens = 0, prompt_tokens = 0;
  bool vision_q8 = false;   // SmolVLM: a quantized mmproj's matrices on 8-bit activations (DeviceProfile::vision_q8)
  DType vision_q8_type = DType::F32;  // their type then: the mmproj's, or Q8_0 for a float one quantized at load
  // memory, bytes
  double weights = 0, vision_weights = 0;
  double kv_full = 0;       // the cache at n_ctx (what must be reserved)
  double kv_question = 0;   // the cache a question's prompt and answer touch
  double activations = 0, vision_buffers = 0, frames = 0, process = 0;
  double screen_cache = 0;  // watching: one screen's encoded tiles or features, and its saved prompt prefix
  double peak_question = 0;  // resident after one image question (tessera run --image)
  double reserved = 0;       // with the cache full and a screen watched: what to budget
  // time, milliseconds
  double preprocess_ms = 0, vision_ms = 0, vision_per_tile_ms = 0;
  double prefill_ms = 0;             // the whole image prompt
  double prefill_question_ms = 0;    // the question alone after a cached screen prefix
  double decode_ms_per_token = 0;    // at the question's depth
  double ttft_cold_ms = 0;           // preprocess + vision + prefill + first token
  double ttft_watched_ms = 0;        // the screen already encoded and its prefix cached
  double answer_ms = 0;              // ttft_cold + the rest of the answer
  // watching: CPU time per second of screen, and the share of the device's cores it takes
  double watch_ms_per_frame = 0, watch_cpu_share = 0;
};

Prediction predict(const ModelSpec& m, const Scenario& s, const DeviceProfile& d);
// The text matrices as the session computes with them: a type the 8-bit kernels take as stored
// (Q3_K, IQ4_NL) stays so on 8-bit activations, with no held copy (models/tensor_source.h, Form::Stored).
ModelSpec as_computed(const ModelSpec& m, bool q8_activations);

// The text model alone: prefill of n tokens after `depth` cached ones, and one decoded token at
// position `pos` (the building blocks, exposed for tests).
// `q8`: on the 8-bit-activation rates where the profile has them (else the fp32 ones).
double prefill_ms(const ModelSpec& m, const DeviceProfile& d, int n, int depth, int n_batch, bool q8 = true);
double decode_ms(const ModelSpec& m, const DeviceProfile& d, int pos, DType kv_type, bool q8 = true);

}  // namespace tessera::plan
