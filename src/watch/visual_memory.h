// The live screen's visual memory: the newest frame, and the encoder+connector outputs of its
// tiles, brought up to date in small steps (a preprocessing pass, then one tile per step) by
// background work, so a question about the screen finds them ready. Tiles come from a
// content-keyed TileCache first, so a frame that changed in one place costs one tile's encode.
// Qwen3-VL encodes the whole frame at once: one step preprocesses it, the next encodes it (the
// previous features are kept when the preprocessed patches are the same).
// push() may be called from any thread; step() and snapshot() from one worker thread.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/thread_pool.h"
#include "image/image.h"
#include "models/qwen3vl/qwen3vl.h"
#include "models/qwen3vl/vision.h"
#include "models/smolvlm/preprocess.h"
#include "models/smolvlm/siglip.h"
#include "watch/tile_cache.h"

namespace tessera {

class VisualMemory {
 public:
  using Clock = std::chrono::steady_clock;
  VisualMemory(const Idefics3Vision& vision, int n_embd, size_t cache_bytes);
  // Qwen3-VL: frames resized to at most max_pixels (0: the processor's).
  VisualMemory(const Qwen3VLVision& vision, int64_t max_pixels);

  // A new screen frame. One bitwise equal to the newest changes nothing (returns false).
  bool push(ImageRGB frame);

  // Background: one step toward the newest frame's encoding once that frame has been unchanged
  // for debounce_s (the screen settled). False when there was nothing to do. May throw Preempted
  // (core/preempt.h) from inside an encode; the step is then simply done again later.
  bool step(ThreadPool& pool, double debounce_s);

  struct Snapshot {
    int rows = 0, cols = 0, tiles = 0;  // Qwen3-VL: rows x cols patches, one "tile"
    std::vector<float> embeddings;  // tiles x tokens_per_tile x n_embd, global image last (Qwen3-VL: tokens x out_row)
    bool was_current = false;       // ready before the question (no encode in the foreground)
    int tiles_encoded_now = 0;      // encoded for the question itself
    uint64_t seq = 0;               // which encoding: equal seqs, equal embeddings
    double staleness_s = 0;         // how old the memory was when asked (0: current)
  };
  // Foreground: the newest frame's embeddings, finishing now whatever the background has not.
  // Throws Error when no frame has arrived yet.
  Snapshot snapshot(ThreadPool& pool);

  // The sequence number of the current encoding when the memory is current (the newest frame is
  // encoded), else 0. Cheap: no copy.
  uint64_t current_seq() const;

  struct Stats {
    uint64_t frames = 0, frames_unchanged = 0, tiles_encoded = 0, tiles_reused = 0;
    size_t cache_bytes = 0;
    double staleness_s = 0;  // age of the oldest screen change the memory does not reflect (0: current)
    bool has_frame = false, current = false;
  };
  Stats stats() const;

  // The tile cache's budget (worker thread): least recently used tiles go until it fits.
  void set_cache_budget(size_t bytes);
  size_t cache_budget() const;

 private:
  // Encodes (or finds in the cache) tile `next_tile_` of the work in progress.
  void encode_next_tile(ThreadPool& pool);
  bool start_work_locked(std::unique_lock<std::mutex>& lk, ThreadPool& pool);
  void publish_locked();  // the finished work becomes the memory

  void encode_qwen(ThreadPool& pool);
  const Idefics3Vision* vision_ = nullptr;
  const Qwen3VLVision* qwen_ = nullptr;
  Qwen3VLPreprocessConfig qwen_pc_;
  Qwen3VLPatches work_patches_, done_patches_;  // the frame being encoded, the last encoded
  std::vector<float> done_emb_;
  size_t per_tile_ = 0;
  TileCache cache_;  // worker thread only

  mutable std::mutex mu_;
  ImageRGB newest_;
  uint64_t newest_seq_ = 0;
  Clock::time_point newest_at_;   // when the newest content arrived
  Clock::time_point stale_since_; // the first arrival the memory does not reflect
  uint64_t frames_ = 0, unchanged_ = 0, tiles_encoded_ = 0, tiles_reused_ = 0;
  size_t cache_bytes_ = 0, cache_budget_ = 0;

  // the frame being encoded (worker thread)
  uint64_t work_seq_ = 0;
  PreprocessedImage work_pre_;
  std::vector<float> work_emb_;
  size_t next_tile_ = 0, n_tiles_ = 0;
  std::vector<float> chw_, enc_, out_;

  // the encoded memory
  uint64_t encoded_seq_ = 0;
  int rows_ = 0, cols_ = 0, tiles_ = 0;
  std::vector<float> embeddings_;
};

}  // namespace tessera
