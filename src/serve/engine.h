// The server's model and session: one request at a time, the KV cache kept between requests so a
// prompt that starts like the previous one (the same system prompt and history) reuses those
// positions, as llama-server's prompt cache does.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "image/image.h"
#include "models/hf_loader.h"
#include "runtime/session.h"
#include "serve/chat_request.h"
#include "watch/visual_memory.h"

namespace tessera::serve {

struct Result {
  std::string text;           // the whole reply (also streamed through emit)
  std::string finish_reason;  // "stop" (end of generation or a stop sequence), "length"
  Usage usage;
  bool cancelled = false;     // emit returned false (the client went away) or the deadline passed
  bool deadline_hit = false;
};

class Engine {
 public:
  // With a vision tower, the engine keeps a visual memory of the live screen (screen_cache_bytes
  // for its tile cache) that {"type": "screen"} parts read.
  Engine(HfModel model, const SessionOptions& options, std::string model_id, ImageLimits image_limits,
         size_t screen_cache_bytes = size_t{256} << 20);
  const std::string& model_id() const { return model_id_; }
  bool has_vision() const { return model_.vision != nullptr; }
  int n_ctx() const { return session_.n_ctx(); }
  VisualMemory* memory() { return memory_.get(); }  // null without a vision tower
  ThreadPool& pool() { return session_.pool(); }
  size_t kv_bytes() const { return session_.kv_bytes(); }

  // A request's image decoded under the server's limits; throws ApiError 400 when it is not a
  // readable PNG/JPEG within them, or when the model has no vision tower. Runs on the caller's
  // thread, before the request is queued.
  ImageRGB decode_request_image(const ChatRequest& r) const;

  // A request's prompt: tokens (kEmbeddingSlot where image embeddings go) and the embeddings,
  // with the vision encoder run for an image. Throws ApiError for a prompt longer than the context.
  struct Prepared {
    std::vector<int32_t> prompt;
    std::vector<float> embeddings;
    double vision_ms = 0;
    bool screen = false;           // the visual memory was read
    uint64_t screen_seq = 0;       // ... this encoding of it
    bool screen_current = false;   // ... and was up to date before the question
    double screen_staleness_s = 0;
  };
  Prepared prepare(const ChatRequest& r, const ImageRGB* image);

  // Background work, one step: bring the visual memory toward the newest frame; once it is
  // current, evaluate the screen prompt's prefix (everything before the question) into the KV
  // cache, so a screen question prefills only its own words. False when there is nothing to do.
  // May throw Preempted (the step is done again later; the cache keeps what was completed).
  bool background_step(double debounce_s);

  // Generates the reply. emit receives text as it becomes final (stop sequences held back);
  // returning false cancels the generation, as does passing the deadline.
  using Clock = std::chrono::steady_clock;
  Result complete(const ChatRequest& r, const Prepared& p, const std::function<bool(const std::string&)>& emit,
                  Clock::time_point deadline);

 private:

  HfModel model_;
  Session session_;
  std::string model_id_;
  ImageLimits image_limits_;
  // How many leading tokens of `tokens` the session already holds; image slots count only
  // through_slots (they hold the same encoding's embeddings).
  size_t cached_prefix(const std::vector<int32_t>& tokens, bool through_slots) const;
  std::vector<int32_t> cached_;  // the tokens whose K/V the session holds, in order
  std::unique_ptr<VisualMemory> memory_;
  // the memory encoding whose embeddings fill cached_'s image slots (0: none); a screen prompt
  // of the same encoding may reuse cached positions through its slots
  uint64_t cached_screen_seq_ = 0;
  uint64_t prefix_tried_seq_ = 0;  // the encoding whose prefix the background last evaluated
};

}  // namespace tessera::serve
