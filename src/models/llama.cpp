#include "models/llama.h"

#include "core/error.h"

namespace tessera {

namespace {

const GgufTensor& need_tensor(const GgufFile& f, const std::string& name, std::vector<uint64_t> dims) {
  const GgufTensor* t = f.find_tensor(name);
  if (!t) fail("%s: missing tensor '%s'", f.name().c_str(), name.c_str());
  if (t->dims != dims) {
    std::string want, got;
    for (auto d : dims) want += (want.empty() ? "" : "x") + std::to_string(d);
    for (auto d : t->dims) got += (got.empty() ? "" : "x") + std::to_string(d);
    fail("%s: tensor '%s' has shape %s, expected %s", f.name().c_str(), name.c_str(), got.c_str(), want.c_str());
  }
  if (!info(t->type).computable)
    fail("%s: tensor '%s' has type %s, which this engine cannot compute with yet", f.name().c_str(),
         name.c_str(), dtype_name(t->type));
  return *t;
}

WeightMatrix matrix(const GgufFile& f, const std::string& name, int64_t rows, int64_t cols) {
  const GgufTensor& t = need_tensor(f, name, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)});
  WeightMatrix w;
  w.type = t.type;
  w.rows = rows;
  w.cols = cols;
  w.data = t.data;
  w.row_stride = row_bytes(t.type, static_cast<uint64_t>(cols));
  return w;
}

std::vector<float> vec(const GgufFile& f, const std::string& name, int64_t n) {
  const GgufTensor& t = need_tensor(f, name, {static_cast<uint64_t>(n)});
  std::vector<float> v(static_cast<size_t>(n));
  dequantize_row(t.type, t.data, v.data(), n);
  return v;
}

}  // namespace

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = GgufFile::open(path);
  const GgufFile& f = *m->file_;
  const std::string arch = f.get_string("general.architecture");
  if (arch != "llama")
    fail("%s: architecture '%s' is not supported (expected 'llama')", path.c_str(), arch.c_str());
  LlamaConfig& c = m->cfg_;
  c.n_embd = static_cast<int>(f.get_int("llama.embedding_length", 1, 65536));
  c.n_layer = static_cast<int>(f.get_int("llama.block_count", 1, 1024));
  c.n_head = static_cast<int>(f.get_int("llama.attention.head_count", 1, 1024));
  c.n_head_kv = static_cast<int>(f.get_int("llama.attention.head_count_kv", 1, c.n_head, c.n_head));
  c.n_ff = static_cast<int>(f.get_int("llama.feed_forward_length", 1, 1 << 20));
  c.n_ctx_train = static_cast<int>(f.get_int("llama.context_length", 1, 1 << 24, 2048));
  c.rope_base = static_cast<float>(f.get_float("llama.rope.freq_base", 1.0, 1e12, 10000.0));
  c.rms_eps = static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon", 1e-12, 1.0, 1e-5));
  if (c.n_embd % c.n_head != 0) fail("%s: embedding length %d is not a multiple of %d heads", path.c_str(), c.n_embd, c.n_head);
  if (c.n_head % c.n_head_kv != 0) fail("%s: %d heads are not a multiple of %d KV heads", path.c_str(), c.n_head, c.n_head_kv);
  c.head_dim = c.n_embd / c.n_head;
  if (c.head_dim % 2 != 0) fail("%s: head dimension %d is odd", path.c_str(), c.head_dim);
  const int64_t rope_dims = f.get_int("llama.rope.dimension_count", 1, 1 << 16, c.head_dim);
  if (rope_dims != c.head_dim) fail("%s: partial RoPE (%lld of %d dims) is not supported", path.c_str(), static_cast<long long>(rope_dims), c.head_dim);

  m->tokenizer_ = std::make_unique<Tokenizer>(f);
  c.n_vocab = m->tokenizer_->n_vocab();

  const int64_t E = c.n_embd, KV = static_cast<int64_t>(c.n_head_kv) * c.head_dim, FF = c.n_ff;
  m->tok_embd_ = matrix(f, "token_embd.weight", c.n_vocab, E);
  if (f.find_tensor("output.weight")) {
    m->output_ = matrix(f, "output.weight", c.n_vocab, E);
  } else {
    m->output_ = m->tok_embd_;
    c.tied_embeddings = true;
  }
  m->output_norm_ = vec(f, "output_norm.weight", E);
  m->layers_.resize(static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LlamaLayer& L = m->layers_[static_cast<size_t>(i)];
    L.attn_norm = vec(f, p + "attn_norm.weight", E);
    L.ffn_norm = vec(f, p + "ffn_norm.weight", E);
    L.wq = matrix(f, p + "attn_q.weight", E, E);
    L.wk = matrix(f, p + "attn_k.weight", KV, E);
    L.wv = matrix(f, p + "attn_v.weight", KV, E);
    L.wo = matrix(f, p + "attn_output.weight", E, E);
    L.w_gate = matrix(f, p + "ffn_gate.weight", FF, E);
    L.w_up = matrix(f, p + "ffn_up.weight", FF, E);
    L.w_down = matrix(f, p + "ffn_down.weight", E, FF);
  }
  return m;
}

void LlamaModel::embed(int32_t token, float* out) const {
  if (token < 0 || token >= cfg_.n_vocab) fail("token id %d is out of range [0, %d)", token, cfg_.n_vocab);
  dequantize_row(tok_embd_.type, tok_embd_.data + static_cast<size_t>(token) * tok_embd_.row_stride, out, cfg_.n_embd);
}

size_t LlamaModel::weight_bytes() const {
  size_t n = 0;
  for (const auto& t : file_->tensors()) n += t.n_bytes;
  return n;
}

}  // namespace tessera
