// The server's model and session: one request at a time, the KV cache kept between requests so a
// prompt that starts like the previous one (the same system prompt and history) reuses those
// positions, as llama-server's prompt cache does.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <cstddef>
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

// The process's resident size now (/proc/self/statm).
size_t resident_bytes();

struct EngineMemory {
  size_t screen_cache_bytes = size_t{64} << 20;  // the screen's tile cache at most
  size_t budget_bytes = 0;                       // --mem-budget (0: none)
  size_t weight_bytes = 0;                       // the model files, resident once read
  int screen_width = 1920, screen_height = 1080; // the frames the visual memory will hold
  int64_t vision_max_pixels = 0;                 // Qwen3-VL: images and frames resized to at most this (0: the processor's)
};

// Where the memory of a server goes, estimated at start from the shapes (bytes). Under a
// budget, the tile cache gets what the rest leaves, a request image that cannot fit is refused,
// and the resident size is checked while the server runs (the cache gives way when it is over).
struct MemoryPlan {
  size_t budget = 0;    // 0: no budget
  size_t process = 0;   // resident at start: code, libraries, heap, the session's buffers
  size_t weights = 0;   // model files (mapped; read as they are used)
  size_t kv = 0;        // the KV cache for the whole context (its pages fill as positions do)
  size_t vision = 0;    // a tile encode's buffers
  size_t frames = 0;    // screen frames: the newest, the one being encoded, its tiles, embeddings
  size_t prefix = 0;    // the saved K/V of the screen prompt's prefix
  size_t cache = 0;     // the tile cache's share
  size_t fixed() const { return process + weights + kv + vision + frames + prefix; }
  std::string describe() const;  // "weights 190 MB + KV cache 90 MB + ..."
};

class Engine {
 public:
  // With a vision tower, the engine keeps a visual memory of the live screen that
  // {"type": "screen"} parts read. Throws Error when memory.budget_bytes cannot hold the
  // model, its KV cache and buffers.
  Engine(HfModel model, const SessionOptions& options, std::string model_id, ImageLimits image_limits,
         const EngineMemory& memory = {});
  const MemoryPlan& memory_plan() const { return plan_; }
  // Under a budget: makes room for a request image's work (the tile cache gives way) or throws
  // ApiError 413 when even an empty cache leaves too little. Worker thread.
  void admit_image(const ImageRGB& image);
  // What the decoded images of waiting requests may hold at once: under a budget, half of what
  // the plan leaves beyond its fixed part and the smallest tile cache; else no limit.
  size_t held_image_room() const;
  // Under a budget: when the process is resident beyond it, shrinks the tile cache by the excess.
  // Returns whether it is still over (background work then waits). Worker thread.
  bool over_budget();
  const std::string& model_id() const { return model_id_; }
  bool has_vision() const { return model_.vision != nullptr || model_.qwen_vision != nullptr; }
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
    std::vector<MropePos> positions;  // Qwen3-VL image prompts: every token's rotary position
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
  int64_t qwen_max_pixels_ = 0;
  // A screen question's prompt for the visual memory's encoding (tokens with image slots; the
  // rotary positions for Qwen3-VL).
  void screen_prompt(const VisualMemory::Snapshot& snap, const std::string& question, const std::string& history,
                     std::vector<int32_t>& tokens, std::vector<MropePos>& positions) const;
  std::unique_ptr<VisualMemory> memory_;
  // the memory encoding whose embeddings fill cached_'s image slots (0: none); a screen prompt
  // of the same encoding may reuse cached positions through its slots
  uint64_t cached_screen_seq_ = 0;
  uint64_t prefix_tried_seq_ = 0;  // the encoding whose prefix the background last evaluated
  MemoryPlan plan_;
  // The screen prompt's prefix as the background evaluated it, K/V saved: a screen question after
  // other requests overwrote those positions restores them instead of prefilling them again.
  void save_screen_prefix(const std::vector<int32_t>& prefix, uint64_t seq);
  std::vector<int32_t> prefix_tokens_;
  std::vector<uint8_t> prefix_kv_;
  uint64_t prefix_seq_ = 0;
};

}  // namespace tessera::serve
