// Qwen3-VL end to end: preprocess an image at its own resolution, encode it (vision.h), and lay
// out the user turn as transformers' processor and chat template do --
// "<|im_start|>user\n<|vision_start|>" + one <|image_pad|> per merged token + "<|vision_end|>" +
// question + "<|im_end|>\n<|im_start|>assistant\n" -- with the image features in the pad slots and
// every token's multimodal rotary position (transformers' get_rope_index).
#pragma once
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "image/image.h"
#include "models/llama/llama.h"
#include "models/qwen3vl/vision.h"

namespace tessera {

struct Qwen3VLPrompt {
  std::vector<int32_t> tokens;       // kEmbeddingSlot for each image token
  std::vector<float> embeddings;     // slots x text n_embd_inp() (the feature, then DeepStack rows)
  std::vector<MropePos> positions;   // one per token
  int grid_h = 0, grid_w = 0;        // patch grid of the image
  double preprocess_s = 0, encode_s = 0;
};

// Positions of a prompt whose image slots form one grid of rows x cols merged tokens, starting at
// rotary position `start`: text counts on by one; the image's tokens are (s, s + row, s + col)
// for s the position after the text before them, and the text after the image continues at
// s + max(rows, cols).
std::vector<MropePos> qwen3vl_positions(const std::vector<int32_t>& tokens, int rows, int cols, int32_t start);

class Qwen3VL {
 public:
  // Checks that the vision tower fits the text model (widths, DeepStack depth, multimodal
  // rotary sections, the vision tokens in the vocabulary).
  Qwen3VL(const LlamaModel& text, const Qwen3VLVision& vision);

  // The user turn for one image and a question; `max_pixels` (0: the processor's) bounds the
  // resized image, and with it the number of image tokens.
  // The image tokens an image becomes at `max_pixels` (0: the processor's), before any work.
  int64_t image_tokens(const ImageRGB& image, int64_t max_pixels = 0) const;
  // `max_prompt_tokens` (0: no limit): fail before any work when the prompt would be longer (a
  // one-line error naming the knobs), not after encoding an image that cannot fit.
  // `history`: earlier turns, already rendered by the chat template ("<|im_start|>role\n...<|im_end|>\n"
  // each), placed before the image turn.
  Qwen3VLPrompt build(const ImageRGB& image, const std::string& question, ThreadPool& pool, int64_t max_pixels = 0,
                      int32_t start_position = 0, int max_prompt_tokens = 0, const std::string& history = "") const;

  // build()'s parts, for callers that encode on their own (the watcher):
  // the processor's settings at `max_pixels` (0: the processor's own);
  Qwen3VLPreprocessConfig preprocess_config(int64_t max_pixels = 0) const;
  // the early refusal of an image whose prompt would not fit `max_prompt_tokens` (0: no limit);
  void check_fits(const ImageRGB& image, int64_t max_pixels, int max_prompt_tokens) const;
  // the tokens and positions of the turn for an image of grid_h x grid_w patches (no embeddings).
  Qwen3VLPrompt layout(const std::string& question, int grid_h, int grid_w, int32_t start_position = 0,
                       const std::string& history = "") const;

 private:
  const LlamaModel& text_;
  const Qwen3VLVision& vision_;
};

}  // namespace tessera
