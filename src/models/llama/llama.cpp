#include "models/llama/llama.h"

#include <cmath>

#include "core/error.h"
#include "models/gguf_source.h"

namespace tessera {

void LlamaModel::check_config() const {
  const LlamaConfig& c = cfg_;
  if (c.n_embd < 1 || c.n_embd > 65536 || c.n_layer < 1 || c.n_layer > 1024 || c.n_ff < 1 || c.n_ff > (1 << 20))
    fail("text model: sizes out of range");
  if (c.n_head < 1 || c.n_head > 1024 || c.n_head_kv < 1 || c.n_head_kv > c.n_head) fail("text model: head counts out of range");
  if (c.n_head % c.n_head_kv != 0) fail("text model: %d heads are not a multiple of %d KV heads", c.n_head, c.n_head_kv);
  if (c.head_dim < 2 || c.head_dim > 1024 || c.head_dim % 2 != 0) fail("text model: head dimension %d is odd or out of range", c.head_dim);
  if (!(c.rope_base >= 1.0f && c.rope_base < 1e12f) || !(c.rms_eps > 0 && c.rms_eps < 1)) fail("text model: rope base or norm epsilon out of range");
  if (c.n_ctx_train < 1 || c.n_ctx_train > (1 << 24)) fail("text model: context length out of range");
  if (c.swa_window < 0 || c.swa_window > (1 << 24) || c.swa_pattern < 0 || c.swa_pattern > 1024 || !(c.rope_base_swa >= 1.0f && c.rope_base_swa < 1e12f))
    fail("text model: sliding-window settings out of range");
  if (!(c.embd_scale > 0 && c.embd_scale < 1e6f) || !(c.attn_scale >= 0 && c.attn_scale < 1e3f)) fail("text model: embedding or attention scale out of range");
}

void LlamaModel::load_weights(const TensorSource& s, bool g, const std::string& p) {
  const LlamaConfig& c = cfg_;
  const int64_t E = c.n_embd, QD = c.q_dim(), KV = static_cast<int64_t>(c.n_head_kv) * c.head_dim, FF = c.n_ff;
  auto u = [](int64_t x) { return static_cast<uint64_t>(x); };
  // as stored where the 8-bit kernels take the type (Q3_K, IQ4_NL): Session packs their panels from the
  // file, or makes the held copy itself on fp32 activations
  constexpr auto kStored = TensorSource::Form::Stored;
  tok_embd_ = s.matrix(g ? "token_embd.weight" : p + "embed_tokens.weight", c.n_vocab, E, kStored);
  const std::string out_name = g ? "output.weight" : "lm_head.weight";
  if (!cfg_.tied_embeddings && s.find(out_name)) {
    output_ = s.matrix(out_name, c.n_vocab, E, kStored);
  } else {
    output_ = tok_embd_;
    cfg_.tied_embeddings = true;
  }
  output_norm_ = s.floats(g ? "output_norm.weight" : p + "norm.weight", {u(E)});
  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string b = g ? "blk." + std::to_string(i) + "." : p + "layers." + std::to_string(i) + ".";
    auto n = [&](const char* gguf, const char* hf) { return b + (g ? gguf : hf); };
    LlamaLayer& L = layers_[static_cast<size_t>(i)];
    L.attn_norm = s.floats(n("attn_norm.weight", "input_layernorm.weight"), {u(E)});
    L.ffn_norm = s.floats(n("ffn_norm.weight", "post_attention_layernorm.weight"), {u(E)});
    if (c.qk_norm) {
      L.q_norm = s.floats(n("attn_q_norm.weight", "self_attn.q_norm.weight"), {u(c.head_dim)});
      L.k_norm = s.floats(n("attn_k_norm.weight", "self_attn.k_norm.weight"), {u(c.head_dim)});
    }
    if (c.post_norms) {  // GGUF only (read_llama_config); llama.cpp's converter already added Gemma's + 1
      L.post_attn_norm = s.floats(n("post_attention_norm.weight", "post_attention_layernorm.weight"), {u(E)});
      L.post_ffn_norm = s.floats(n("post_ffw_norm.weight", "post_feedforward_layernorm.weight"), {u(E)});
    }
    L.wq = s.matrix(n("attn_q.weight", "self_attn.q_proj.weight"), QD, E, kStored);
    L.wk = s.matrix(n("attn_k.weight", "self_attn.k_proj.weight"), KV, E, kStored);
    L.wv = s.matrix(n("attn_v.weight", "self_attn.v_proj.weight"), KV, E, kStored);
    L.wo = s.matrix(n("attn_output.weight", "self_attn.o_proj.weight"), E, QD, kStored);
    L.w_gate = s.matrix(n("ffn_gate.weight", "mlp.gate_proj.weight"), FF, E, kStored);
    L.w_up = s.matrix(n("ffn_up.weight", "mlp.up_proj.weight"), FF, E, kStored);
    L.w_down = s.matrix(n("ffn_down.weight", "mlp.down_proj.weight"), E, FF, kStored);
  }
}

LlamaConfig read_llama_config(const GgufFile& f, const std::string& path) {
  const std::string arch = f.get_string("general.architecture");
  // Qwen3-VL's text model ("qwen3vl") is Qwen3 with multimodal rotary positions; for text
  // positions (t = h = w) those are the ordinary NeoX rotation.
  const bool qwen3 = arch == "qwen3" || arch == "qwen3vl";
  const bool gemma3 = arch == "gemma3";
  if (arch != "llama" && !qwen3 && !gemma3)
    fail("%s: architecture '%s' is not supported (llama, qwen3, qwen3vl, gemma3)", path.c_str(), arch.c_str());
  const std::string a = arch + ".";
  LlamaConfig c;
  c.n_embd = static_cast<int>(f.get_int(a + "embedding_length", 1, 65536));
  c.n_layer = static_cast<int>(f.get_int(a + "block_count", 1, 1024));
  c.n_head = static_cast<int>(f.get_int(a + "attention.head_count", 1, 1024));
  c.n_head_kv = static_cast<int>(f.get_int(a + "attention.head_count_kv", 1, c.n_head, c.n_head));
  c.n_ff = static_cast<int>(f.get_int(a + "feed_forward_length", 1, 1 << 20));
  c.n_ctx_train = static_cast<int>(f.get_int(a + "context_length", 1, 1 << 24, 2048));
  c.rope_base = static_cast<float>(f.get_float(a + "rope.freq_base", 1.0, 1e12, 10000.0));
  c.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-12, 1.0, 1e-5));
  if (c.n_head % c.n_head_kv != 0) fail("%s: %d heads are not a multiple of %d KV heads", path.c_str(), c.n_head, c.n_head_kv);
  if (!qwen3 && !gemma3 && c.n_embd % c.n_head != 0) fail("%s: embedding length %d is not a multiple of %d heads", path.c_str(), c.n_embd, c.n_head);
  c.head_dim = static_cast<int>(f.get_int(a + "attention.key_length", 2, 1024, c.n_embd / c.n_head));
  if (f.get_int(a + "attention.value_length", 2, 1024, c.head_dim) != c.head_dim)
    fail("%s: value heads of another size than key heads are not supported", path.c_str());
  if (c.head_dim % 2 != 0) fail("%s: head dimension %d is odd", path.c_str(), c.head_dim);
  const int64_t rope_dims = f.get_int(a + "rope.dimension_count", 1, 1 << 16, c.head_dim);
  if (rope_dims != c.head_dim) fail("%s: partial RoPE (%lld of %d dims) is not supported", path.c_str(), static_cast<long long>(rope_dims), c.head_dim);
  if (qwen3) {
    c.rope_neox = true;  // llama.cpp's converter leaves Qwen's q/k rows as Hugging Face has them
    c.qk_norm = true;
    c.deepstack_layers = static_cast<int>(f.get_int(a + "n_deepstack_layers", 0, c.n_layer, 0));
    if (const GgufValue* sec = f.find(a + "rope.dimension_sections")) {
      if (sec->type != GgufType::ARRAY || sec->count < 3 || sec->count > 4 || gguf_scalar_size(sec->elem) == 0)
        fail("%s: %srope.dimension_sections must be 3 or 4 integers", path.c_str(), a.c_str());
      int64_t total = 0;
      for (int i = 0; i < 3; ++i) {
        const int64_t v = sec->int_at(static_cast<size_t>(i));
        if (v < 0 || v > c.head_dim / 2) fail("%s: rope section %lld is out of range", path.c_str(), static_cast<long long>(v));
        c.mrope[i] = static_cast<int>(v);
        total += v;
      }
      if (total > c.head_dim / 2) fail("%s: rope sections cover %lld pairs of %d", path.c_str(), static_cast<long long>(total), c.head_dim / 2);
    }
  }
  if (gemma3) {  // as llama.cpp's gemma3 graph (src/models/gemma3.cpp)
    c.rope_neox = true;
    c.qk_norm = true;
    c.post_norms = true;
    c.gelu_ffn = true;
    c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
    // Gemma 3 27B scales queries by 1/sqrt(n_embd / n_head), the others by 1/sqrt(head_dim)
    if (c.n_layer == 62) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
    if (f.get_float(a + "final_logit_softcapping", 0.0, 1e6, 0.0) != 0.0)
      fail("%s: final logit soft-capping is not supported", path.c_str());
    c.swa_window = static_cast<int>(f.get_int(a + "attention.sliding_window", 0, 1 << 24, 0));
    if (c.swa_window > 0) {
      if (const GgufValue* pat = f.find(a + "attention.sliding_window_pattern"); pat && !pat->is_integer())
        fail("%s: a per-layer sliding-window pattern is not supported", path.c_str());
      c.swa_pattern = static_cast<int>(f.get_int(a + "attention.sliding_window_pattern", 1, 1024, 6));
      c.rope_base_swa = static_cast<float>(f.get_float(a + "rope.freq_base_swa", 1.0, 1e12, 10000.0));
    }
  }
  return c;
}

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path) { return load(path, SourceMaker()); }

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, const SourceMaker& make_source) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = GgufFile::open(path);
  const GgufFile& f = *m->file_;
  m->cfg_ = read_llama_config(f, path);
  LlamaConfig& c = m->cfg_;
  m->tokenizer_ = std::make_unique<Tokenizer>(f);
  c.n_vocab = m->tokenizer_->n_vocab();
  m->chat_template_ = f.get_string("tokenizer.chat_template", "");
  m->cfg_.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", false);
  m->check_config();
  std::shared_ptr<const TensorSource> src;
  if (make_source) src = make_source(f);
  else src = std::make_shared<GgufTensorSource>(f);
  m->load_weights(*src, true, "");
  m->source_ = src;
  return m;
}

std::unique_ptr<LlamaModel> LlamaModel::from_hf(const LlamaConfig& cfg, std::unique_ptr<Tokenizer> tok,
                                                std::shared_ptr<const TensorSource> src, const std::string& prefix) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->cfg_ = cfg;
  m->cfg_.rope_neox = true;
  if (m->cfg_.head_dim == 0) m->cfg_.head_dim = cfg.n_head > 0 ? cfg.n_embd / cfg.n_head : 0;
  m->check_config();
  if (tok->n_vocab() > m->cfg_.n_vocab)
    fail("%s: the tokenizer has %d tokens but the model only %d embeddings", src->describe().c_str(), tok->n_vocab(), m->cfg_.n_vocab);
  m->tokenizer_ = std::move(tok);
  m->load_weights(*src, false, prefix);
  m->source_ = std::move(src);
  return m;
}

void LlamaModel::embed(int32_t token, float* out) const {
  if (token < 0 || token >= cfg_.n_vocab) fail("token id %d is out of range [0, %d)", token, cfg_.n_vocab);
  dequantize_row(tok_embd_.type, tok_embd_.data + static_cast<size_t>(token) * tok_embd_.row_stride, out, cfg_.n_embd);
}

WeightMatrix LlamaModel::replace_matrix(const std::string& name, const WeightMatrix& w) {
  WeightMatrix* m = nullptr;
  if (name == "token_embd.weight") m = &tok_embd_;
  else if (name == "output.weight" && !cfg_.tied_embeddings) m = &output_;
  else if (name.rfind("blk.", 0) == 0) {
    const size_t dot = name.find('.', 4);
    const std::string idx = dot == std::string::npos ? "" : name.substr(4, dot - 4);
    const int l = !idx.empty() && idx.size() < 5 && idx.find_first_not_of("0123456789") == std::string::npos ? std::stoi(idx) : -1;
    if (l >= 0 && l < cfg_.n_layer) {
      LlamaLayer& L = layers_[static_cast<size_t>(l)];
      const std::string kind = name.substr(dot + 1);
      for (auto [k, p] : {std::pair{"attn_q.weight", &L.wq}, {"attn_k.weight", &L.wk}, {"attn_v.weight", &L.wv}, {"attn_output.weight", &L.wo},
                          {"ffn_gate.weight", &L.w_gate}, {"ffn_up.weight", &L.w_up}, {"ffn_down.weight", &L.w_down}})
        if (kind == k) m = p;
    }
  }
  if (!m) fail("'%s' is not a matrix of this model", name.c_str());
  if (w.rows != m->rows || w.cols != m->cols) fail("'%s': a %lldx%lld matrix cannot replace a %lldx%lld one", name.c_str(),
                                                   static_cast<long long>(w.rows), static_cast<long long>(w.cols),
                                                   static_cast<long long>(m->rows), static_cast<long long>(m->cols));
  const WeightMatrix old = *m;
  *m = w;
  if (m == &tok_embd_ && cfg_.tied_embeddings) output_ = w;
  return old;
}

size_t LlamaModel::weight_bytes() const {
  size_t n = 0;
  for (const auto& t : file_->tensors()) n += t.n_bytes;
  return n;
}

}  // namespace tessera
