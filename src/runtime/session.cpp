#include "runtime/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/fp16.h"
#include "core/preempt.h"
#include "core/prefetch.h"
#include "kernels/attention.h"
#include "kernels/decode_panels.h"
#include "kernels/elementwise.h"
#include "kernels/exact_repack.h"
#include "kernels/kernel_table.h"
#include "profile/profiler.h"

namespace tessera {

namespace {
// Every accepted KV cache type name; q4_0 is llama.cpp's spelling of q4.
struct KvTypeName {
  const char* name;
  DType type;
};
constexpr KvTypeName kKvTypes[] = {{"f16", DType::F16}, {"f32", DType::F32}, {"bf16", DType::BF16},
                                   {"q8", DType::I8},   {"q4", DType::Q4_0},  {"q4_0", DType::Q4_0}};

// An element-wise step over at most this many values runs on the calling thread: a decode
// row's few thousand take less time than waking the pool.
constexpr int64_t kInlineValues = 8192;

// f(i) for rows [i0, i1), on the pool when they are many (a prefill's norms: on one thread they
// were 3% of SmolLM2's pp512).
template <class F>
void each_row(ThreadPool& pool, int i0, int i1, int64_t row_elems, const F& f) {
  if (static_cast<int64_t>(i1 - i0) * row_elems <= kInlineValues) {
    for (int i = i0; i < i1; ++i) f(i);
    return;
  }
  pool.parallel_for(i1 - i0, 8, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) f(i0 + static_cast<int>(i));
  });
}
}  // namespace

const std::vector<std::string>& kv_type_choices() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const KvTypeName& k : kKvTypes) v.push_back(k.name);
    return v;
  }();
  return names;
}

const std::string& kv_type_names() {
  static const std::string joined = [] {
    std::string s;
    for (const std::string& n : kv_type_choices()) s += (s.empty() ? "" : ", ") + n;
    return s;
  }();
  return joined;
}

DType kv_type_from_name(const std::string& name) {
  for (const KvTypeName& k : kKvTypes)
    if (name == k.name) return k.type;
  fail("KV cache type '%s' is not one of %s", name.c_str(), kv_type_names().c_str());
}

Session::Session(const LlamaModel& model, const SessionOptions& opt)
    : model_(model),
      pool_(opt.n_threads > 0 ? opt.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      n_ctx_(std::min({opt.n_ctx, model.config().n_ctx_train,
                       model.config().swa_window > 0 ? model.config().swa_window : opt.n_ctx})),
      n_batch_(opt.n_batch),
      kv_type_(opt.kv_type),
      kv_row_(kv_type_supported(opt.kv_type) ? kv_row_bytes(opt.kv_type, model.config().head_dim) : 0),
      k_tile_(kv_type_supported(opt.kv_type) ? kv_tile_bytes(opt.kv_type, model.config().head_dim) : 0),
      q8_act_(opt.q8_activations) {
  const LlamaConfig& c = model.config();
  if (!kv_type_supported(kv_type_)) fail("KV cache type must be f32, f16, bf16, q8 or q4 (got %s)", dtype_name(kv_type_));
  if (kv_type_ == DType::Q4_0 && opt.kv_rotation && kv_rotation_k(c.head_dim) > 0) {
    k_rot_ = kv_rotation_k(c.head_dim);
    v_rot_ = kKvRotationV;
  }
  if (opt.n_ctx < 1) fail("context size must be at least 1 (got %d)", opt.n_ctx);
  if (n_batch_ < 1 || n_batch_ > 8192) fail("batch size must be in [1, 8192] (got %d)", n_batch_);
  const size_t kv = static_cast<size_t>(c.n_head_kv) * c.head_dim;
  // K in tiles of 16 positions (kernels/attention.h: decode puts keys in lanes), V in rows; each
  // kv head's positions contiguous (session.h)
  k_cache_.reset(static_cast<size_t>(c.n_layer) * k_tiles() * c.n_head_kv * k_tile_, "KV cache (K)");
  v_cache_.reset(static_cast<size_t>(c.n_layer) * n_ctx_ * c.n_head_kv * kv_row_, "KV cache (V)");
  const size_t B = static_cast<size_t>(n_batch_);
  x_.resize(B * c.n_embd);
  xn_.resize(B * c.n_embd);
  q_.resize(B * static_cast<size_t>(c.q_dim()));
  att_.resize(B * static_cast<size_t>(c.q_dim()));
  tmp_.resize(B * c.n_embd);
  k_.resize(B * kv);
  v_.resize(B * kv);
  rope_cs_.resize(B * static_cast<size_t>(c.head_dim));
  if (c.swa_window > 0) rope_cs_swa_.resize(B * static_cast<size_t>(c.head_dim));
  deepstack_rows_.assign(B, nullptr);
  rope_offsets_.reserve(16);
  gate_.resize(B * c.n_ff);
  up_.resize(B * c.n_ff);
  logits_.resize(static_cast<size_t>(kLogitRows) * c.n_vocab);
  if (q8_act_) xq_.resize(B * static_cast<size_t>(std::max(c.n_embd, c.n_ff)) / 32 + 1);
  // Repack once, here, into the layout the kernels read (as llama.cpp's CPU_REPACK): q8 panels
  // for the 8-bit kernels; with fp32 activations on AVX-512 and AVX2, decode panels (one linear stream per
  // thread for the decode kernel; the same bits). Either replaces the GGUF bytes, whose pages are
  // then dropped (only the token embeddings read them again, a row per token; a dropped page of a
  // read-only mapping comes back from the file if touched). The panels go side by side into
  // packed_arena_'s huge pages, which decode streams every token.
  const auto decode_panels = q8_act_ ? nullptr : kernels().decode_panels;
  // given the bytes of a matrix read so far, from its start: their pages go back
  const auto release = [&](const uint8_t* p, size_t n) { model.release_pages(p, n); };
  const auto pack = [&](const WeightMatrix& w) {
    if (packed_.count(w.data)) return;
    if (q8_act_) {
      if (!supports_q8_activations(w.type) || w.cols % q8_col_multiple(w.type) != 0) return;
      PackedWeights pw = pack_q8_panels(w, release, &packed_arena_);
      packed_bytes_ += pw.bytes;
      released_file_bytes_ += static_cast<size_t>(w.rows) * w.row_stride;
      packed_.emplace(w.data, std::move(pw));
      return;
    }
    if (needs_exact_repack(w.type)) {
      // fp32 activations on a type the model keeps as stored for the 8-bit kernels (Q3_K, IQ4_NL):
      // its held copy (kernels/exact_repack.h), which the fp32 kernels take
      PackedWeights held = hold_exactly(w);
      packed_bytes_ += held.bytes;
      released_file_bytes_ += static_cast<size_t>(w.rows) * w.row_stride;
      model.release_pages(w.data, static_cast<size_t>(w.rows) * w.row_stride);
      if (decode_panels && fits_decode_panels(held.matrix) && decode_panels(held.matrix.type)) {
        PackedWeights pw = pack_decode_panels(held.matrix, {}, &packed_arena_);
        packed_bytes_ += pw.bytes;
        held_.push_back(std::move(held.data));  // the panels' matrix still names its rows
        packed_.emplace(w.data, std::move(pw));
      } else {
        packed_.emplace(w.data, std::move(held));
      }
      return;
    }
    if (!decode_panels || !fits_decode_panels(w) || !decode_panels(w.type)) return;
    PackedWeights pw = pack_decode_panels(w, release, &packed_arena_);
    packed_bytes_ += pw.bytes;
    released_file_bytes_ += static_cast<size_t>(w.rows) * w.row_stride;
    packed_.emplace(w.data, std::move(pw));
  };
  for (const LlamaLayer& L : model.layers())
    for (const WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) pack(*w);
  pack(model.output());
}

void Session::linear(const WeightMatrix& w, const float* x, int n, int64_t xs, float* y, int64_t ys,
                     bool reuse_quantized, const char* what) {
  char detail[96] = "";
  if (prof::on())
    std::snprintf(detail, sizeof detail, "%s %s %lldx%lld", what, dtype_name(w.type), static_cast<long long>(w.rows),
                  static_cast<long long>(w.cols));
  const auto it = packed_.find(w.data);
  prof::OpScope op(q8_act_ && it != packed_.end() ? "matmul_q8" : "matmul", detail, matmul_cost(w, n));
  if (!q8_act_ || it == packed_.end()) {
    matmul(it == packed_.end() ? w : it->second.matrix, x, n, xs, y, ys, pool_);
    return;
  }
  const int64_t nb = w.cols / 32;
  if (!reuse_quantized) quantize_rows_q8_1(x, n, xs, xq_.data(), w.cols, pool_);
  matmul_q8(it->second.matrix, xq_.data(), n, nb, y, ys, pool_);
}

void Session::linear_group(std::initializer_list<LinearOut> outs, const float* x, int n, int64_t xs, const char* what) {
  const WeightMatrix& first = *outs.begin()->w;
  Q8Output q8[4];
  int k = 0;
  bool fused = q8_act_ && outs.size() <= std::size(q8);
  OpCost cost;
  for (const LinearOut& o : outs) {
    const auto it = packed_.find(o.w->data);
    fused = fused && it != packed_.end() && o.w->type == first.type && o.w->cols == first.cols;
    if (!fused) break;
    q8[k++] = {&it->second.matrix, o.y, o.ys};
    const OpCost c = matmul_cost(*o.w, n);
    cost.flops += c.flops, cost.bytes += c.bytes;
  }
  if (!fused) {  // one at a time; x quantized once while the types agree
    bool reuse = false;
    for (const LinearOut& o : outs) {
      linear(*o.w, x, n, xs, o.y, o.ys, reuse && o.w->type == first.type, o.what);
      reuse = true;
    }
    return;
  }
  char detail[96] = "";
  if (prof::on()) {
    int64_t rows = 0;
    for (const LinearOut& o : outs) rows += o.w->rows;
    std::snprintf(detail, sizeof detail, "%s %s %lldx%lld", what, dtype_name(first.type), static_cast<long long>(rows),
                  static_cast<long long>(first.cols));
  }
  prof::OpScope op("matmul_q8", detail, cost);
  quantize_rows_q8_1(x, n, xs, xq_.data(), first.cols, pool_);
  matmul_q8_group(q8, k, xq_.data(), n, first.cols / 32, pool_);
}

void Session::truncate(int n) {
  n_past_ = std::clamp(n, 0, n_past_);
  while (!rope_offsets_.empty() && rope_offsets_.back().since > n_past_) rope_offsets_.pop_back();
}

int64_t Session::rope_position(int p) const {
  for (auto it = rope_offsets_.rbegin(); it != rope_offsets_.rend(); ++it)
    if (p >= it->since) return static_cast<int64_t>(p) + it->offset;
  return p;
}

// Per layer and kv head, positions [0, n) are the first ceil(n / 16) K tiles and the first n V
// rows: two contiguous runs (a partial tile's later lanes come along; they lie beyond n_past and
// are overwritten before they are read).
size_t Session::prefix_bytes(int n) const {
  const LlamaConfig& c = model_.config();
  const size_t tiles = (static_cast<size_t>(n) + kKvTile - 1) / kKvTile;
  return static_cast<size_t>(c.n_layer) * c.n_head_kv * (tiles * k_tile_ + static_cast<size_t>(n) * kv_row_);
}

template <class F>
void Session::for_each_prefix_run(int n, F f) const {
  const LlamaConfig& c = model_.config();
  const size_t kb = (static_cast<size_t>(n) + kKvTile - 1) / kKvTile * k_tile_, vb = static_cast<size_t>(n) * kv_row_;
  for (size_t h = 0; h < static_cast<size_t>(c.n_layer) * c.n_head_kv; ++h)  // (layer, kv head) in order
    f(h * k_head_bytes(), kb, h * v_head_bytes(), vb);
}

void Session::save_prefix(int n, std::vector<uint8_t>& out) const {
  if (n < 0 || n > n_past_) fail("save_prefix(%d): only %d positions are cached", n, n_past_);
  out.resize(prefix_bytes(n));
  uint8_t* o = out.data();
  for_each_prefix_run(n, [&](size_t k_at, size_t kb, size_t v_at, size_t vb) {
    std::memcpy(o, k_cache_.data() + k_at, kb);
    std::memcpy(o + kb, v_cache_.data() + v_at, vb);
    o += kb + vb;
  });
}

void Session::restore_prefix(int n, const std::vector<uint8_t>& saved) {
  if (n < 0 || n > n_ctx_ || saved.size() != prefix_bytes(n))
    fail("restore_prefix(%d): %zu saved bytes do not hold %d positions", n, saved.size(), n);
  const uint8_t* in = saved.data();
  for_each_prefix_run(n, [&](size_t k_at, size_t kb, size_t v_at, size_t vb) {
    std::memcpy(k_cache_.data() + k_at, in, kb);
    std::memcpy(v_cache_.data() + v_at, in + kb, vb);
    in += kb + vb;
  });
  n_past_ = n;
  n_filled_ = std::max(n_filled_, n);
  // the rotary offsets of what was overwritten go (the prefix's own are not saved: what follows
  // a restored multimodal prefix carries its positions, as Qwen3-VL prompts do)
  while (!rope_offsets_.empty() && rope_offsets_.back().since > n) rope_offsets_.pop_back();
}

void Session::skip_to(int n) {
  if (n < n_past_ || n > n_filled_) fail("skip_to(%d): only positions %d..%d hold cached K/V", n, n_past_, n_filled_);
  n_past_ = n;
}

void Session::eval(const std::vector<int32_t>& tokens) {
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(n_batch_)) {
    const int n = static_cast<int>(std::min<size_t>(n_batch_, tokens.size() - i));
    forward(tokens.data() + i, n, n - 1, nullptr, i);
  }
}

void Session::eval(const std::vector<int32_t>& tokens, const float* embeddings, size_t n_embeddings,
                   const std::vector<MropePos>* positions) {
  eval(tokens, embeddings, n_embeddings, positions, tokens.size(), nullptr);
}

void Session::eval(const std::vector<int32_t>& tokens, const float* embeddings, size_t n_embeddings,
                   const std::vector<MropePos>* positions, size_t logits_from,
                   const std::function<void(size_t, const float*)>& on_logits) {
  size_t slots = 0;
  for (int32_t t : tokens) slots += t == kEmbeddingSlot;
  if (slots != n_embeddings) fail("%zu embedding slots in the prompt but %zu embeddings given", slots, n_embeddings);
  const LlamaConfig& c = model_.config();
  if (positions) {
    if (positions->size() != tokens.size()) fail("%zu positions for %zu tokens", positions->size(), tokens.size());
    if (c.mrope[0] + c.mrope[1] + c.mrope[2] == 0) fail("the text model has no multimodal rotary positions");
    for (const MropePos& p : *positions)
      if (p.t < 0 || p.h < 0 || p.w < 0 || p.t > (1 << 24) || p.h > (1 << 24) || p.w > (1 << 24)) fail("rotary position out of range");
  }
  const size_t E = static_cast<size_t>(c.n_embd_inp());
  const float* next = embeddings;
  const int start = n_past_;
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(n_batch_)) {
    const int n = static_cast<int>(std::min<size_t>(n_batch_, tokens.size() - i));
    // logits for the rows >= logits_from when asked (only they are handed out), else only the
    // batch's last row
    const bool wanted = on_logits && logits_from < i + static_cast<size_t>(n);
    const int first = wanted ? static_cast<int>(std::max(logits_from, i) - i) : n - 1;
    forward(tokens.data() + i, n, first, wanted ? &on_logits : nullptr, i, next, positions ? positions->data() + i : nullptr);
    for (int j = 0; j < n; ++j) next += tokens[i + static_cast<size_t>(j)] == kEmbeddingSlot ? E : 0;
  }
  if (positions && !positions->empty()) {
    // Later tokens continue after the largest position: slot + offset. The offset holds from the
    // first slot of the batch's trailing run of text positions that already follow it (the text
    // after an image), so a truncate into that run keeps it.
    int32_t top = 0;
    for (const MropePos& p : *positions) top = std::max({top, p.t, p.h, p.w});
    const int32_t off = top + 1 - n_past_;
    int since = n_past_;
    for (size_t k = positions->size(); k-- > 0;) {
      const int32_t want = start + static_cast<int32_t>(k) + off;
      const MropePos& p = (*positions)[k];
      if (p.t != want || p.h != want || p.w != want) break;
      since = start + static_cast<int>(k);
    }
    rope_offsets_.push_back({since, off});
  }
}

void Session::eval_all(const std::vector<int32_t>& tokens,
                       const std::function<void(size_t, const float*)>& on_logits) {
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(n_batch_)) {
    const int n = static_cast<int>(std::min<size_t>(n_batch_, tokens.size() - i));
    forward(tokens.data() + i, n, 0, &on_logits, i);
  }
}

void Session::forward(const int32_t* tokens, int n, int first_logits,
                      const std::function<void(size_t, const float*)>* on_logits, size_t base,
                      const float* embeddings, const MropePos* positions) {
  check_batch(tokens, n, embeddings);
  if (prof::on()) note_memory();
  embed(tokens, n, embeddings);
  const LlamaConfig& c = model_.config();
  for (int i = 0; i < n; ++i) {
    float* cs = &rope_cs_[static_cast<size_t>(i * c.head_dim)];
    if (positions) rope_angles_mrope(positions[i].t, positions[i].h, positions[i].w, c.mrope, c.head_dim, c.rope_base, cs);
    else rope_angles(rope_position(n_past_ + i), c.head_dim, c.rope_base, cs);
    if (c.swa_window > 0) rope_angles(rope_position(n_past_ + i), c.head_dim, c.rope_base_swa, &rope_cs_swa_[static_cast<size_t>(i * c.head_dim)]);
  }
  for (int l = 0; l < c.n_layer; ++l) {
    preemption_point();  // background work yields here (n_past_ is unchanged until the end)
    attention_block(l, n);
    preemption_point();
    ffn_block(l, n);
    if (l < c.deepstack_layers) {  // DeepStack: image positions add their feature row to this layer's output
      const int64_t E = c.n_embd;
      for (int i = 0; i < n; ++i)
        if (deepstack_rows_[static_cast<size_t>(i)])
          add_inplace(&tmp_[static_cast<size_t>(i * E)], deepstack_rows_[static_cast<size_t>(i)] + (l + 1) * E, E);
    }
    if (layer_hook_) {  // the residual add is fused into the next norm: the hidden state is x + tmp
      const size_t m = static_cast<size_t>(n) * c.n_embd;
      hook_rows_.resize(m);
      for (size_t k = 0; k < m; ++k) hook_rows_[k] = x_[k] + tmp_[k];
      layer_hook_(l, n_past_, n, hook_rows_.data());
    }
  }
  n_past_ += n;
  n_filled_ = std::max(n_filled_, n_past_);
  output_logits(n, first_logits, on_logits, base);
}

void Session::check_batch(const int32_t* tokens, int n, const float* embeddings) const {
  const LlamaConfig& c = model_.config();
  if (n_past_ + n > n_ctx_) {
    if (c.swa_window > 0 && n_ctx_ == c.swa_window)
      fail("context is full: %d cached + %d new tokens exceed %d, the model's sliding attention window "
           "(tessera's attention has no window mask, so contexts are capped at it)", n_past_, n, n_ctx_);
    fail("context is full: %d cached + %d new tokens exceed the context size of %d", n_past_, n, n_ctx_);
  }
  for (int i = 0; i < n; ++i)
    if ((tokens[i] < 0 || tokens[i] >= c.n_vocab) && !(embeddings && tokens[i] == kEmbeddingSlot))
      fail("token id %d is out of range [0, %d)", tokens[i], c.n_vocab);
}

void Session::note_memory() const {
  prof::note_memory("weights", model_.weight_bytes());
  if (packed_bytes_) prof::note_memory("repacked weights", packed_bytes_);
  prof::note_memory("kv cache", k_cache_.size() + v_cache_.size());
  size_t act = 0;
  for (const auto* b : {&x_, &xn_, &q_, &k_, &v_, &att_, &tmp_, &gate_, &up_, &rope_cs_, &logits_}) act += b->size() * sizeof(float);
  prof::note_memory("activations", act + xq_.size() * sizeof(BlockQ8_1));
}

// Token rows from the embedding table, or for kEmbeddingSlot the next given embedding.
void Session::embed(const int32_t* tokens, int n, const float* embeddings) {
  const int64_t E = model_.config().n_embd, Ein = model_.config().n_embd_inp();
  prof::OpScope op("embed", "", float_rows_cost(n, E));
  for (int i = 0; i < n; ++i) {
    deepstack_rows_[static_cast<size_t>(i)] = nullptr;
    if (tokens[i] == kEmbeddingSlot) {
      std::memcpy(&x_[static_cast<size_t>(i * E)], embeddings, E * sizeof(float));
      if (Ein > E) deepstack_rows_[static_cast<size_t>(i)] = embeddings;
      embeddings += Ein;
    } else {
      model_.embed(tokens[i], &x_[static_cast<size_t>(i * E)]);
      if (model_.config().embd_scale != 1.0f)  // Gemma: token rows (not given embeddings) times sqrt(n_embd)
        for (int64_t k = 0; k < E; ++k) x_[static_cast<size_t>(i * E + k)] *= model_.config().embd_scale;
    }
  }
}

void Session::attention_block(int l, int n) {
  const LlamaConfig& c = model_.config();
  const LlamaLayer& L = model_.layers()[static_cast<size_t>(l)];
  const int64_t E = c.n_embd, QD = c.q_dim(), KV = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  const int hd = c.head_dim, p0 = n_past_;
  const size_t pos_bytes = static_cast<size_t>(c.n_head_kv) * kv_row_;  // one position's K or V, all kv heads
  uint8_t* kc = k_cache_.data() + static_cast<size_t>(l) * c.n_head_kv * k_head_bytes();
  uint8_t* vc = v_cache_.data() + static_cast<size_t>(l) * c.n_head_kv * v_head_bytes();

  {  // the previous layer's residual add is fused into this norm (add_rms_norm)
    prof::OpScope op("add+rms_norm", "", rms_norm_cost(n, E, true));
    each_row(pool_, 0, n, E, [&](int i) {
      if (l == 0) rms_norm(&x_[i * E], L.attn_norm.data(), &xn_[i * E], E, c.rms_eps);
      else add_rms_norm(&x_[i * E], &tmp_[i * E], L.attn_norm.data(), &xn_[i * E], E, c.rms_eps);
    });
  }
  // A decode step writes one slot per kv head into a K tile whose lines were evicted since the
  // last token (an fp16 slot is 2 bytes in each of the tile's lines), and one V row; the stores
  // waited on those lines. Asked for before the q/k/v matmul, which then covers the wait.
  if (n <= kPrefetchKvRows)
    for (int i = 0; i < n; ++i)
      for (int g = 0; g < c.n_head_kv; ++g) {
        const size_t p = static_cast<size_t>(p0 + i);
        const uint8_t* tile = kc + g * k_head_bytes() + p / kKvTile * k_tile_;
        for (size_t b = 0; b < k_tile_; b += 64) prefetch_for_write(tile + b);
        const uint8_t* row = vc + g * v_head_bytes() + p * kv_row_;
        for (size_t b = 0; b < kv_row_; b += 64) prefetch_for_write(row + b);
      }
  linear_group({{&L.wq, q_.data(), QD, "q"}, {&L.wk, k_.data(), KV, "k"}, {&L.wv, v_.data(), KV, "v"}}, xn_.data(), n, E, "qkv");
  {
    prof::OpScope op(c.qk_norm ? "qk_norm+rope+kv store" : "rope+kv store", "", rope_kv_store_cost(n, QD, KV, static_cast<double>(pos_bytes)));
    const auto rope = c.rope_neox ? rope_neox : rope_pairs;
    const auto rope_store = [&](int64_t i0, int64_t i1) {  // tokens are independent
      for (int64_t i = i0; i < i1; ++i) {
        const float* cs = &(c.is_swa(l) ? rope_cs_swa_ : rope_cs_)[static_cast<size_t>(i * hd)];
        if (c.qk_norm) {  // Qwen3, Gemma 3: each head of q and k RMS-normed on its own, then rotated
          for (int h = 0; h < c.n_head; ++h) rms_norm(&q_[i * QD + h * hd], L.q_norm.data(), &q_[i * QD + h * hd], hd, c.rms_eps);
          for (int h = 0; h < c.n_head_kv; ++h) rms_norm(&k_[i * KV + h * hd], L.k_norm.data(), &k_[i * KV + h * hd], hd, c.rms_eps);
        }
        rope(&q_[i * QD], c.n_head, hd, cs);
        rope(&k_[i * KV], c.n_head_kv, hd, cs);
        if (k_rot_ > 0) {  // llama.cpp's rotation for a quantized cache (kernels/attention.h)
          hadamard_rotate(&q_[i * QD], k_rot_, QD);
          hadamard_rotate(&k_[i * KV], k_rot_, KV);
          hadamard_rotate(&v_[i * KV], v_rot_, KV);
        }
        for (int g = 0; g < c.n_head_kv; ++g) {
          const size_t p = static_cast<size_t>(p0 + i);
          kv_store_k_at(kv_type_, &k_[i * KV + g * hd], hd, kc + g * k_head_bytes(), k_tile_, static_cast<int64_t>(p));
          kv_store_row(kv_type_, &v_[i * KV + g * hd], hd, vc + g * v_head_bytes() + p * kv_row_);
        }
      }
    };
    pool_.parallel_for(n, 4, rope_store);
  }
  {  // fused attention: token i sees positions 0 .. p0+i
    AttentionShape shape;
    shape.n_head = c.n_head;
    shape.n_head_kv = c.n_head_kv;
    shape.head_dim = hd;
    shape.scale = c.attn_scale > 0 ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));
    shape.causal = true;
    shape.q_pos0 = p0;
    shape.n_kv = p0 + n;
    KvView view{kc, vc, kv_type_, static_cast<int64_t>(kv_row_), static_cast<int64_t>(v_head_bytes())};
    view.k_tiles = true;
    view.k_tile_stride = static_cast<int64_t>(k_tile_);
    view.k_head_stride = static_cast<int64_t>(k_head_bytes());
    const double pairs = static_cast<double>(n) * p0 + 0.5 * n * (n + 1.0);  // causal: the visible keys
    char detail[48] = "";
    if (prof::on()) std::snprintf(detail, sizeof detail, "KV %s", dtype_name(kv_type_));
    prof::OpScope op("attention", detail,
                     attention_cost(pairs, static_cast<int64_t>(hd) * c.n_head, n, p0 + n, static_cast<double>(pos_bytes)));
    flash_attention(shape, q_.data(), n, QD, view, att_.data(), QD, pool_);
  }
  if (v_rot_ > 0) {  // the output back from V's rotation (H^2 = I)
    prof::OpScope op("hadamard", "", OpCost{static_cast<double>(n) * QD * (std::log2(v_rot_) + 1), 8.0 * n * QD});
    pool_.parallel_for(n, 4, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) hadamard_rotate(&att_[i * QD], v_rot_, QD);
    });
  }
  linear(L.wo, att_.data(), n, QD, tmp_.data(), E, false, "o");
  if (c.post_norms) post_norm(L.post_attn_norm, n);
}

// Gemma: a sublayer's output (tmp_) RMS-normed before the next norm adds it to the residual.
void Session::post_norm(const std::vector<float>& w, int n) {
  const LlamaConfig& c = model_.config();
  const int64_t E = c.n_embd;
  prof::OpScope op("rms_norm", "post", rms_norm_cost(n, E, false));
  each_row(pool_, 0, n, E, [&](int i) { rms_norm(&tmp_[i * E], w.data(), &tmp_[i * E], E, c.rms_eps); });
}

void Session::ffn_block(int l, int n) {
  const LlamaConfig& c = model_.config();
  const LlamaLayer& L = model_.layers()[static_cast<size_t>(l)];
  const int64_t E = c.n_embd, FF = c.n_ff;
  {
    prof::OpScope op("add+rms_norm", "", rms_norm_cost(n, E, true));
    each_row(pool_, 0, n, E,
             [&](int i) { add_rms_norm(&x_[i * E], &tmp_[i * E], L.ffn_norm.data(), &xn_[i * E], E, c.rms_eps); });
  }
  linear_group({{&L.w_gate, gate_.data(), FF, "gate"}, {&L.w_up, up_.data(), FF, "up"}}, xn_.data(), n, E, "gate+up");
  {
    prof::OpScope op(c.gelu_ffn ? "geglu" : "swiglu", "", swiglu_cost(static_cast<int64_t>(n) * FF));
    float* g = gate_.data();
    const float* u = up_.data();
    const auto act = [&](int64_t i0, int64_t i1) {
      if (!c.gelu_ffn) return swiglu(g + i0, u + i0, i1 - i0);
      gelu_tanh(g + i0, i1 - i0);  // Gemma: gelu_tanh(gate) * up
      for (int64_t k = i0; k < i1; ++k) g[k] *= u[k];
    };
    if (static_cast<int64_t>(n) * FF <= kInlineValues) act(0, static_cast<int64_t>(n) * FF);
    else pool_.parallel_for(static_cast<int64_t>(n) * FF, 256, act);
  }
  linear(L.w_down, gate_.data(), n, FF, tmp_.data(), E, false, "down");  // added in the next norm
  if (c.post_norms) post_norm(L.post_ffn_norm, n);
}

// The last layer's residual, the output norm and the head, for the last token or (all_logits)
// every token, kLogitRows rows at a time.
void Session::output_logits(int n, int first, const std::function<void(size_t, const float*)>* on_logits,
                            size_t base) {
  const LlamaConfig& c = model_.config();
  const int64_t E = c.n_embd;
  first = std::clamp(first, 0, n - 1);
  {
    prof::OpScope op("add+rms_norm", "output", rms_norm_cost(n - first, E, true));
    each_row(pool_, first, n, E, [&](int i) {
      add_rms_norm(&x_[i * E], &tmp_[i * E], model_.output_norm().data(), &xn_[i * E], E, c.rms_eps);
    });
  }
  for (int i = first; i < n; i += kLogitRows) {
    const int rows = std::min(kLogitRows, n - i);
    linear(model_.output(), &xn_[i * E], rows, E, logits_.data(), c.n_vocab, false, "lm_head");
    if (on_logits)
      for (int r = 0; r < rows; ++r) (*on_logits)(base + static_cast<size_t>(i + r), logits_.data() + static_cast<size_t>(r) * c.n_vocab);
  }
}

}  // namespace tessera
