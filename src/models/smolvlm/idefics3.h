// SmolVLM (Idefics3) end to end: preprocess an image, encode its tiles, and lay out the prompt
// with <fake_token_around_image>, <row_i_col_j>, <global-img> and the image embeddings spliced
// in where Hugging Face's processor puts <image> tokens, in SmolVLM's chat format.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "image/image.h"
#include "models/llama/llama.h"
#include "models/smolvlm/siglip.h"
#include "core/thread_pool.h"

namespace tessera {

struct VisionTimings {
  double preprocess_s = 0, connector_s = 0;
  std::vector<double> tile_encode_s;  // per tile, global image last
  double encode_total() const {
    double t = 0;
    for (double x : tile_encode_s) t += x;
    return t;
  }
};

struct ImagePrompt {
  std::vector<int32_t> tokens;  // kEmbeddingSlot where an image embedding goes
  std::vector<float> embeddings;  // slots x n_embd, in slot order
  int rows = 0, cols = 0, tiles = 0;
};

class Idefics3 {
 public:
  // Checks that the vision tower fits the text model (width, image tokens in the vocabulary).
  Idefics3(const LlamaModel& text, const Idefics3Vision& vision);

  // The text of the image block for a grid (the processor's _prompt_split_image) with "<image>"
  // standing for each embedding position.
  static std::string image_block_text(int rows, int cols, int tokens_per_tile);
  // SmolVLM's user turn around the image block:
  // "<|im_start|>User:<image block>QUESTION<end_of_utterance>\nAssistant:" (build and watch).
  // `history`: earlier turns (history_text) between "<|im_start|>" and the user's turn.
  std::string prompt_text(int rows, int cols, const std::string& question, const std::string& history = "") const;
  // Earlier turns as SmolVLM's chat template writes them: "Role: text<end_of_utterance>\n" each,
  // the role capitalized ("System", "User", "Assistant").
  static std::string history_text(const std::vector<std::pair<std::string, std::string>>& turns);

  // Preprocesses, encodes every tile and builds the user turn
  // "<|im_start|>User:<image block>QUESTION<end_of_utterance>\nAssistant:".
  ImagePrompt build(const ImageRGB& image, const std::string& question, ThreadPool& pool, VisionTimings* timings,
                    const std::string& history = "") const;

  // Encoder + connector output of every preprocessed tile (tiles x tokens_per_tile x n_embd).
  std::vector<float> encode(const PreprocessedImage& pre, ThreadPool& pool, VisionTimings* timings) const;

  // Tokenizes text containing "<image>" placeholders into tokens with embedding slots.
  std::vector<int32_t> tokenize_with_slots(const std::string& text) const;

 private:
  const LlamaModel& text_;
  const Idefics3Vision& vision_;
};

}  // namespace tessera
