#include "watch/visual_memory.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace tessera {

VisualMemory::VisualMemory(const Idefics3Vision& vision, int n_embd, size_t cache_bytes)
    : vision_(&vision),
      per_tile_(static_cast<size_t>(vision.config().tokens_per_tile()) * static_cast<size_t>(n_embd)),
      cache_(cache_bytes), cache_budget_(cache_bytes) {
  const SiglipConfig& c = vision.config();
  chw_.resize(static_cast<size_t>(3) * c.image_size * c.image_size);
  enc_.resize(static_cast<size_t>(c.n_patches()) * c.hidden);
  out_.resize(per_tile_);
}

VisualMemory::VisualMemory(const Qwen3VLVision& vision, int64_t max_pixels)
    : qwen_(&vision), qwen_pc_(vision.preprocess_config().with_max_pixels(max_pixels)), cache_(0) {}

bool VisualMemory::push(ImageRGB frame) {
  std::lock_guard<std::mutex> lk(mu_);
  ++frames_;
  if (newest_seq_ && frame.width == newest_.width && frame.height == newest_.height && frame.pixels == newest_.pixels) {
    ++unchanged_;
    return false;
  }
  const auto now = Clock::now();
  if (encoded_seq_ == newest_seq_) stale_since_ = now;  // the memory was current until now
  newest_ = std::move(frame);
  ++newest_seq_;
  newest_at_ = now;
  return true;
}

bool VisualMemory::start_work_locked(std::unique_lock<std::mutex>& lk, ThreadPool& pool) {
  const ImageRGB frame = newest_;
  const uint64_t seq = newest_seq_;
  lk.unlock();
  if (qwen_) {
    work_patches_ = preprocess_qwen3vl(frame, qwen_pc_, &pool);
    n_tiles_ = 1;
  } else {
    PreprocessedImage pre = preprocess_idefics3(frame, vision_->preprocess_config(), &pool);
    work_pre_ = std::move(pre);
    work_emb_.assign(work_pre_.tiles.size() * per_tile_, 0.0f);
    n_tiles_ = work_pre_.tiles.size();
  }
  next_tile_ = 0;
  work_seq_ = seq;
  return true;
}

// The whole frame: the last encoding's features when the patches are the same (exact), else the
// encoder over every patch.
void VisualMemory::encode_qwen(ThreadPool& pool) {
  const bool same = done_patches_.grid_h == work_patches_.grid_h && done_patches_.grid_w == work_patches_.grid_w &&
                    done_patches_.pixels == work_patches_.pixels;
  if (!same) {
    std::vector<float> out(static_cast<size_t>(work_patches_.n_tokens(qwen_pc_)) * static_cast<size_t>(qwen_->out_row()));
    qwen_->encode(work_patches_, out.data(), pool);
    done_emb_ = std::move(out);
    done_patches_ = work_patches_;
  }
  work_emb_ = done_emb_;
  ++next_tile_;
  std::lock_guard<std::mutex> lk(mu_);
  ++(same ? tiles_reused_ : tiles_encoded_);
}

void VisualMemory::encode_next_tile(ThreadPool& pool) {
  if (qwen_) return encode_qwen(pool);
  const ImageRGB& tile = work_pre_.tiles[next_tile_];
  bool reused = false;
  if (const std::vector<float>* hit = cache_.find(tile)) {
    std::copy(hit->begin(), hit->end(), out_.begin());
    reused = true;
  } else {
    tile_to_chw(tile, vision_->preprocess_config(), chw_.data());
    vision_->encode_tile(chw_.data(), enc_.data(), pool);
    vision_->connector(enc_.data(), out_.data(), pool);
    cache_.insert(tile, out_);
  }
  std::copy(out_.begin(), out_.end(), work_emb_.begin() + static_cast<std::ptrdiff_t>(next_tile_ * per_tile_));
  ++next_tile_;
  std::lock_guard<std::mutex> lk(mu_);
  ++(reused ? tiles_reused_ : tiles_encoded_);
  cache_bytes_ = cache_.bytes();
}

bool VisualMemory::step(ThreadPool& pool, double debounce_s) {
  std::unique_lock<std::mutex> lk(mu_);
  if (newest_seq_ == 0 || encoded_seq_ == newest_seq_) return false;
  if (std::chrono::duration<double>(Clock::now() - newest_at_).count() < debounce_s) return false;
  if (work_seq_ != newest_seq_) return start_work_locked(lk, pool);
  lk.unlock();
  encode_next_tile(pool);
  if (next_tile_ < n_tiles_) return true;
  lk.lock();
  publish_locked();
  return true;
}

void VisualMemory::publish_locked() {
  encoded_seq_ = work_seq_;
  if (qwen_) rows_ = work_patches_.grid_h, cols_ = work_patches_.grid_w, tiles_ = 1;
  else rows_ = work_pre_.rows, cols_ = work_pre_.cols, tiles_ = static_cast<int>(work_pre_.tiles.size());
  embeddings_ = work_emb_;
  if (encoded_seq_ != newest_seq_) stale_since_ = newest_at_;  // a newer frame came meanwhile
}

VisualMemory::Snapshot VisualMemory::snapshot(ThreadPool& pool) {
  std::unique_lock<std::mutex> lk(mu_);
  if (newest_seq_ == 0) fail("no screen frame has arrived yet");
  Snapshot s;
  if (encoded_seq_ == newest_seq_) {
    s.was_current = true;
  } else {
    s.staleness_s = std::chrono::duration<double>(Clock::now() - stale_since_).count();
    if (work_seq_ != newest_seq_) start_work_locked(lk, pool);
    else lk.unlock();
    while (next_tile_ < n_tiles_) {
      encode_next_tile(pool);
      ++s.tiles_encoded_now;
    }
    lk.lock();
    publish_locked();
  }
  s.rows = rows_, s.cols = cols_, s.tiles = tiles_;
  s.seq = encoded_seq_;
  s.embeddings = embeddings_;
  return s;
}

void VisualMemory::set_cache_budget(size_t bytes) {
  cache_.set_budget(bytes);
  std::lock_guard<std::mutex> lk(mu_);
  cache_bytes_ = cache_.bytes();
  cache_budget_ = bytes;
}

size_t VisualMemory::cache_budget() const {
  std::lock_guard<std::mutex> lk(mu_);
  return cache_budget_;
}

uint64_t VisualMemory::current_seq() const {
  std::lock_guard<std::mutex> lk(mu_);
  return newest_seq_ && encoded_seq_ == newest_seq_ ? encoded_seq_ : 0;
}

VisualMemory::Stats VisualMemory::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s;
  s.frames = frames_;
  s.frames_unchanged = unchanged_;
  s.tiles_encoded = tiles_encoded_;
  s.tiles_reused = tiles_reused_;
  s.cache_bytes = cache_bytes_;
  s.has_frame = newest_seq_ != 0;
  s.current = s.has_frame && encoded_seq_ == newest_seq_;
  if (s.has_frame && !s.current) s.staleness_s = std::chrono::duration<double>(Clock::now() - stale_since_).count();
  return s;
}

}  // namespace tessera
