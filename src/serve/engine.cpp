#include "serve/engine.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>

#include "core/error.h"
#include "models/footprint.h"
#include "models/qwen3vl/qwen3vl.h"
#include "models/smolvlm/idefics3.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"

namespace tessera::serve {

size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, rss = 0;
  f >> pages >> rss;
  return rss * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kMinTileCache = 16 * kMiB;  // a screen's worth of tiles, at least

// the largest of the paths' figures (8-bit activations with the bf16 attention: the fp32 buffers and the attention's tiles)
size_t vision_buffer_bytes(const SiglipConfig& c) { return siglip_buffer_bytes(c, true, true); }
size_t tile_count(const Idefics3Vision& v, int w, int h) { return idefics3_tile_count(v.preprocess_config(), w, h); }
size_t frame_bytes(const Idefics3Vision& v, int w, int h) {
  return idefics3_frame_bytes(v.config(), v.preprocess_config(), w, h);
}
int64_t qwen_patches(const Qwen3VLVision& v, int64_t max_pixels, int w, int h) {
  return qwen3vl_patches(v.config(), max_pixels, w, h);
}
size_t qwen_vision_buffer_bytes(const Qwen3VLVision& v, int64_t patches) { return qwen3vl_buffer_bytes(v.config(), patches); }
size_t qwen_frame_bytes(const Qwen3VLVision& v, int64_t max_pixels, int w, int h) {
  return qwen3vl_frame_bytes(v.config(), max_pixels, w, h);
}

std::string mb(size_t bytes) { return std::to_string((bytes + kMiB / 2) / kMiB) + " MB"; }

}  // namespace

std::string MemoryPlan::describe() const {
  std::string s = "process " + mb(process) + " + weights " + mb(weights) + " + KV cache " + mb(kv);
  if (vision)
    s += " + vision buffers " + mb(vision) + " + screen frames " + mb(frames) +
         (prefix ? " + saved screen prompt " + mb(prefix) : " (no room to save the screen prompt)");
  return s + " = " + mb(fixed());
}

Engine::Engine(HfModel model, const SessionOptions& options, std::string model_id, ImageLimits image_limits,
               const EngineMemory& memory)
    : model_(std::move(model)), session_(*model_.text, options), model_id_(std::move(model_id)),
      image_limits_(image_limits) {
  plan_.budget = memory.budget_bytes;
  // the files less what was repacked out of them: those copies are on the heap, inside `process`
  size_t released = session_.released_file_bytes();
  if (model_.vision) released += model_.vision->released_file_bytes();
  if (model_.qwen_vision) released += model_.qwen_vision->released_file_bytes();
  plan_.weights = memory.weight_bytes > released ? memory.weight_bytes - released : 0;
  plan_.kv = session_.kv_bytes();
  qwen_max_pixels_ = memory.vision_max_pixels;
  if (const Qwen3VLVision* q = model_.qwen_vision.get()) {
    const int64_t n = qwen_patches(*q, qwen_max_pixels_, memory.screen_width, memory.screen_height);
    plan_.vision = qwen_vision_buffer_bytes(*q, n);
    plan_.frames = qwen_frame_bytes(*q, qwen_max_pixels_, memory.screen_width, memory.screen_height);
    const size_t tokens = static_cast<size_t>(n / (q->config().merge * q->config().merge)) + 64;
    plan_.prefix = session_.prefix_bytes(static_cast<int>(std::min<size_t>(tokens, static_cast<size_t>(session_.n_ctx()))));
  }
  if (model_.vision) {
    plan_.vision = vision_buffer_bytes(model_.vision->config());
    plan_.frames = frame_bytes(*model_.vision, memory.screen_width, memory.screen_height);
    // the screen prompt's prefix: the tiles' tokens and their markup (a few per tile), the template
    const size_t tiles = tile_count(*model_.vision, memory.screen_width, memory.screen_height);
    const size_t tokens = tiles * (static_cast<size_t>(model_.vision->config().tokens_per_tile()) + 8) + 64;
    plan_.prefix = session_.prefix_bytes(static_cast<int>(std::min<size_t>(tokens, static_cast<size_t>(session_.n_ctx()))));
  }
  plan_.process = resident_bytes();
  plan_.cache = memory.screen_cache_bytes;
  if (plan_.budget) {
    // the saved screen prompt is a convenience: dropped first when the budget is tight
    if (plan_.fixed() + kMinTileCache > plan_.budget) plan_.prefix = 0;
    const size_t need = plan_.fixed() + (model_.vision ? kMinTileCache : 0);  // Qwen3-VL keeps no tile cache
    if (need > plan_.budget)
      fail("--mem-budget %zu MB is below what this server needs: %s%s (lower -c, or quantize the model)",
           plan_.budget / kMiB, plan_.describe().c_str(), model_.vision ? ", plus 16 MB of screen tiles" : "");
    plan_.cache = std::min(plan_.cache, plan_.budget - plan_.fixed());
  }
  if (model_.vision) memory_ = std::make_unique<VisualMemory>(*model_.vision, model_.text->config().n_embd, plan_.cache);
  if (model_.qwen_vision) memory_ = std::make_unique<VisualMemory>(*model_.qwen_vision, qwen_max_pixels_);
}

void Engine::admit_image(const ImageRGB& image) {
  if (!plan_.budget || !memory_) return;
  // the image's own work: its preprocessing and embeddings, as for a screen frame (Qwen3-VL: and
  // the encoder's buffers beyond the screen's)
  size_t need = 0;
  if (const Qwen3VLVision* q = model_.qwen_vision.get()) {
    const int64_t n = qwen_patches(*q, qwen_max_pixels_, image.width, image.height);
    need = qwen_frame_bytes(*q, qwen_max_pixels_, image.width, image.height) +
           (qwen_vision_buffer_bytes(*q, n) > plan_.vision ? qwen_vision_buffer_bytes(*q, n) - plan_.vision : 0);
  } else {
    need = frame_bytes(*model_.vision, image.width, image.height);
  }
  const size_t room = plan_.budget - plan_.fixed();
  if (need > room)
    throw ApiError(413, "invalid_request_error",
                   "this image needs " + mb(need) + " of working memory; --mem-budget leaves " + mb(room) +
                       " beyond the model, its KV cache and buffers (send a smaller image)",
                   "messages", "memory_budget_exceeded");
  if (memory_->cache_budget() > room - need) memory_->set_cache_budget(room - need);
}

size_t Engine::held_image_room() const {
  if (!plan_.budget) return SIZE_MAX;
  return (plan_.budget - plan_.fixed() - (memory_ ? kMinTileCache : 0)) / 2;
}

bool Engine::over_budget() {
  if (!plan_.budget) return false;
  const size_t rss = resident_bytes();
  if (memory_ && memory_->cache_budget() < plan_.cache && rss + kMinTileCache < plan_.budget)
    memory_->set_cache_budget(plan_.cache);  // room again (after a request image's work)
  if (rss <= plan_.budget) return false;
  if (memory_) {
    const size_t cached = memory_->stats().cache_bytes, excess = rss - plan_.budget;
    memory_->set_cache_budget(cached > excess ? cached - excess : 0);
  }
  return resident_bytes() > plan_.budget;
}

ImageRGB Engine::decode_request_image(const ChatRequest& r) const {
  if (!model_.vision && !model_.qwen_vision)
    throw ApiError(400, "invalid_request_error", "this model has no vision tower: start the server with --mmproj",
                   "messages");
  try {
    return decode_image(r.image.data(), r.image.size(), "the request's image", image_limits_);
  } catch (const Error& e) {
    bad_request("messages[" + std::to_string(r.image_at) + "].content", e.what());
  }
}

Engine::Prepared Engine::prepare(const ChatRequest& r, const ImageRGB* image) {
  Prepared p;
  std::vector<std::pair<std::string, std::string>> turns;  // SmolVLM's earlier turns
  for (size_t i = 0; i + 1 < r.messages.size(); ++i) turns.emplace_back(r.messages[i].role, r.messages[i].content);
  if (r.wants_screen) {
    if (!memory_)
      throw ApiError(400, "invalid_request_error", "this model has no vision tower: start the server with --mmproj", "messages");
    if (!memory_->stats().has_frame)
      throw ApiError(503, "server_error",
                     "no screen frame has arrived yet (serve --screen x11, or POST frames to /v1/screen/frames)");
    const auto t0 = Clock::now();
    VisualMemory::Snapshot snap = memory_->snapshot(session_.pool());
    std::string history;
    if (model_.qwen_vision) {
      const std::vector<ChatMessage> earlier(r.messages.begin(), r.messages.end() - 1);
      if (!earlier.empty()) history = apply_chat_template(*model_.text, earlier, false);
    } else {
      history = Idefics3::history_text(turns);
    }
    screen_prompt(snap, r.messages.back().content, history, p.prompt, p.positions);
    p.embeddings = std::move(snap.embeddings);
    p.vision_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    p.screen = true;
    p.screen_seq = snap.seq;
    p.screen_current = snap.was_current;
    p.screen_staleness_s = snap.staleness_s;
  } else if (image && model_.qwen_vision) {
    // Qwen3-VL: the earlier turns as its chat template renders them, then the image turn
    const std::vector<ChatMessage> earlier(r.messages.begin(), r.messages.end() - 1);
    const std::string history = earlier.empty() ? std::string() : apply_chat_template(*model_.text, earlier, false);
    const Qwen3VL vlm(*model_.text, *model_.qwen_vision);
    const int64_t n_img = vlm.image_tokens(*image, qwen_max_pixels_);
    if (n_img + 16 > session_.n_ctx())  // refused before the encoder runs
      throw ApiError(400, "invalid_request_error",
                     "the image needs " + std::to_string(n_img) + " tokens; this server's context is " +
                         std::to_string(session_.n_ctx()) + " tokens (serve -c)",
                     "messages", "context_length_exceeded");
    Qwen3VLPrompt ip = vlm.build(*image, r.messages.back().content, session_.pool(), qwen_max_pixels_, 0, 0, history);
    p.vision_ms = (ip.preprocess_s + ip.encode_s) * 1e3;
    p.prompt = std::move(ip.tokens);
    p.embeddings = std::move(ip.embeddings);
    p.positions = std::move(ip.positions);
  } else if (image) {
    const Idefics3 vlm(*model_.text, *model_.vision);
    VisionTimings tm;
    ImagePrompt ip = vlm.build(*image, r.messages.back().content, session_.pool(), &tm, Idefics3::history_text(turns));
    p.vision_ms = (tm.preprocess_s + tm.encode_total() + tm.connector_s) * 1e3;
    p.prompt = std::move(ip.tokens);
    p.embeddings = std::move(ip.embeddings);
  } else {
    // the same rendering and tokenization as `tessera run` (so a greedy reply is the same text)
    const std::string text = apply_chat_template(*model_.text, r.messages, true);
    p.prompt = model_.text->tokenizer().encode(text, /*parse_special=*/true);
  }
  if (p.prompt.empty()) bad_request("messages", "the prompt is empty after tokenization");
  if (static_cast<int>(p.prompt.size()) >= session_.n_ctx())
    throw ApiError(400, "invalid_request_error",
                   "the prompt is " + std::to_string(p.prompt.size()) + " tokens; this server's context is " +
                       std::to_string(session_.n_ctx()) + " tokens (serve -c)",
                   "messages", "context_length_exceeded");
  return p;
}

size_t Engine::cached_prefix(const std::vector<int32_t>& tokens, bool through_slots) const {
  size_t n = 0;
  while (n < cached_.size() && n < tokens.size() && cached_[n] == tokens[n] &&
         (tokens[n] != kEmbeddingSlot || through_slots))
    ++n;
  return n;
}

bool Engine::background_step(double debounce_s) {
  if (!memory_) return false;
  if (memory_->step(session_.pool(), debounce_s)) return true;
  const uint64_t seq = memory_->current_seq();
  if (seq == 0 || seq == prefix_tried_seq_) return false;
  // The screen prompt's prefix: what two different questions' prompts share.
  VisualMemory::Snapshot snap = memory_->snapshot(session_.pool());
  std::vector<int32_t> a, b;
  std::vector<MropePos> pos, pos_b;
  screen_prompt(snap, "a", "", a, pos);
  screen_prompt(snap, "b", "", b, pos_b);
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  if (n == 0 || static_cast<int>(n) >= session_.n_ctx()) {
    prefix_tried_seq_ = seq;
    return true;
  }
  const std::vector<int32_t> prefix(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n));
  // what is already cached of it
  const size_t common = cached_prefix(prefix, cached_screen_seq_ == snap.seq);
  if (common == n) {
    save_screen_prefix(prefix, snap.seq);
    prefix_tried_seq_ = seq;
    return true;
  }
  session_.truncate(static_cast<int>(common));
  cached_.resize(common);
  cached_screen_seq_ = snap.seq;
  size_t slots_before = 0;
  for (size_t i = 0; i < common; ++i) slots_before += prefix[i] == kEmbeddingSlot;
  const size_t E = static_cast<size_t>(model_.text->config().n_embd_inp());
  // a chunk at a time, so a preemption keeps the chunks already evaluated
  const size_t chunk = 256;
  for (size_t i = common; i < n; i += chunk) {
    const size_t j = std::min(n, i + chunk);
    const std::vector<int32_t> part(prefix.begin() + static_cast<std::ptrdiff_t>(i), prefix.begin() + static_cast<std::ptrdiff_t>(j));
    size_t slots = 0;
    for (int32_t t : part) slots += t == kEmbeddingSlot;
    const float* emb = snap.embeddings.data() + slots_before * E;
    if (pos.empty()) {
      session_.eval(part, emb, slots);
    } else {
      const std::vector<MropePos> part_pos(pos.begin() + static_cast<std::ptrdiff_t>(i), pos.begin() + static_cast<std::ptrdiff_t>(j));
      session_.eval(part, emb, slots, &part_pos);
    }
    slots_before += slots;
    cached_.insert(cached_.end(), part.begin(), part.end());
  }
  save_screen_prefix(prefix, snap.seq);
  prefix_tried_seq_ = seq;  // done (a preemption above leaves it to be finished next time)
  return true;
}

void Engine::screen_prompt(const VisualMemory::Snapshot& snap, const std::string& question, const std::string& history,
                           std::vector<int32_t>& tokens, std::vector<MropePos>& positions) const {
  if (model_.qwen_vision) {
    Qwen3VLPrompt q = Qwen3VL(*model_.text, *model_.qwen_vision).layout(question, snap.rows, snap.cols, 0, history);
    tokens = std::move(q.tokens);
    positions = std::move(q.positions);
    return;
  }
  const Idefics3 vlm(*model_.text, *model_.vision);
  tokens = vlm.tokenize_with_slots(vlm.prompt_text(snap.rows, snap.cols, question, history));
  positions.clear();
}

void Engine::save_screen_prefix(const std::vector<int32_t>& prefix, uint64_t seq) {
  if (plan_.prefix == 0) return;  // no room in the memory budget
  session_.save_prefix(static_cast<int>(prefix.size()), prefix_kv_);
  prefix_tokens_ = prefix;
  prefix_seq_ = seq;
}

Result Engine::complete(const ChatRequest& r, const Prepared& p, const std::function<bool(const std::string&)>& emit,
                        Clock::time_point deadline) {
  Result res;
  const std::vector<int32_t>& prompt = p.prompt;
  res.usage.vision_ms = p.vision_ms;
  res.usage.screen = p.screen;
  res.usage.screen_current = p.screen_current;
  res.usage.screen_staleness_ms = p.screen_staleness_s * 1e3;
  // Reuse the cached positions the new prompt starts with, up to its first image slot (an image's
  // embeddings are not compared), keeping at least one token to evaluate for the logits.
  // A screen prompt may go through the slots when they hold the same encoding's embeddings.
  // A screen question whose precomputed prefix other requests have since overwritten gets it
  // back from the saved copy (the same bytes as evaluating it again).
  if (p.screen && p.screen_seq != 0 && p.screen_seq == prefix_seq_ && prompt.size() > prefix_tokens_.size() &&
      std::equal(prefix_tokens_.begin(), prefix_tokens_.end(), prompt.begin()) &&
      cached_prefix(prompt, p.screen_seq == cached_screen_seq_) < prefix_tokens_.size()) {
    session_.restore_prefix(static_cast<int>(prefix_tokens_.size()), prefix_kv_);
    cached_ = prefix_tokens_;
    cached_screen_seq_ = p.screen_seq;
  }
  const bool same_screen = p.screen && p.screen_seq != 0 && p.screen_seq == cached_screen_seq_;
  const size_t common = std::min(cached_prefix(prompt, same_screen), prompt.size() - 1);
  session_.truncate(static_cast<int>(common));
  cached_.resize(common);
  // the embeddings of the slots before `common` were reused; the rest come from p
  size_t slots_before = 0;
  for (size_t i = 0; i < common; ++i) slots_before += prompt[i] == kEmbeddingSlot;
  const size_t E = static_cast<size_t>(model_.text->config().n_embd_inp());
  const std::vector<float> rest_emb(p.embeddings.begin() + static_cast<std::ptrdiff_t>(std::min(p.embeddings.size(), slots_before * E)),
                                    p.embeddings.end());
  cached_screen_seq_ = p.screen ? p.screen_seq : 0;
  res.usage.reused_tokens = static_cast<int>(common);
  const std::vector<int32_t> rest(prompt.begin() + static_cast<std::ptrdiff_t>(common), prompt.end());
  const std::vector<MropePos> rest_pos(p.positions.begin() + static_cast<std::ptrdiff_t>(std::min(common, p.positions.size())), p.positions.end());

  Sampler sampler(r.sampling);
  StopMatcher stops(r.stop);
  bool cancelled = false;
  const auto on_piece = [&](const std::string& piece) {
    const std::string out = stops.add(piece);
    res.text += out;
    if (!out.empty() && !emit(out)) cancelled = true;
  };
  const std::function<bool()> stop = [&] {
    if (Clock::now() > deadline) res.deadline_hit = true;
    return cancelled || stops.stopped() || res.deadline_hit;
  };
  std::vector<int32_t> generated;
  const GenerateStats st = generate(session_, rest, r.max_tokens, sampler, on_piece, &generated,
                                    rest_emb.empty() ? nullptr : &rest_emb, nullptr, &stop,
                                    rest_pos.empty() ? nullptr : &rest_pos);
  // the session now holds rest and the generated tokens it evaluated
  cached_.insert(cached_.end(), rest.begin(), rest.end());
  cached_.insert(cached_.end(), generated.begin(), generated.end());
  cached_.resize(std::min(cached_.size(), static_cast<size_t>(session_.n_past())));

  const std::string tail = stops.flush();
  if (!tail.empty() && !cancelled) {
    res.text += tail;
    if (!emit(tail)) cancelled = true;
  }
  res.cancelled = cancelled;
  res.finish_reason = st.stopped_by_eog || stops.stopped() ? "stop" : "length";
  res.usage.prompt_tokens = static_cast<int>(prompt.size());
  res.usage.completion_tokens = st.generated_tokens;
  res.usage.prefill_ms = st.prompt_seconds * 1e3;
  res.usage.decode_ms = st.generate_seconds * 1e3;
  return res;
}

}  // namespace tessera::serve
