// Watching a screen: one standing question asked of frame after frame, reusing the work that
// the previous frames already did.
//
// Exact reuse (default): a frame bitwise equal to the previous one returns the previous result,
// and a prompt equal to the previous one (tokens and embeddings) the previous greedy answer.
// SmolVLM encodes each 512x512 tile on its own, so a tile whose
// preprocessed pixels are unchanged gets its encoder+connector output from the TileCache; and
// the prompt's KV cache is kept up to the first token or image embedding that differs from the
// previous frame's prompt. Both are bitwise what a full recompute gives, because every kernel
// is batch- and thread-invariant (kernels/attention.h, kernels/kernels.h): a tile's embeddings
// do not depend on the other tiles, and a position's K/V do not depend on how the prompt was
// chunked. Watcher::validate() checks that claim frame by frame.
//
// Approximate reuse (opt-in, each measured by validate()):
//  - approx_global: keep the global thumbnail's encoding while its pixels moved less than a
//    threshold (mean absolute difference, 0..255 per channel).
//  - approx_gate: a tile of which only some 16x16 patches changed is re-encoded for those
//    patches' tokens only, against the other tokens' cached keys and values (Eventful style).
//  - approx_kv: after a changed tile, keep the stale K/V of later unchanged tiles, recomputing
//    only the first `approx_kv` fraction of each such tile's tokens (CacheBlend/VLCache style;
//    the global thumbnail and the question after it are always recomputed).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "image/image.h"
#include "models/smolvlm/idefics3.h"
#include "models/smolvlm/preprocess.h"
#include "models/llama/llama.h"
#include "models/smolvlm/siglip.h"
#include "runtime/session.h"
#include "watch/tile_cache.h"

namespace tessera {

struct WatchOptions {
  std::string question = "What is the user working on?";
  int n_predict = 16;
  bool reuse = true;                   // exact tile and KV-prefix reuse
  size_t cache_bytes = size_t{256} << 20;
  double approx_global = -1;           // < 0: off
  double approx_kv = -1;               // < 0: off; else fraction of tokens recomputed in kept tiles
  bool approx_gate = false;            // token gating inside the encoder for partly changed tiles
  double gate_max_fraction = 0.5;      // above this fraction of changed patches: a full encode
  int gate_positions = 3;              // tile positions whose per-layer K/V are kept (~78 MB each as fp32; ~41 MB packed for the bf16 attention: bf16 and 8-bit paths)
  int64_t max_pixels = 0;              // Qwen3-VL: the resized image's bound (0: the processor's)
};

struct FrameResult {
  std::string answer;
  std::vector<int32_t> answer_tokens;
  int width = 0, height = 0, tiles = 0;
  int tiles_encoded = 0, tiles_reused = 0, tiles_gated = 0;  // gated: counted in tiles_encoded too
  double encoder_work = 0;         // fraction of a full encode's tokens pushed through the encoder
  bool global_kept_approx = false;
  int prompt_tokens = 0, tokens_reused = 0, tokens_recomputed = 0, tokens_kept_stale = 0;
  bool frame_unchanged = false;    // bitwise the previous frame: its result is returned as is
  bool answer_reused = false;      // same prompt as before: the greedy answer is the previous one
  int answer_drafted = 0;          // answer tokens verified in one batch against the previous answer (exact)
  double preprocess_ms = 0, encode_ms = 0, prefill_ms = 0, decode_ms = 0, total_ms = 0;
  std::vector<float> embeddings;   // every image embedding of the prompt, in slot order
  std::vector<float> next_logits;  // logits at the last prompt position
};

// Divergence of a frame from its full recompute.
struct Divergence {
  bool bitwise_equal = false;       // embeddings, next-token logits and answer all identical
  double emb_max_abs = 0, emb_max_rel = 0;
  double next_token_kl = 0;         // KL(full || reused) of the next-token distribution
  bool same_answer = false;
};

// What `tessera watch` drives, for either model family: one frame in, its result out.
class FrameWatcher {
 public:
  virtual ~FrameWatcher() = default;
  virtual FrameResult process(const ImageRGB& frame) = 0;
};

// Helpers both watchers share:
// whether two frames are bitwise equal (size and pixels);
bool same_frame(const ImageRGB& a, const ImageRGB& b);
// the previous frame's result handed back for a bitwise identical frame;
FrameResult unchanged_frame_result(const FrameResult& prev, double ms);
// the previous answer and next-token logits for a prompt of n tokens equal to the previous one
// (greedy decoding is deterministic);
void reuse_answer(const FrameResult& prev, int n, FrameResult& r);
// the greedy answer of the tokens from `pos` of `prompt` (tokens before it counted as seen),
// with `draft` (the previous answer, or null) verified in one batch: answer, tokens, logits,
// prefill and decode times into r.
void greedy_answer(Session& session, const std::vector<int32_t>& prompt, int pos, const std::vector<float>& embeddings,
                   const std::vector<MropePos>* positions, int n_predict, const std::vector<int32_t>* draft,
                   double ms_before, FrameResult& r);

class Watcher : public FrameWatcher {
 public:
  Watcher(const LlamaModel& text, const Idefics3Vision& vision, Session& session, const WatchOptions& opt);

  FrameResult process(const ImageRGB& frame) override;
  const TileCache& cache() const { return cache_; }
  const WatchOptions& options() const { return opt_; }

  // The same frame computed from scratch (fresh session, no caches) and compared.
  static Divergence compare(const FrameResult& reused, const FrameResult& full);

 private:
  // A prompt's tokens and where its embedding slots are (slot_of: -1 for a text token).
  struct PromptLayout {
    std::vector<int32_t> tokens;
    std::vector<int> slot_of, slot_pos;
  };
  static PromptLayout layout(std::vector<int32_t> tokens);
  std::vector<bool> encode_tiles(const PreprocessedImage& pre, FrameResult& r);
  bool encode_tile(int position, const ImageRGB& tile, const float* chw, float* enc, FrameResult& r);
  int exact_prefix(const PromptLayout& p, const std::vector<float>& embeddings) const;
  void slice(const PromptLayout& p, const std::vector<float>& embeddings, int a, int b, std::vector<int32_t>& toks,
             std::vector<float>& emb) const;
  int prefill_keeping_stale(const PromptLayout& p, const std::vector<bool>& changed, int pos, FrameResult& r);
  void answer_from(const PromptLayout& p, int pos, double t_prefill_start, FrameResult& r);
  void remember(const ImageRGB& frame, const FrameResult& r);
  struct GateEntry;
  GateEntry* gate_entry(int position, const ImageRGB& tile);
  const LlamaModel& text_;
  const Idefics3Vision& vision_;
  Session& session_;
  WatchOptions opt_;
  Idefics3 vlm_;
  TileCache cache_;
  std::vector<int32_t> prev_tokens_;
  std::vector<float> prev_emb_;
  ImageRGB prev_global_;
  std::vector<float> prev_global_out_;
  // the last frame and its result: an identical frame, or an identical prompt, has an identical
  // greedy answer (exact)
  struct GateEntry {
    int position = -1;
    ImageRGB tile;                       // the tile `state` describes
    Idefics3Vision::TileState state;     // empty until the position changed once
    uint64_t used = 0;
  };
  std::vector<GateEntry> gate_;
  uint64_t gate_clock_ = 0;
  ImageRGB prev_frame_;
  FrameResult prev_result_;
  // incremental preprocessing (with reuse): the state of the last preprocessed frame, which is
  // pre_frame_; the next frame resamples only from its first to its last changed row
  PreprocessState pre_state_;
  ImageRGB pre_frame_;
  bool have_prev_ = false;
};

}  // namespace tessera
