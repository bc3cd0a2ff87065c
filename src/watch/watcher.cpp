#include "watch/watcher.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "profile/profiler.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "models/smolvlm/preprocess.h"

namespace tessera {

namespace {

double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double mean_abs_diff(const ImageRGB& a, const ImageRGB& b) {
  if (a.width != b.width || a.height != b.height || a.pixels.size() != b.pixels.size()) return 1e9;
  uint64_t s = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) s += static_cast<uint64_t>(std::abs(int(a.pixels[i]) - int(b.pixels[i])));
  return static_cast<double>(s) / static_cast<double>(std::max<size_t>(1, a.pixels.size()));
}

// Indices of the P x P patches whose pixels differ between two tiles of the same size.
std::vector<int> changed_patches_of(const ImageRGB& a, const ImageRGB& b, int P) {
  std::vector<int> out;
  const int side = a.width / P;
  for (int py = 0; py < side; ++py)
    for (int px = 0; px < side; ++px) {
      bool diff = false;
      for (int y = py * P; y < (py + 1) * P && !diff; ++y)
        diff = std::memcmp(a.row(y) + 3 * px * P, b.row(y) + 3 * px * P, static_cast<size_t>(3 * P)) != 0;
      if (diff) out.push_back(py * side + px);
    }
  return out;
}

}  // namespace

// The gating entry of a tile position: an existing one with a tile of the same size, or a new
// one (least recently used evicted). A new entry only remembers the tile; its K/V state is
// recorded the next time the position changes.
Watcher::GateEntry* Watcher::gate_entry(int position, const ImageRGB& tile) {
  ++gate_clock_;
  for (GateEntry& e : gate_)
    if (e.position == position && e.tile.width == tile.width && e.tile.height == tile.height) {
      e.used = gate_clock_;
      return &e;
    }
  if (gate_.size() >= 64) {  // bound the remembered positions (each keeps its tile's pixels)
    auto lru = std::min_element(gate_.begin(), gate_.end(), [](const GateEntry& a, const GateEntry& b) { return a.used < b.used; });
    gate_.erase(lru);
  }
  gate_.push_back(GateEntry{position, ImageRGB{}, {}, gate_clock_});
  return &gate_.back();
}

Watcher::Watcher(const LlamaModel& text, const Idefics3Vision& vision, Session& session, const WatchOptions& opt)
    : text_(text), vision_(vision), session_(session), opt_(opt), vlm_(text, vision), cache_(opt.cache_bytes) {
  if (opt.n_predict < 1) fail("watch: the answer needs at least one token");
  if (opt.approx_kv > 1) fail("watch: --approx-kv is a fraction in [0, 1]");
}

// A frame one step at a time: unchanged frame -> preprocess -> tiles (exact cache, kept global
// thumbnail, gated or full encoding) -> prompt -> exact KV prefix -> same prompt, same answer ->
// stale K/V kept for unchanged tiles (approximate) -> the rest of the prompt and the answer.
FrameResult Watcher::process(const ImageRGB& frame) {
  const double t_start = now_ms();
  if (opt_.reuse && have_prev_ && same_frame(frame, prev_frame_)) return unchanged_frame_result(prev_result_, now_ms() - t_start);
  FrameResult r;
  r.width = frame.width;
  r.height = frame.height;
  PreprocessedImage full;
  const PreprocessedImage* pre_p = &full;
  {
    prof::PhaseScope phase(prof::Phase::Preprocess);
    if (opt_.reuse) {  // only the rows from the first to the last that changed (bitwise the whole frame's)
      int a = 0, b = frame.height;
      if (pre_state_.valid && pre_frame_.width == frame.width && pre_frame_.height == frame.height) {
        const size_t row = static_cast<size_t>(frame.width) * 3;
        const auto same = [&](int y) { return std::memcmp(frame.row(y), pre_frame_.row(y), row) == 0; };
        while (a < b && same(a)) ++a;
        while (b > a && same(b - 1)) --b;
      }
      pre_frame_ = ImageRGB{};  // the state describes no frame until the call completes
      pre_p = &preprocess_idefics3_rows(frame, vision_.preprocess_config(), a, b, pre_state_, &session_.pool());
      pre_frame_ = frame;
    } else {
      full = preprocess_idefics3(frame, vision_.preprocess_config(), &session_.pool());
    }
  }
  const PreprocessedImage& pre = *pre_p;
  const double t_pre = now_ms();
  r.preprocess_ms = t_pre - t_start;
  r.tiles = static_cast<int>(pre.tiles.size());
  const std::vector<bool> changed = encode_tiles(pre, r);
  r.encode_ms = now_ms() - t_pre;

  const PromptLayout p = layout(vlm_.tokenize_with_slots(vlm_.prompt_text(pre.rows, pre.cols, opt_.question)));
  const int N = static_cast<int>(p.tokens.size());
  r.prompt_tokens = N;
  if (N + opt_.n_predict > session_.n_ctx())
    fail("watch: the frame's prompt (%d tokens) plus the answer does not fit the context of %d tokens (raise -c)", N, session_.n_ctx());
  const int d = opt_.reuse ? exact_prefix(p, r.embeddings) : 0;
  // The same prompt as last time (every token and embedding): greedy decoding is deterministic,
  // so the answer and the next-token logits are the previous ones.
  if (opt_.reuse && have_prev_ && d == N - 1 && prev_tokens_ == p.tokens &&
      std::memcmp(r.embeddings.data(), prev_emb_.data(), r.embeddings.size() * sizeof(float)) == 0) {
    reuse_answer(prev_result_, N, r);
    r.total_ms = now_ms() - t_start;
    remember(frame, r);
    return r;
  }
  session_.truncate(d);
  r.tokens_reused = d;
  const double t_pf0 = now_ms();
  int pos = d;
  if (opt_.reuse && opt_.approx_kv >= 0 && prev_tokens_ == p.tokens && !prev_emb_.empty() && session_.n_filled() >= N)
    pos = prefill_keeping_stale(p, changed, pos, r);
  answer_from(p, pos, t_pf0, r);
  prev_tokens_ = p.tokens;
  prev_emb_ = r.embeddings;
  r.total_ms = now_ms() - t_start;
  remember(frame, r);
  return r;
}

bool same_frame(const ImageRGB& a, const ImageRGB& b) {
  return a.width == b.width && a.height == b.height && a.pixels == b.pixels;
}

void reuse_answer(const FrameResult& prev, int n, FrameResult& r) {
  r.answer = prev.answer;
  r.answer_tokens = prev.answer_tokens;
  r.next_logits = prev.next_logits;
  r.tokens_reused = n;
  r.answer_reused = true;
}

void greedy_answer(Session& session, const std::vector<int32_t>& prompt, int pos, const std::vector<float>& embeddings,
                   const std::vector<MropePos>* positions, int n_predict, const std::vector<int32_t>* draft, double ms_before,
                   FrameResult& r) {
  const std::vector<int32_t> toks(prompt.begin() + pos, prompt.end());
  r.tokens_recomputed += static_cast<int>(toks.size());
  SamplerOptions greedy;
  greedy.temperature = 0;
  Sampler sampler(greedy);
  for (int i = 0; i < pos; ++i)
    if (prompt[static_cast<size_t>(i)] >= 0) sampler.accept(prompt[static_cast<size_t>(i)]);
  const GenerateStats st = generate(session, toks, n_predict, sampler, [&](const std::string& piece) { r.answer += piece; },
                                    &r.answer_tokens, &embeddings, &r.next_logits, nullptr, positions, draft);
  r.prefill_ms = ms_before + st.prompt_seconds * 1e3;
  r.decode_ms = st.generate_seconds * 1e3;
  r.answer_drafted = st.draft_accepted;
}

FrameResult unchanged_frame_result(const FrameResult& prev, double ms) {
  FrameResult same = prev;
  same.frame_unchanged = true;
  same.tiles_encoded = same.tiles_gated = 0;
  same.encoder_work = 0;
  same.tiles_reused = same.tiles;
  same.tokens_reused = same.prompt_tokens;
  same.tokens_recomputed = same.tokens_kept_stale = 0;
  same.answer_drafted = 0;
  same.global_kept_approx = false;
  same.preprocess_ms = same.encode_ms = same.prefill_ms = same.decode_ms = 0;
  same.total_ms = ms;
  return same;
}

// Tile reuse: each tile's connector output from the content cache (exact), the kept global
// thumbnail (approximate), or the encoder (gated: only the changed patches). Fills r.embeddings;
// returns which tiles' outputs differ from the previous frame's (asked only by approx-kv).
std::vector<bool> Watcher::encode_tiles(const PreprocessedImage& pre, FrameResult& r) {
  const SiglipConfig& vc = vision_.config();
  const size_t per_tile = static_cast<size_t>(vc.tokens_per_tile()) * static_cast<size_t>(text_.config().n_embd);
  r.embeddings.resize(pre.tiles.size() * per_tile);
  std::vector<float> chw(static_cast<size_t>(3) * vc.image_size * vc.image_size);
  std::vector<float> enc(static_cast<size_t>(vc.n_patches()) * vc.hidden), out(per_tile);
  std::vector<bool> changed(pre.tiles.size(), true);
  for (size_t t = 0; t < pre.tiles.size(); ++t) {
    const ImageRGB& tile = pre.tiles[t];
    const bool global = t + 1 == pre.tiles.size();
    const std::vector<float>* hit = nullptr;
    if (global && opt_.approx_global >= 0 && !prev_global_out_.empty() && mean_abs_diff(tile, prev_global_) <= opt_.approx_global) {
      hit = &prev_global_out_;
      r.global_kept_approx = true;
    } else if (opt_.reuse) {
      hit = cache_.find(tile);
    }
    if (hit) {
      std::copy(hit->begin(), hit->end(), out.begin());
      ++r.tiles_reused;
    } else {
      bool gated;
      {
        prof::PhaseScope phase(prof::Phase::VisionEncode);
        tile_to_chw(tile, vision_.preprocess_config(), chw.data());
        gated = encode_tile(static_cast<int>(t), tile, chw.data(), enc.data(), r);
      }
      {
        prof::PhaseScope phase(prof::Phase::Connector);
        vision_.connector(enc.data(), out.data(), session_.pool());
      }
      ++r.tiles_encoded;
      r.tiles_gated += gated;
      if (opt_.reuse && !gated) cache_.insert(tile, out);  // the content cache holds exact outputs only
      if (global) {
        prev_global_ = tile;
        prev_global_out_ = out;
      }
    }
    std::copy(out.begin(), out.end(), r.embeddings.begin() + static_cast<std::ptrdiff_t>(t * per_tile));
    if (opt_.approx_kv >= 0 && prev_emb_.size() == r.embeddings.size())  // only approx-kv asks which tiles changed
      changed[t] = std::memcmp(prev_emb_.data() + t * per_tile, out.data(), per_tile * sizeof(float)) != 0;
  }
  r.encoder_work /= std::max<size_t>(1, pre.tiles.size());
  prof::note_memory("vision cache", cache_.bytes());
  return changed;
}

// One tile through the encoder: with --approx-gate, only its changed 16x16 patches when few
// changed since the state recorded at this position. Returns whether it was gated.
bool Watcher::encode_tile(int position, const ImageRGB& tile, const float* chw, float* enc, FrameResult& r) {
  const SiglipConfig& vc = vision_.config();
  GateEntry* g = opt_.approx_gate ? gate_entry(position, tile) : nullptr;
  bool gated = false;
  if (g && !g->state.encoded.empty()) {
    const std::vector<int> changed_patches = changed_patches_of(g->tile, tile, vc.patch_size);
    if (static_cast<double>(changed_patches.size()) <= opt_.gate_max_fraction * vc.n_patches()) {
      vision_.encode_tile_gated(chw, changed_patches, g->state, enc, session_.pool());
      gated = true;
      r.encoder_work += static_cast<double>(changed_patches.size()) / vc.n_patches();
    }
  }
  if (!gated) {
    // a position seen changing once is likely to change again: keep its per-layer K/V,
    // for at most gate_positions positions (least recently used give theirs up)
    const bool record = g && g->tile.width;
    if (record && g->state.encoded.empty()) {
      size_t with_state = 0;
      GateEntry* lru = nullptr;
      for (GateEntry& e : gate_)
        if (!e.state.encoded.empty()) {
          ++with_state;
          if (!lru || e.used < lru->used) lru = &e;
        }
      if (with_state >= static_cast<size_t>(std::max(1, opt_.gate_positions)) && lru) lru->state = Idefics3Vision::TileState{};
    }
    vision_.encode_tile(chw, enc, session_.pool(), record ? &g->state : nullptr);
    r.encoder_work += 1.0;
  }
  if (g) g->tile = tile;
  return gated;
}

Watcher::PromptLayout Watcher::layout(std::vector<int32_t> tokens) {
  PromptLayout p;
  p.tokens = std::move(tokens);
  p.slot_of.assign(p.tokens.size(), -1);
  for (size_t i = 0; i < p.tokens.size(); ++i)
    if (p.tokens[i] == kEmbeddingSlot) {
      p.slot_of[i] = static_cast<int>(p.slot_pos.size());
      p.slot_pos.push_back(static_cast<int>(i));
    }
  return p;
}

// Prefix reuse (exact): the longest common prefix of tokens and embeddings with the last prompt
// still in the cache; the last position is always evaluated, its logits start the answer.
int Watcher::exact_prefix(const PromptLayout& p, const std::vector<float>& embeddings) const {
  const size_t E = static_cast<size_t>(text_.config().n_embd);
  const int N = static_cast<int>(p.tokens.size());
  const int n_prev = std::min<int>(static_cast<int>(prev_tokens_.size()), session_.n_past());
  int d = 0;
  while (d < std::min(N, n_prev) && p.tokens[static_cast<size_t>(d)] == prev_tokens_[static_cast<size_t>(d)]) {
    const int s = p.slot_of[static_cast<size_t>(d)];
    if (s >= 0 && std::memcmp(&embeddings[static_cast<size_t>(s) * E], &prev_emb_[static_cast<size_t>(s) * E], E * sizeof(float)) != 0)
      break;
    ++d;
  }
  return std::min(d, N - 1);
}

// Tokens [a, b) of the prompt and the embedding rows of their slots.
void Watcher::slice(const PromptLayout& p, const std::vector<float>& embeddings, int a, int b, std::vector<int32_t>& toks,
                    std::vector<float>& emb) const {
  const size_t E = static_cast<size_t>(text_.config().n_embd);
  toks.assign(p.tokens.begin() + a, p.tokens.begin() + b);
  emb.clear();
  for (int i = a; i < b; ++i)
    if (const int s = p.slot_of[static_cast<size_t>(i)]; s >= 0)
      emb.insert(emb.end(), embeddings.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(s) * E),
                 embeddings.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(s + 1) * E));
}

// Approximate reuse (--approx-kv): after the first change, unchanged tiles keep their stale K/V
// except a leading fraction, recomputed. Returns the position evaluated up to.
int Watcher::prefill_keeping_stale(const PromptLayout& p, const std::vector<bool>& changed, int pos, FrameResult& r) {
  prof::PhaseScope phase(prof::Phase::Prefill);
  const size_t E = static_cast<size_t>(text_.config().n_embd);
  const size_t tpt = static_cast<size_t>(vision_.config().tokens_per_tile());
  std::vector<int32_t> toks;
  std::vector<float> emb;
  for (size_t t = 0; t + 1 < changed.size(); ++t) {  // the global thumbnail and the tail are recomputed after
    const int first = p.slot_pos[t * tpt], end = p.slot_pos[(t + 1) * tpt - 1] + 1;
    if (end <= pos) continue;
    if (changed[t] || first <= pos) {  // recompute up to the end of this tile
      slice(p, r.embeddings, pos, end, toks, emb);
      session_.eval(toks, emb.data(), emb.size() / E);
      r.tokens_recomputed += end - pos;
    } else {
      const int keep_from = first + static_cast<int>(std::ceil(opt_.approx_kv * (end - first)));
      if (keep_from > pos) {
        slice(p, r.embeddings, pos, keep_from, toks, emb);
        session_.eval(toks, emb.data(), emb.size() / E);
        r.tokens_recomputed += keep_from - pos;
      }
      session_.skip_to(end);
      r.tokens_kept_stale += end - std::max(keep_from, pos);
    }
    pos = end;
  }
  return pos;
}

// The rest of the prompt from `pos`, then the greedy answer.
void Watcher::answer_from(const PromptLayout& p, int pos, double t_prefill_start, FrameResult& r) {
  std::vector<int32_t> toks;
  std::vector<float> emb;
  slice(p, r.embeddings, pos, static_cast<int>(p.tokens.size()), toks, emb);
  // the previous answer as a draft: verified in one batch, exact (generate.h)
  greedy_answer(session_, p.tokens, pos, emb, nullptr, opt_.n_predict, opt_.reuse && have_prev_ ? &prev_result_.answer_tokens : nullptr,
                now_ms() - t_prefill_start, r);
}

void Watcher::remember(const ImageRGB& frame, const FrameResult& r) {
  if (!opt_.reuse) return;
  prev_frame_ = frame;
  prev_result_ = r;
  have_prev_ = true;
}

Divergence Watcher::compare(const FrameResult& a, const FrameResult& full) {
  Divergence dv;
  dv.same_answer = a.answer_tokens == full.answer_tokens;
  const bool emb_same = a.embeddings.size() == full.embeddings.size() &&
                        std::memcmp(a.embeddings.data(), full.embeddings.data(), a.embeddings.size() * sizeof(float)) == 0;
  const bool logits_same = a.next_logits.size() == full.next_logits.size() &&
                           std::memcmp(a.next_logits.data(), full.next_logits.data(), a.next_logits.size() * sizeof(float)) == 0;
  dv.bitwise_equal = emb_same && logits_same && dv.same_answer;
  if (a.embeddings.size() == full.embeddings.size()) {
    double scale = 0;
    for (float v : full.embeddings) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    for (size_t i = 0; i < a.embeddings.size(); ++i)
      dv.emb_max_abs = std::max(dv.emb_max_abs, std::fabs(static_cast<double>(a.embeddings[i]) - full.embeddings[i]));
    dv.emb_max_rel = scale > 0 ? dv.emb_max_abs / scale : 0;
  } else {
    dv.emb_max_abs = dv.emb_max_rel = INFINITY;
  }
  if (a.next_logits.size() == full.next_logits.size() && !a.next_logits.empty()) {
    auto log_softmax = [](const std::vector<float>& l) {
      const double mx = *std::max_element(l.begin(), l.end());
      double s = 0;
      for (float v : l) s += std::exp(v - mx);
      std::vector<double> o(l.size());
      for (size_t i = 0; i < l.size(); ++i) o[i] = l[i] - mx - std::log(s);
      return o;
    };
    const std::vector<double> p = log_softmax(full.next_logits), q = log_softmax(a.next_logits);
    for (size_t i = 0; i < p.size(); ++i) dv.next_token_kl += std::exp(p[i]) * (p[i] - q[i]);
  } else {
    dv.next_token_kl = INFINITY;
  }
  return dv;
}

}  // namespace tessera
