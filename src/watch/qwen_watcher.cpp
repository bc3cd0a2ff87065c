#include "watch/qwen_watcher.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "profile/profiler.h"

namespace tessera {

namespace {
double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Unchanged image tokens between two recomputed ones are recomputed too when fewer than this:
// a separate evaluation reads every weight once, as many tokens would.
constexpr int kMinStaleRun = 8;
}  // namespace

Qwen3VLWatcher::Qwen3VLWatcher(const LlamaModel& text, const Qwen3VLVision& vision, Session& session, const WatchOptions& opt)
    : text_(text), vision_(vision), session_(session), opt_(opt), vlm_(text, vision) {
  if (opt.n_predict < 1) fail("watch: the answer needs at least one token");
  if (opt.approx_kv > 1) fail("watch: --approx-kv is a fraction in [0, 1]");
  if (opt.approx_global >= 0) fail("watch: --approx-global is SmolVLM's (its global thumbnail); Qwen3-VL encodes one whole image");
}

// A frame one step at a time: unchanged frame -> preprocess -> image features (the same patches:
// the previous ones; gated or full encoding) -> prompt -> exact KV prefix -> same prompt, same
// answer -> stale K/V kept for unchanged image tokens (approximate) -> the rest and the answer.
FrameResult Qwen3VLWatcher::process(const ImageRGB& frame) {
  const double t_start = now_ms();
  if (opt_.reuse && have_prev_ && same_frame(frame, prev_frame_)) return unchanged_frame_result(prev_result_, now_ms() - t_start);
  FrameResult r;
  r.width = frame.width;
  r.height = frame.height;
  r.tiles = 1;
  // refused before any work when the image's tokens and the answer cannot fit the context
  vlm_.check_fits(frame, opt_.max_pixels, session_.n_ctx() - opt_.n_predict);
  Qwen3VLPatches patches;
  {
    prof::PhaseScope phase(prof::Phase::Preprocess);
    patches = preprocess_qwen3vl(frame, vlm_.preprocess_config(opt_.max_pixels), &session_.pool());
  }
  const double t_pre = now_ms();
  r.preprocess_ms = t_pre - t_start;
  encode(patches, r);
  r.encode_ms = now_ms() - t_pre;

  const Qwen3VLPrompt p = vlm_.layout(opt_.question, patches.grid_h, patches.grid_w);
  const int N = static_cast<int>(p.tokens.size());
  r.prompt_tokens = N;
  if (N + opt_.n_predict > session_.n_ctx())
    fail("watch: the frame's prompt (%d tokens) plus the answer does not fit the context of %d tokens (raise -c or lower --vision-max-pixels)",
         N, session_.n_ctx());
  slot_pos_.clear();
  for (int i = 0; i < N; ++i)
    if (p.tokens[static_cast<size_t>(i)] == kEmbeddingSlot) slot_pos_.push_back(i);
  const int d = opt_.reuse ? exact_prefix(p, r.embeddings) : 0;
  // the same prompt as last time (tokens, positions, features): the same greedy answer
  if (opt_.reuse && have_prev_ && d == N - 1 && prev_tokens_ == p.tokens && prev_positions_ == p.positions &&
      prev_emb_.size() == r.embeddings.size() &&
      std::memcmp(r.embeddings.data(), prev_emb_.data(), r.embeddings.size() * sizeof(float)) == 0) {
    reuse_answer(prev_result_, N, r);
    r.total_ms = now_ms() - t_start;
    prev_frame_ = frame;
    prev_result_ = r;
    return r;
  }
  session_.truncate(d);
  r.tokens_reused = d;
  const double t_pf0 = now_ms();
  int pos = d;
  if (opt_.reuse && opt_.approx_kv >= 0 && prev_tokens_ == p.tokens && prev_positions_ == p.positions &&
      prev_emb_.size() == r.embeddings.size() && session_.n_filled() >= N)
    pos = prefill_keeping_stale(p, r.embeddings, pos, r);
  answer_from(p, r.embeddings, pos, t_pf0, r);
  prev_tokens_ = p.tokens;
  prev_positions_ = p.positions;
  prev_emb_ = r.embeddings;
  r.total_ms = now_ms() - t_start;
  if (opt_.reuse) {
    prev_frame_ = frame;
    prev_result_ = r;
    have_prev_ = true;
  }
  return r;
}

// The image features: the previous ones for the same patches (exact), only the changed merge
// blocks through the encoder (--approx-gate), or a full encoding (recording the gating state).
void Qwen3VLWatcher::encode(const Qwen3VLPatches& patches, FrameResult& r) {
  const int64_t W = vision_.out_row();
  const int mm = vision_.config().merge * vision_.config().merge;
  const int blocks = patches.grid_h * patches.grid_w / mm;
  const bool same_grid = prev_patches_.grid_h == patches.grid_h && prev_patches_.grid_w == patches.grid_w &&
                         prev_patches_.row_size == patches.row_size && prev_patches_.pixels.size() == patches.pixels.size();
  if (opt_.reuse && same_grid && prev_patches_.pixels == patches.pixels) {
    r.embeddings = prev_out_;
    r.tiles_reused = 1;
    return;
  }
  r.embeddings.resize(static_cast<size_t>(blocks) * static_cast<size_t>(W));
  prof::PhaseScope phase(prof::Phase::VisionEncode);
  bool gated = false;
  if (opt_.approx_gate && same_grid && gate_.grid_h == patches.grid_h && gate_.grid_w == patches.grid_w) {
    const size_t span = static_cast<size_t>(mm) * static_cast<size_t>(patches.row_size);  // one block's patch rows
    std::vector<int> changed;
    for (int b = 0; b < blocks; ++b)
      if (std::memcmp(&patches.pixels[static_cast<size_t>(b) * span], &prev_patches_.pixels[static_cast<size_t>(b) * span], span * sizeof(float)))
        changed.push_back(b);
    // the blocks gated since the last full encoding, this frame's included: the unchanged
    // patches' outputs have not seen them, so past half (gate_max_fraction) a full encoding
    // resets the drift
    int since_full = 0;
    gated_since_full_.resize(static_cast<size_t>(blocks), 0);
    for (int b : changed) since_full += !gated_since_full_[static_cast<size_t>(b)];
    for (char g : gated_since_full_) since_full += g;
    if (static_cast<double>(since_full) <= opt_.gate_max_fraction * blocks) {
      vision_.encode_gated(patches, changed, gate_, r.embeddings.data(), session_.pool());
      r.encoder_work = static_cast<double>(changed.size()) / blocks;
      for (int b : changed) gated_since_full_[static_cast<size_t>(b)] = 1;
      gated = true;
    }
  }
  if (!gated) {
    vision_.encode(patches, r.embeddings.data(), session_.pool(), nullptr, nullptr, opt_.approx_gate ? &gate_ : nullptr);
    r.encoder_work = 1.0;
    gated_since_full_.assign(static_cast<size_t>(blocks), 0);
  }
  r.tiles_encoded = 1;
  r.tiles_gated = gated;
  if (opt_.reuse || opt_.approx_gate) {
    prev_patches_ = patches;
    prev_out_ = r.embeddings;
  }
  prof::note_memory("vision gate", gate_.bytes());
}

// The longest common prefix of tokens, positions and image features with the last prompt still
// in the cache; the last position is always evaluated, its logits start the answer.
int Qwen3VLWatcher::exact_prefix(const Qwen3VLPrompt& p, const std::vector<float>& embeddings) const {
  const size_t W = static_cast<size_t>(vision_.out_row());
  const int N = static_cast<int>(p.tokens.size());
  const int n = std::min({N, static_cast<int>(prev_tokens_.size()), session_.n_past()});
  int d = 0, slot = 0;
  for (; d < n; ++d) {
    const size_t i = static_cast<size_t>(d);
    if (p.tokens[i] != prev_tokens_[i] || p.positions[i] != prev_positions_[i]) break;
    if (p.tokens[i] == kEmbeddingSlot) {
      const size_t at = static_cast<size_t>(slot++) * W;
      if (at + W > prev_emb_.size() || std::memcmp(&embeddings[at], &prev_emb_[at], W * sizeof(float)) != 0) break;
    }
  }
  return std::min(d, N - 1);
}

// Tokens [a, b) of the prompt through the model at n_past == a, with their features and positions.
void Qwen3VLWatcher::eval_range(const Qwen3VLPrompt& p, const std::vector<float>& embeddings, int a, int b) {
  const size_t W = static_cast<size_t>(vision_.out_row());
  const std::vector<int32_t> toks(p.tokens.begin() + a, p.tokens.begin() + b);
  const std::vector<MropePos> pos(p.positions.begin() + a, p.positions.begin() + b);
  const int first = slot_pos_.empty() ? 0 : slot_pos_.front();
  size_t s0 = 0, n = 0;
  for (int i = a; i < b; ++i)
    if (p.tokens[static_cast<size_t>(i)] == kEmbeddingSlot) {
      if (n++ == 0) s0 = static_cast<size_t>(i - first);
    }
  session_.eval(toks, n ? &embeddings[s0 * W] : nullptr, n, &pos);
}

// Approximate reuse (--approx-kv): after the first changed image token, every unchanged run of
// image tokens keeps its stale K/V except its first approx_kv fraction; short runs are
// recomputed. Returns the position evaluated up to (the end of the image).
int Qwen3VLWatcher::prefill_keeping_stale(const Qwen3VLPrompt& p, const std::vector<float>& embeddings, int pos, FrameResult& r) {
  if (slot_pos_.empty()) return pos;
  prof::PhaseScope phase(prof::Phase::Prefill);
  const size_t W = static_cast<size_t>(vision_.out_row());
  const int first = slot_pos_.front(), end = slot_pos_.back() + 1;
  if (pos >= end) return pos;
  const auto same = [&](int i) {  // token i: an image token with the previous frame's feature
    if (i < first || i >= end) return false;
    const size_t at = static_cast<size_t>(i - first) * W;
    return std::memcmp(&embeddings[at], &prev_emb_[at], W * sizeof(float)) == 0;
  };
  std::vector<char> recompute(static_cast<size_t>(end - pos), 1);
  for (int i = pos; i < end;) {
    if (!same(i)) {
      ++i;
      continue;
    }
    int j = i;
    while (j < end && same(j)) ++j;
    if (j - i >= kMinStaleRun) {
      const int keep_from = i + static_cast<int>(std::ceil(opt_.approx_kv * (j - i)));
      for (int k = keep_from; k < j; ++k) recompute[static_cast<size_t>(k - pos)] = 0;
    }
    i = j;
  }
  for (int i = pos; i < end;) {
    int j = i;
    const char mode = recompute[static_cast<size_t>(i - pos)];
    while (j < end && recompute[static_cast<size_t>(j - pos)] == mode) ++j;
    if (mode) {
      eval_range(p, embeddings, i, j);
      r.tokens_recomputed += j - i;
    } else {
      session_.skip_to(j);
      r.tokens_kept_stale += j - i;
    }
    i = j;
  }
  return end;
}

// The rest of the prompt from `pos`, then the greedy answer, with the previous answer as the draft.
void Qwen3VLWatcher::answer_from(const Qwen3VLPrompt& p, const std::vector<float>& embeddings, int pos, double t_prefill_start,
                                 FrameResult& r) {
  const size_t W = static_cast<size_t>(vision_.out_row());
  const int N = static_cast<int>(p.tokens.size());
  const std::vector<MropePos> positions(p.positions.begin() + pos, p.positions.end());
  std::vector<float> emb;
  const int first = slot_pos_.empty() ? 0 : slot_pos_.front();
  for (int i = pos; i < N; ++i)
    if (p.tokens[static_cast<size_t>(i)] == kEmbeddingSlot) {
      const size_t at = static_cast<size_t>(i - first) * W;
      emb.insert(emb.end(), embeddings.begin() + static_cast<std::ptrdiff_t>(at), embeddings.begin() + static_cast<std::ptrdiff_t>(at + W));
    }
  greedy_answer(session_, p.tokens, pos, emb, &positions, opt_.n_predict, opt_.reuse && have_prev_ ? &prev_result_.answer_tokens : nullptr,
                now_ms() - t_prefill_start, r);
}

}  // namespace tessera
