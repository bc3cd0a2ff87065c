#include "models/qwen3vl/qwen3vl.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "profile/profiler.h"

namespace tessera {

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

std::vector<MropePos> qwen3vl_positions(const std::vector<int32_t>& tokens, int rows, int cols, int32_t start) {
  std::vector<MropePos> pos(tokens.size());
  int32_t p = start;
  for (size_t i = 0; i < tokens.size();) {
    if (tokens[i] != kEmbeddingSlot) {
      pos[i] = {p, p, p};
      ++p, ++i;
      continue;
    }
    const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    if (i + n > tokens.size()) fail("the prompt has fewer image slots than the %d x %d grid", rows, cols);
    for (size_t k = 0; k < n; ++k) {
      if (tokens[i + k] != kEmbeddingSlot) fail("the prompt's image slots are not one run of %d x %d", rows, cols);
      pos[i + k] = {p, p + static_cast<int32_t>(k / static_cast<size_t>(cols)), p + static_cast<int32_t>(k % static_cast<size_t>(cols))};
    }
    i += n;
    p += std::max(rows, cols);
  }
  return pos;
}

Qwen3VL::Qwen3VL(const LlamaModel& text, const Qwen3VLVision& vision) : text_(text), vision_(vision) {
  const LlamaConfig& t = text.config();
  const Qwen3VLVisionConfig& v = vision.config();
  if (v.out_hidden != t.n_embd)
    fail("the vision projector outputs %d-wide embeddings but the text model is %d wide: they do not belong together", v.out_hidden, t.n_embd);
  if (static_cast<int>(v.deepstack.size()) != t.deepstack_layers)
    fail("the vision encoder has %zu DeepStack levels but the text model takes %d", v.deepstack.size(), t.deepstack_layers);
  if (t.mrope[0] + t.mrope[1] + t.mrope[2] == 0) fail("the text model has no multimodal rotary sections (not a Qwen3-VL text model)");
  for (const char* tok : {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>"})
    if (text.tokenizer().find(tok) < 0) fail("the text model's vocabulary has no %s token", tok);
}

int64_t Qwen3VL::image_tokens(const ImageRGB& image, int64_t max_pixels) const {
  const Qwen3VLPreprocessConfig pc = vision_.preprocess_config().with_max_pixels(max_pixels);
  int h = 0, w = 0;
  qwen3vl_smart_resize(image.height, image.width, pc.factor(), pc.min_pixels, pc.max_pixels, h, w);
  return static_cast<int64_t>(h / pc.factor()) * (w / pc.factor());
}

Qwen3VLPreprocessConfig Qwen3VL::preprocess_config(int64_t max_pixels) const {
  return vision_.preprocess_config().with_max_pixels(max_pixels);
}

void Qwen3VL::check_fits(const ImageRGB& image, int64_t max_pixels, int max_prompt_tokens) const {
  if (max_prompt_tokens <= 0) return;
  const int64_t n_img = image_tokens(image, max_pixels);
  if (n_img + 16 > max_prompt_tokens)
    fail("the %dx%d image needs %lld image tokens at max_pixels %lld, more than the context of %d tokens holds (raise -c or lower --vision-max-pixels)",
         image.width, image.height, static_cast<long long>(n_img), static_cast<long long>(preprocess_config(max_pixels).max_pixels),
         max_prompt_tokens);
}

Qwen3VLPrompt Qwen3VL::layout(const std::string& question, int grid_h, int grid_w, int32_t start_position,
                              const std::string& history) const {
  const int M = vision_.config().merge;
  if (grid_h % M || grid_w % M || grid_h < M || grid_w < M) fail("a %d x %d patch grid does not merge by %d", grid_h, grid_w, M);
  Qwen3VLPrompt out;
  out.grid_h = grid_h;
  out.grid_w = grid_w;
  const Tokenizer& tok = text_.tokenizer();
  const auto add = [&](const std::string& s) {
    const std::vector<int32_t> ids = tok.encode(s, true);
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
  };
  add(history + "<|im_start|>user\n<|vision_start|>");
  out.tokens.insert(out.tokens.end(), static_cast<size_t>(grid_h / M) * static_cast<size_t>(grid_w / M), kEmbeddingSlot);
  add("<|vision_end|>" + question + "<|im_end|>\n<|im_start|>assistant\n");
  out.positions = qwen3vl_positions(out.tokens, grid_h / M, grid_w / M, start_position);
  return out;
}

Qwen3VLPrompt Qwen3VL::build(const ImageRGB& image, const std::string& question, ThreadPool& pool, int64_t max_pixels,
                             int32_t start_position, int max_prompt_tokens, const std::string& history) const {
  check_fits(image, max_pixels, max_prompt_tokens);
  const Qwen3VLPreprocessConfig pc = preprocess_config(max_pixels);
  double t0 = now();
  Qwen3VLPatches patches;
  {
    prof::PhaseScope phase(prof::Phase::Preprocess);
    patches = preprocess_qwen3vl(image, pc, &pool);
  }
  const double preprocess_s = now() - t0;
  t0 = now();
  std::vector<float> embeddings;
  {
    prof::PhaseScope phase(prof::Phase::VisionEncode);
    embeddings.resize(static_cast<size_t>(patches.n_tokens(pc)) * vision_.out_row());
    vision_.encode(patches, embeddings.data(), pool);
  }
  const double encode_s = now() - t0;
  Qwen3VLPrompt out = layout(question, patches.grid_h, patches.grid_w, start_position, history);
  out.embeddings = std::move(embeddings);
  out.preprocess_s = preprocess_s;
  out.encode_s = encode_s;
  return out;
}

}  // namespace tessera
