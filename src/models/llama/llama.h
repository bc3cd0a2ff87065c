// Llama-family decoder read from a GGUF file: RMSNorm, RoPE, grouped-query attention, SwiGLU,
// optionally tied embeddings. SmolLM2 (GGUF arch "llama") and Qwen3 / Qwen3-VL's text model
// ("qwen3", "qwen3vl": RMSNorm of each head's q and k before RoPE, head size set on its own,
// halves rotated), and Gemma 3's text model ("gemma3": scaled embeddings, post-norms, GeGLU,
// sliding-window layers; contexts no longer than the window). Weights stay in the mmap.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "text/tokenizer.h"
#include "kernels/kernels.h"
#include "models/tensor_source.h"

namespace tessera {

// A prompt position whose input is a row of embeddings handed over with the tokens (an image
// feature from a vision tower) rather than a token id. The model layer defines it; the
// runtime's Session fills such positions (Session::eval with embeddings).
constexpr int32_t kEmbeddingSlot = -1;

// A prompt position's multimodal rotary position (Qwen3-VL: time, row, column; a text token has
// all three equal). The model layer defines it; Session::eval takes one per token.
struct MropePos {
  int32_t t = 0, h = 0, w = 0;
  bool operator==(const MropePos&) const = default;
};

struct LlamaConfig {
  // head_dim need not be n_embd / n_head (Qwen3: 128 with any width); q and the attention
  // output have n_head * head_dim columns (q_dim())
  int n_vocab = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0;
  int n_ctx_train = 0;
  float rope_base = 10000.0f, rms_eps = 1e-5f;
  bool tied_embeddings = false;
  bool add_bos = false;  // the tokenizer puts BOS before a text (GGUF tokenizer.ggml.add_bos_token)
  // Hugging Face checkpoints rotate halves (x[i], x[i + d/2]); GGUF files from llama.cpp's
  // converter have Q/K rows permuted so adjacent pairs rotate. Same maths, different layout.
  bool rope_neox = false;
  bool qk_norm = false;  // Qwen3: RMSNorm over each head of q and k (own weights) before RoPE
  // Qwen3-VL: image positions bring this many extra feature rows, added to the outputs of the
  // first layers (DeepStack); 0 elsewhere
  int deepstack_layers = 0;
  // Qwen3-VL: rotary pairs given to the time, row and column positions (interleaved layout,
  // rope_angles_mrope); all zero for one-dimensional positions
  int mrope[3] = {0, 0, 0};
  // Gemma 3: token embeddings times embd_scale (sqrt(n_embd)); each sublayer's output RMS-normed
  // (post_attention_norm, post_ffw_norm) before its residual add; a GELU-tanh gated FFN (GeGLU);
  // queries scaled by attn_scale (0: 1/sqrt(head_dim)). Layer l attends over a sliding window of
  // swa_window keys, rotated with rope_base_swa, unless l % swa_pattern == swa_pattern - 1 (global,
  // rope_base). The attention kernel has no window, so a session's context is capped at swa_window,
  // where a windowed layer attends exactly like a causal one.
  float embd_scale = 1.0f;
  bool post_norms = false;
  bool gelu_ffn = false;
  float attn_scale = 0.0f;
  int swa_window = 0, swa_pattern = 0;  // 0: no sliding-window layers
  float rope_base_swa = 10000.0f;
  bool is_swa(int l) const { return swa_window > 0 && swa_pattern > 0 && l % swa_pattern < swa_pattern - 1; }
  int q_dim() const { return n_head * head_dim; }
  // floats per embedding row handed to Session::eval: the token's, then one per DeepStack layer
  int n_embd_inp() const { return n_embd * (1 + deepstack_layers); }
};

// The configuration a text GGUF's metadata gives (architectures llama, qwen3, qwen3vl, gemma3), every number
// range-checked; n_vocab is left 0 (the tokenizer's). Throws Error.
LlamaConfig read_llama_config(const GgufFile& f, const std::string& path);

struct LlamaLayer {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> q_norm, k_norm;  // head_dim each, when qk_norm
  std::vector<float> post_attn_norm, post_ffn_norm;  // n_embd each, when post_norms
  WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

class LlamaModel {
 public:
  static std::unique_ptr<LlamaModel> load(const std::string& path);  // GGUF; throws tessera::Error
  // The same, its weights read from the source `make_source` builds over the file (e.g. a
  // RequantizedSource: models/requantized_source.h).
  using SourceMaker = std::function<std::shared_ptr<const TensorSource>(const GgufFile&)>;
  static std::unique_ptr<LlamaModel> load(const std::string& path, const SourceMaker& make_source);
  // Weights named as Hugging Face saves them under `prefix` ("model." for LlamaForCausalLM,
  // "model.text_model." inside Idefics3); `src` must outlive the model.
  static std::unique_ptr<LlamaModel> from_hf(const LlamaConfig& cfg, std::unique_ptr<Tokenizer> tok,
                                             std::shared_ptr<const TensorSource> src, const std::string& prefix);

  const LlamaConfig& config() const { return cfg_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::vector<LlamaLayer>& layers() const { return layers_; }
  const WeightMatrix& token_embd() const { return tok_embd_; }
  const WeightMatrix& output() const { return output_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::string& chat_template() const { return chat_template_; }
  size_t weight_bytes() const;
  // Puts `w` in place of the matrix a GGUF tensor name loads into (token_embd.weight, which a
  // tied head shares, output.weight, blk.N.attn_q.weight ...) and returns the one it replaces;
  // fails for another name. How one tensor's sensitivity to quantization is measured without
  // writing a file (runtime/mixed_precision.h). `w`'s bytes must outlive its use. A Session made
  // before reads it unpacked (its repacked copies are found by the old data pointer).
  WeightMatrix replace_matrix(const std::string& gguf_name, const WeightMatrix& w);

  void embed(int32_t token, float* out) const;  // checks the id range
  // A hint that [p, p + n) of the weights has been copied elsewhere (repacked): a file-backed
  // model drops those pages from memory; they stay readable (faulted back in from the file).
  size_t release_pages(const uint8_t* p, size_t n) const { return source_ ? source_->release(p, n) : 0; }

 private:
  LlamaModel() = default;
  void load_weights(const TensorSource& src, bool gguf_names, const std::string& prefix);
  void check_config() const;
  std::unique_ptr<GgufFile> file_;
  std::shared_ptr<const TensorSource> source_;
  std::string chat_template_;
  std::unique_ptr<Tokenizer> tokenizer_;
  LlamaConfig cfg_;
  std::vector<LlamaLayer> layers_;
  WeightMatrix tok_embd_, output_;
  std::vector<float> output_norm_;
};

}  // namespace tessera
