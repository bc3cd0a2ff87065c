// Watching a screen with Qwen3-VL, whose vision encoder sees the whole image at once (global
// attention over every patch): a change anywhere changes every output bit, so per-tile reuse
// cannot be exact as it is for SmolVLM (watcher.h).
//
// Exact reuse (default):
//  - a frame bitwise equal to the previous one returns the previous result;
//  - preprocessed patches equal to the previous ones (a change the resize wiped out) reuse the
//    previous image features;
//  - the KV cache is kept up to the first token, image feature or position that differs;
//  - the same prompt gives the previous greedy answer;
//  - the previous answer is the draft of the new one: verified in one batch (runtime/generate.h).
//
// Approximate reuse (opt-in, measured by --validate):
//  - approx_gate: token gating in the encoder. Only the 2 x 2 merge blocks whose preprocessed
//    patches changed go through the blocks, against every other patch's cached keys and values;
//    the others keep their previous outputs (Qwen3VLVision::encode_gated). Once the blocks gated
//    since the last full encoding pass gate_max_fraction of the image, the next change is
//    encoded in full (the drift of the kept outputs stays bounded).
//  - approx_kv: after the first changed image token, unchanged image tokens keep their stale
//    K/V (computed under the previous frame's context), recomputing only the first `approx_kv`
//    fraction of each unchanged run of tokens; changed tokens, short runs between them, and the
//    text after the image are recomputed (CacheBlend style).
#pragma once
#include <vector>

#include "models/llama/llama.h"
#include "models/qwen3vl/qwen3vl.h"
#include "models/qwen3vl/vision.h"
#include "runtime/session.h"
#include "watch/watcher.h"

namespace tessera {

class Qwen3VLWatcher : public FrameWatcher {
 public:
  Qwen3VLWatcher(const LlamaModel& text, const Qwen3VLVision& vision, Session& session, const WatchOptions& opt);
  FrameResult process(const ImageRGB& frame) override;
  // Bytes held for gating (the encoder's per-block keys and values), 0 without --approx-gate.
  size_t gate_bytes() const { return gate_.bytes(); }

 private:
  void encode(const Qwen3VLPatches& patches, FrameResult& r);
  int exact_prefix(const Qwen3VLPrompt& p, const std::vector<float>& embeddings) const;
  int prefill_keeping_stale(const Qwen3VLPrompt& p, const std::vector<float>& embeddings, int pos, FrameResult& r);
  void eval_range(const Qwen3VLPrompt& p, const std::vector<float>& embeddings, int a, int b);
  void answer_from(const Qwen3VLPrompt& p, const std::vector<float>& embeddings, int pos, double t_prefill_start, FrameResult& r);

  const LlamaModel& text_;
  const Qwen3VLVision& vision_;
  Session& session_;
  WatchOptions opt_;
  Qwen3VL vlm_;
  Qwen3VLVision::GateState gate_;
  std::vector<char> gated_since_full_;  // per merge block: re-encoded by gating since the last full encoding
  Qwen3VLPatches prev_patches_;   // the last encoded frame's patches
  std::vector<float> prev_out_;   // and its image features (tokens x out_row)
  std::vector<int32_t> prev_tokens_;
  std::vector<MropePos> prev_positions_;
  std::vector<float> prev_emb_;   // the last evaluated prompt's image features
  std::vector<int> slot_pos_;     // token index of each image slot of the current prompt
  ImageRGB prev_frame_;
  FrameResult prev_result_;
  bool have_prev_ = false;
};

}  // namespace tessera
