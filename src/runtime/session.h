// A decoding session: the KV cache and every activation buffer, allocated once up front,
// plus the forward pass over a batch of tokens. Steady-state decoding allocates nothing.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/huge_page_arena.h"
#include "core/thread_pool.h"
#include "core/zeroed_buffer.h"
#include "kernels/attention.h"
#include "kernels/q8_panels.h"
#include "models/llama/llama.h"

namespace tessera {

struct SessionOptions {
  // KV cache capacity in tokens (clamped to the model's training context, and for a model with
  // sliding-window layers to the window: LlamaConfig::swa_window)
  int n_ctx = 4096;
  int n_batch = 512;   // tokens per forward pass; longer prompts are split
  int n_threads = 0;   // 0: all cores
  DType kv_type = DType::F16;  // KV cache element type: F16 (default, as llama.cpp), F32, BF16, I8 (q8) or Q4_0 (q4)
  // Quantize the inputs of quantized matrices to 8 bits per block of 32, as ggml's CPU backend
  // does (W4A8/W8A8): llama.cpp's numerics, and the default since 2026-12-05 (1.5-2.5x faster
  // prefill and decode for a mean KL divergence of ~1e-3 from the fp32 path; docs/numerics.md).
  // Off (--f32-activations): fp32 activations, which track the float64 reference closer. Float
  // matrices (F32/F16/BF16) take fp32 activations either way.
  bool q8_activations = true;
  // With the q4 cache and head_dim a multiple of 64: rotate q, k and v by a Walsh-Hadamard matrix
  // before caching and the output back, as llama.cpp does for a quantized cache
  // (kernels/attention.h, kv_rotation_k). Off: plain q4_0 of the raw K/V (LLAMA_ATTN_ROT_DISABLE=1).
  bool kv_rotation = true;
};

// The KV cache type a user names ("f16", "f32", "bf16", "q8", "q4" — or "q4_0", llama.cpp's
// name), for the CLI and the C API alike; kv_type_choices() lists every accepted name.
DType kv_type_from_name(const std::string& name);
const std::vector<std::string>& kv_type_choices();
const std::string& kv_type_names();  // the choices joined with ", ", for messages

class Session {
 public:
  Session(const LlamaModel& model, const SessionOptions& opt);

  // Appends tokens at positions n_past().. and leaves the last token's logits in logits().
  void eval(const std::vector<int32_t>& tokens);
  // Like eval, but every token equal to kEmbeddingSlot takes the next row of `embeddings`
  // (n_embd_inp() floats each: the embedding, then one row per DeepStack layer, added to that
  // layer's output) instead of a token embedding: how image features enter the prompt.
  // `positions` (one per token), when given, are the tokens' multimodal rotary positions (the
  // model's mrope sections); the tokens after them continue from the largest position + 1.
  void eval(const std::vector<int32_t>& tokens, const float* embeddings, size_t n_embeddings,
            const std::vector<MropePos>* positions = nullptr);
  // The same, calling on_logits(i, logits) for every token i >= logits_from (a prompt's last
  // token and a draft answer after it, evaluated in one pass).
  void eval(const std::vector<int32_t>& tokens, const float* embeddings, size_t n_embeddings,
            const std::vector<MropePos>* positions, size_t logits_from,
            const std::function<void(size_t, const float*)>& on_logits);
  // Like eval, but calls on_logits(i, logits) for every token i of `tokens`.
  void eval_all(const std::vector<int32_t>& tokens,
                const std::function<void(size_t, const float*)>& on_logits);

  const float* logits() const { return logits_.data(); }
  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  void truncate(int n);  // forget cached positions >= n
  // Moves n_past forward to n over positions whose K/V an earlier eval wrote and a truncate
  // only hid: they are kept as they are, stale with respect to anything recomputed before them
  // (approximate KV reuse). n must not exceed the positions ever written.
  void skip_to(int n);
  int n_filled() const { return n_filled_; }
  const LlamaModel& model() const { return model_; }
  ThreadPool& pool() { return pool_; }
  size_t kv_bytes() const { return k_cache_.size() + v_cache_.size(); }
  // Bytes of the model file whose pages were given back once repacked (their copies, the panels,
  // are on the heap): a memory plan counts the file less these.
  size_t released_file_bytes() const { return released_file_bytes_; }
  // The K/V of positions [0, n) (n <= n_past()) copied out, e.g. a standing prompt prefix, and
  // copied back after other prompts overwrote them: n_past becomes n, as if they had been
  // evaluated again (the same bytes). The saved form is this session's layout.
  size_t prefix_bytes(int n) const;
  void save_prefix(int n, std::vector<uint8_t>& out) const;
  void restore_prefix(int n, const std::vector<uint8_t>& saved);
  // Called after each layer of every batch with the batch's first position and its hidden states
  // (n rows of n_embd; the residual stream after the layer): for per-layer divergence (eval).
  // Empty: none (the default; no cost).
  using LayerHook = std::function<void(int layer, int pos0, int n, const float* hidden)>;
  void set_layer_hook(LayerHook hook) { layer_hook_ = std::move(hook); }

 private:
  // One batch of n tokens through the model: check_batch, embed, then per layer attention_block
  // and ffn_block, then output_logits. Each step reads and writes the preallocated buffers.
  // Logits are computed for batch rows >= first_logits (clamped: at least the last row).
  void forward(const int32_t* tokens, int n, int first_logits,
               const std::function<void(size_t, const float*)>* on_logits, size_t base,
               const float* embeddings = nullptr, const MropePos* positions = nullptr);
  // The rotary position of cache slot p for a token without a given position.
  int64_t rope_position(int p) const;
  void check_batch(const int32_t* tokens, int n, const float* embeddings) const;
  void note_memory() const;
  void embed(const int32_t* tokens, int n, const float* embeddings);
  // x += attention(rms_norm(x + the previous layer's output)) for layer l, positions n_past_..+n;
  // the residual add of the layer's output is left to the next norm (tmp_).
  void attention_block(int l, int n);
  static constexpr int kPrefetchKvRows = 4;  // steps this short prefetch the KV slots they store into
  void ffn_block(int l, int n);
  void post_norm(const std::vector<float>& w, int n);
  void output_logits(int n, int first, const std::function<void(size_t, const float*)>* on_logits, size_t base);
  // y = W x for n rows of x (row length W.cols, stride xs): fp32 or 8-bit activations.
  void linear(const WeightMatrix& w, const float* x, int n, int64_t xs, float* y, int64_t ys, bool reuse_quantized,
              const char* what);
  // Several linear() on the same x (q, k, v; gate, up): with 8-bit activations and one weight
  // type, x is quantized once and the matrices share one pass of the pool (matmul_q8_group).
  struct LinearOut {
    const WeightMatrix* w;
    float* y;
    int64_t ys;
    const char* what;
  };
  void linear_group(std::initializer_list<LinearOut> outs, const float* x, int n, int64_t xs, const char* what);

  const LlamaModel& model_;
  ThreadPool pool_;
  int n_ctx_, n_batch_;
  int n_past_ = 0;
  int n_filled_ = 0;  // positions with K/V written (>= n_past_)
  DType kv_type_;
  size_t kv_row_;                           // bytes of one kv head's V row (kernels/attention.h)
  size_t k_tile_;                           // bytes of one kv head's tile of 16 K rows
  int k_rot_ = 0, v_rot_ = 0;               // Hadamard block sizes for q/k and v/output (0: none)
  size_t k_tiles() const { return (static_cast<size_t>(n_ctx_) + kKvTile - 1) / kKvTile; }
  size_t k_head_bytes() const { return k_tiles() * k_tile_; }                   // one kv head's K tiles, a layer
  size_t v_head_bytes() const { return static_cast<size_t>(n_ctx_) * kv_row_; }  // one kv head's V rows, a layer
  // f(K offset, K bytes, V offset, V bytes) for each (layer, kv head)'s run of positions [0, n)
  template <class F>
  void for_each_prefix_run(int n, F f) const;
  bool q8_act_;
  // sized for n_ctx, resident only as far as positions are written (core/zeroed_buffer.h)
  // Each kv head's positions contiguous, so decode's item for a kv head reads one stream of K tiles
  // and one of V rows (positions outer, heads inner made them 2 KiB runs 6 KiB apart and 128-byte
  // rows 384 bytes apart for SmolLM2: its decode attention at 900 positions took 1.3-1.8x longer)
  ZeroedBuffer k_cache_;                    // [layer][kv head][pos / 16] tiles of 16 positions
  ZeroedBuffer v_cache_;                    // [layer][kv head][pos] rows of kv_type_
  std::vector<BlockQ8_1> xq_;               // quantized activations (q8_act_)
  // The weights repacked at construction, by their GGUF data pointer: into q8 panels (q8_act_), or
  // for the AVX-512 and AVX2 fp32-activation kernels into decode panels (kernels/decode_panels.h)
  HugePageArena packed_arena_;  // holds packed_'s panels, so it is declared (and outlives them) first
  std::unordered_map<const uint8_t*, PackedWeights> packed_;
  // held copies (Q3_K as Q6_K, IQ4_NL as Q8_0 on fp32 activations) whose decode panels are in packed_
  std::vector<std::unique_ptr<uint8_t, void (*)(void*)>> held_;
  size_t packed_bytes_ = 0;
  size_t released_file_bytes_ = 0;
  std::vector<float> x_, xn_, q_, k_, v_, att_, tmp_, gate_, up_, logits_;
  std::vector<float> rope_cs_;  // RoPE cos/sin of the batch's positions (head_dim per token)
  std::vector<float> rope_cs_swa_;  // the same with the sliding-window layers' base (swa_window)
  // Where multimodal positions ran ahead of (or behind) the cache slots: from slot `since` on, a
  // token's rotary position is its slot + offset (transformers' rope_deltas); the latest last.
  struct RopeOffset {
    int since, offset;
  };
  std::vector<RopeOffset> rope_offsets_;
  LayerHook layer_hook_;
  std::vector<float> hook_rows_;  // x + the layer's output, for the hook
  std::vector<const float*> deepstack_rows_;  // per batch token: its DeepStack rows, or null
  static constexpr int kLogitRows = 32;  // rows of logits computed at once when all are wanted
};

}  // namespace tessera
