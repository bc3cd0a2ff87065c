#include "models/qwen3vl/vision.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "core/preempt.h"
#include "kernels/attention.h"
#include "kernels/attention_bf16.h"
#include "kernels/attention_f16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/f16_tiles.h"
#include "kernels/elementwise.h"
#include "kernels/gemm_panels.h"
#include "models/footprint.h"
#include "models/gguf_source.h"
#include "profile/profiler.h"

namespace tessera {

namespace {

uint64_t u(int64_t x) { return static_cast<uint64_t>(x); }

Qwen3VLLinear linear(const TensorSource& s, const std::string& name, int64_t rows, int64_t cols) {
  Qwen3VLLinear l;
  l.w = s.matrix(name + ".weight", rows, cols);
  l.b = s.floats(name + ".bias", {u(rows)});
  return l;
}

// y[n][rows] (rows ys apart) = x[n][cols] W^T + b: the fp32 GEMM then the bias, or the bf16 or
// fp16 GEMM starting its sums from the bias (use_bf16_gemm, use_f16_gemm)
void apply(const Qwen3VLLinear& l, const float* x, int64_t n, float* y, int64_t ys, ThreadPool& pool, const char* what) {
  if (l.w.bf16_tiles) {
    prof::OpScope op("gemm_bf16", what, matmul_cost(l.w, n));
    return gemm_bf16(l.w, x, n, l.w.cols, y, ys, pool, l.b.data());
  }
  if (l.w.f16_tiles) {
    prof::OpScope op("gemm_f16", what, matmul_cost(l.w, n));
    return gemm_f16(l.w, x, n, l.w.cols, y, ys, pool, l.b.data());
  }
  {
    prof::OpScope op("gemm", what, matmul_cost(l.w, n));
    gemm(l.w, x, n, l.w.cols, y, ys, pool);
  }
  prof::OpScope op("bias", what, float_rows_cost(n, l.w.rows));
  pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) add_inplace(y + i * ys, l.b.data(), l.w.rows);
  });
}

// nn.GELU() (erf), as torch computes it in float
void gelu_erf_rows(float* x, int64_t n, int64_t width, ThreadPool& pool) {
  pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0 * width; i < i1 * width; ++i) x[i] = x[i] * 0.5f * (1.0f + std::erf(x[i] * static_cast<float>(M_SQRT1_2)));
  });
}

void layer_norm_rows(const float* x, int64_t n, int64_t width, const std::vector<float>& w, const std::vector<float>& b, float eps,
                     float* out, ThreadPool& pool) {
  prof::OpScope op("layer_norm", "", layer_norm_cost(n, width, false, 4));
  pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) layer_norm(x + i * width, w.data(), b.data(), out + i * width, width, eps);
  });
}

// Patch r's (row, column) in the patch grid: rows come in merge x merge blocks, blocks row-major.
void patch_position(int r, int grid_w, int merge, int& row, int& col) {
  const int in_block = r % (merge * merge), block = r / (merge * merge), blocks_w = grid_w / merge;
  row = block / blocks_w * merge + in_block / merge;
  col = block % blocks_w * merge + in_block % merge;
}

// transformers' bilinear taps (align_corners): source coordinate index * (side - 1) / (size - 1).
void bilinear_taps(int index, int size, int side, int taps[2], float weights[2]) {
  const float src = static_cast<float>(index) * static_cast<float>(side - 1) / static_cast<float>(std::max(size - 1, 1));
  const float fl = std::floor(src);
  for (int o = 0; o < 2; ++o) {
    taps[o] = std::clamp(static_cast<int>(fl) + o, 0, side - 1);
    weights[o] = std::max(0.0f, 1.0f - std::fabs(src - fl - static_cast<float>(o)));
  }
}

}  // namespace

int Qwen3VLVisionConfig::side() const {
  int s = static_cast<int>(std::lround(std::sqrt(static_cast<double>(n_pos))));
  return s * s == n_pos ? s : 0;
}

void Qwen3VLVision::check_config(const std::string& file) const {
  const Qwen3VLVisionConfig& c = cfg_;
  auto bad = [&](const char* what) { fail("%s: vision config: %s", file.c_str(), what); };
  if (c.patch < 1 || c.patch > 64 || c.temporal < 1 || c.temporal > 4 || c.merge < 1 || c.merge > 8) bad("patch, temporal or merge size out of range");
  if (c.hidden < 1 || c.hidden > 16384 || c.ff < 1 || c.ff > 65536 || c.out_hidden < 1 || c.out_hidden > 65536) bad("widths out of range");
  if (c.depth < 1 || c.depth > 256) bad("depth out of range");
  if (c.heads < 1 || c.hidden % c.heads || c.head_dim() % 4 || c.head_dim() > 256) bad("head count does not divide the width into heads of a multiple of 4");
  if (c.n_pos < 1 || c.n_pos > (1 << 20) || c.side() < 2) bad("position table is not a square grid");
  if (!(c.eps > 0 && c.eps < 1) || !(c.rope_theta > 1 && c.rope_theta < 1e9)) bad("epsilon or rotary base out of range");
  for (size_t i = 0; i < c.deepstack.size(); ++i)
    if (c.deepstack[i] < 0 || c.deepstack[i] >= c.depth || (i > 0 && c.deepstack[i] <= c.deepstack[i - 1])) bad("DeepStack layer indexes out of order or range");
}

Qwen3VLPreprocessConfig Qwen3VLVision::preprocess_config() const { return qwen3vl_preprocess_config(cfg_); }

void Qwen3VLVision::load_weights(const TensorSource& s, bool g) {
  const Qwen3VLVisionConfig& c = cfg_;
  const int P = c.patch, T = c.temporal, H = c.hidden, K = 3 * T * P * P, H4 = H * c.merge * c.merge;
  const std::string vp = "model.visual.";
  // the Conv3d kernel as one matrix with columns [channel][t][y][x] (the patch rows' order);
  // llama.cpp's converter splits it into one Conv2d kernel per temporal slot
  patch_w_.resize(static_cast<size_t>(H) * K);
  if (g) {
    if (T != 2) fail("%s: the mmproj's patch embedding has 2 temporal slots, the config %d", s.describe().c_str(), T);
    for (int t = 0; t < T; ++t) {
      const std::vector<float> w = s.floats(t == 0 ? "v.patch_embd.weight" : "v.patch_embd.weight.1", {u(P), u(P), 3, u(H)});
      for (int h = 0; h < H; ++h)
        for (int ch = 0; ch < 3; ++ch)
          std::copy_n(&w[(static_cast<size_t>(h) * 3 + ch) * P * P], P * P, &patch_w_[static_cast<size_t>(h) * K + (static_cast<size_t>(ch) * T + t) * P * P]);
    }
  } else {
    patch_w_ = s.floats(vp + "patch_embed.proj.weight", {u(P), u(P), u(T), 3, u(H)});
  }
  patch_.w.type = DType::F32;
  patch_.w.rows = H;
  patch_.w.cols = K;
  patch_.w.data = reinterpret_cast<const uint8_t*>(patch_w_.data());
  patch_.w.row_stride = static_cast<size_t>(K) * sizeof(float);
  patch_.b = s.floats(g ? "v.patch_embd.bias" : vp + "patch_embed.proj.bias", {u(H)});
  pos_ = s.floats(g ? "v.position_embd.weight" : vp + "pos_embed.weight", {u(H), u(c.n_pos)});
  blocks_.resize(static_cast<size_t>(c.depth));
  for (int i = 0; i < c.depth; ++i) {
    Qwen3VLBlock& B = blocks_[static_cast<size_t>(i)];
    const std::string p = g ? "v.blk." + std::to_string(i) + "." : vp + "blocks." + std::to_string(i) + ".";
    auto n = [&](const char* gguf, const char* hf) { return p + (g ? gguf : hf); };
    B.ln1_w = s.floats(n("ln1.weight", "norm1.weight"), {u(H)});
    B.ln1_b = s.floats(n("ln1.bias", "norm1.bias"), {u(H)});
    B.ln2_w = s.floats(n("ln2.weight", "norm2.weight"), {u(H)});
    B.ln2_b = s.floats(n("ln2.bias", "norm2.bias"), {u(H)});
    B.qkv = linear(s, n("attn_qkv", "attn.qkv"), 3 * H, H);
    B.proj = linear(s, n("attn_out", "attn.proj"), H, H);
    B.fc1 = linear(s, n("ffn_up", "mlp.linear_fc1"), c.ff, H);
    B.fc2 = linear(s, n("ffn_down", "mlp.linear_fc2"), H, c.ff);
  }
  merger_.ln_w = s.floats(g ? "v.post_ln.weight" : vp + "merger.norm.weight", {u(H)});
  merger_.ln_b = s.floats(g ? "v.post_ln.bias" : vp + "merger.norm.bias", {u(H)});
  merger_.fc1 = linear(s, g ? "mm.0" : vp + "merger.linear_fc1", H4, H4);
  merger_.fc2 = linear(s, g ? "mm.2" : vp + "merger.linear_fc2", c.out_hidden, H4);
  deepstack_.resize(c.deepstack.size());
  for (size_t k = 0; k < c.deepstack.size(); ++k) {
    Qwen3VLMerger& m = deepstack_[k];
    const std::string p = g ? "v.deepstack." + std::to_string(c.deepstack[k]) + "." : vp + "deepstack_merger_list." + std::to_string(k) + ".";
    m.postshuffle = true;
    m.ln_w = s.floats(p + "norm.weight", {u(H4)});
    m.ln_b = s.floats(p + "norm.bias", {u(H4)});
    m.fc1 = linear(s, p + (g ? "fc1" : "linear_fc1"), H4, H4);
    m.fc2 = linear(s, p + (g ? "fc2" : "linear_fc2"), c.out_hidden, H4);
  }
  // the dense GEMM weights repacked once into the kernels' panels (as SigLIP's)
  const std::vector<WeightMatrix*> dense = dense_weights();
  packed_.reserve(2 * dense.size());  // room for the bf16 tiles too: the views stay put
  for (WeightMatrix* w : dense) {
    if (!supports_gemm_panels(w->type)) continue;
    packed_.push_back(pack_gemm_panels(*w));
    if (w != &patch_.w) {
      s.release(w->data, static_cast<size_t>(w->rows) * w->row_stride);
      released_file_bytes_ += static_cast<size_t>(w->rows) * w->row_stride;
    }
    *w = packed_.back().matrix;
  }
}

std::vector<WeightMatrix*> Qwen3VLVision::dense_weights() {
  std::vector<WeightMatrix*> dense{&patch_.w, &merger_.fc1.w, &merger_.fc2.w};
  for (Qwen3VLBlock& B : blocks_)
    for (WeightMatrix* w : {&B.qkv.w, &B.proj.w, &B.fc1.w, &B.fc2.w}) dense.push_back(w);
  for (Qwen3VLMerger& m : deepstack_)
    for (WeightMatrix* w : {&m.fc1.w, &m.fc2.w}) dense.push_back(w);
  return dense;
}

int Qwen3VLVision::use_bf16_gemm() {
  if (!bf16_gemm_available()) fail("bf16 vision GEMM needs AVX512_BF16 or AMX bf16: this CPU or OS gives neither, or --isa/TESSERA_ISA caps below avx512vnni");
  AttentionShape s;
  s.n_head = s.n_head_kv = cfg_.heads;
  s.head_dim = cfg_.head_dim();
  s.causal = false;
  check_bf16_attn_shape(s);
  bf16_ = true;
  return repack_dense(pack_bf16_tiles);
}

int Qwen3VLVision::use_f16_gemm() {
  if (!f16_gemm_available()) fail("fp16 vision GEMM needs AVX512-FP16 or ARM FP16 arithmetic: this CPU gives neither, or --isa/TESSERA_ISA caps below avx512vnni (neon on ARM)");
  f16_ = true;
  return repack_dense(pack_f16_tiles);
}

int Qwen3VLVision::repack_dense(PackedWeights (*pack)(const WeightMatrix&)) {
  int n = 0;
  for (WeightMatrix* w : dense_weights()) {
    if (w->bf16_tiles || w->f16_tiles || !supports_bf16_tiles(w->type)) continue;
    PackedWeights pw = pack(*w);
    // a quantized matrix was read from the file itself (no fp32 panels): its pages are given back
    if (!w->gemm_panels && w->data && source_) {
      source_->release(w->data, static_cast<size_t>(w->rows) * w->row_stride);
      released_file_bytes_ += static_cast<size_t>(w->rows) * w->row_stride;
    }
    // the fp32 panels it was read from are no longer needed
    for (PackedWeights& old : packed_)
      if (old.matrix.gemm_panels && old.matrix.gemm_panels == w->gemm_panels) old.data.reset(), old.bytes = 0;
    packed_.push_back(std::move(pw));
    *w = packed_.back().matrix;
    w->gemm_panels = nullptr;
    ++n;
  }
  return n;
}

Qwen3VLVisionConfig read_qwen3vl_vision_config(const GgufFile& f, const std::string& path) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != "clip") fail("%s: not an mmproj file (architecture '%s', expected 'clip')", path.c_str(), arch.c_str());
  const std::string proj = f.get_string("clip.projector_type", f.get_string("clip.vision.projector_type", ""));
  if (proj != "qwen3vl_merger") fail("%s: projector type '%s' is not Qwen3-VL's (qwen3vl_merger)", path.c_str(), proj.c_str());
  Qwen3VLVisionConfig c;
  c.patch = static_cast<int>(f.get_int("clip.vision.patch_size", 1, 64));
  c.hidden = static_cast<int>(f.get_int("clip.vision.embedding_length", 1, 16384));
  c.ff = static_cast<int>(f.get_int("clip.vision.feed_forward_length", 1, 65536));
  c.depth = static_cast<int>(f.get_int("clip.vision.block_count", 1, 256));
  c.heads = static_cast<int>(f.get_int("clip.vision.attention.head_count", 1, 1024));
  c.eps = static_cast<float>(f.get_float("clip.vision.attention.layer_norm_epsilon", 1e-12, 0.1, 1e-6));
  c.out_hidden = static_cast<int>(f.get_int("clip.vision.projection_dim", 1, 65536));
  c.merge = static_cast<int>(f.get_int("clip.vision.spatial_merge_size", 1, 8, 2));
  const int64_t image_size = f.get_int("clip.vision.image_size", c.patch, 1 << 16);
  if (image_size % c.patch) fail("%s: image size %lld is not a multiple of the patch size", path.c_str(), static_cast<long long>(image_size));
  c.n_pos = static_cast<int>((image_size / c.patch) * (image_size / c.patch));
  if (const GgufValue* ds = f.find("clip.vision.is_deepstack_layers")) {
    if (ds->type != GgufType::ARRAY || ds->count != static_cast<uint64_t>(c.depth) || gguf_scalar_size(ds->elem) == 0)
      fail("%s: clip.vision.is_deepstack_layers must hold one flag per layer (%d)", path.c_str(), c.depth);
    for (int i = 0; i < c.depth; ++i)
      if (ds->int_at(static_cast<size_t>(i)) != 0) c.deepstack.push_back(i);
  }
  return c;
}

std::unique_ptr<Qwen3VLVision> Qwen3VLVision::load_mmproj(const std::string& path) {
  std::unique_ptr<Qwen3VLVision> v(new Qwen3VLVision());
  v->file_ = GgufFile::open(path);
  const GgufFile& f = *v->file_;
  v->cfg_ = read_qwen3vl_vision_config(f, path);
  v->check_config(path);
  auto src = std::make_shared<GgufTensorSource>(f);
  v->load_weights(*src, true);
  v->source_ = src;
  return v;
}

std::unique_ptr<Qwen3VLVision> Qwen3VLVision::from_hf(const Qwen3VLVisionConfig& cfg, std::shared_ptr<const TensorSource> src) {
  std::unique_ptr<Qwen3VLVision> v(new Qwen3VLVision());
  v->cfg_ = cfg;
  v->check_config(src->describe());
  v->load_weights(*src, false);
  v->source_ = std::move(src);
  return v;
}

// x: n_patches x hidden in merge-block order, so each merge x merge block is one row of the
// concatenation. The main merger norms each patch first; a DeepStack one the concatenation.
void Qwen3VLVision::merge(const Qwen3VLMerger& m, const float* x, int n_patches, float* out, int64_t out_stride,
                          ThreadPool& pool) const {
  const int H = cfg_.hidden, mm = cfg_.merge * cfg_.merge, n = n_patches / mm;
  std::vector<float> xn(static_cast<size_t>(n_patches) * H), h(static_cast<size_t>(n) * H * mm);
  if (m.postshuffle) layer_norm_rows(x, n, static_cast<int64_t>(H) * mm, m.ln_w, m.ln_b, cfg_.eps, xn.data(), pool);
  else layer_norm_rows(x, n_patches, H, m.ln_w, m.ln_b, cfg_.eps, xn.data(), pool);
  apply(m.fc1, xn.data(), n, h.data(), static_cast<int64_t>(H) * mm, pool, "merger fc1");
  gelu_erf_rows(h.data(), n, static_cast<int64_t>(H) * mm, pool);
  apply(m.fc2, h.data(), n, out, out_stride, pool, "merger fc2");
}

// Patch embedding plus the learned positions for the patches idx[0..n) (idx null: all, in
// order), and their rotary cos/sin (head_dim per patch): pairs [0, hd/4) turn with the row,
// [hd/4, hd/2) with the column, at frequencies theta^(-j / (hd/4)), j < hd/4.
void Qwen3VLVision::embed(const Qwen3VLPatches& p, const int* idx, int n, float* x, float* cs, ThreadPool& pool) const {
  const Qwen3VLVisionConfig& c = cfg_;
  const int H = c.hidden, hd = c.head_dim(), M = c.merge, side = c.side();
  const int64_t K = p.row_size;
  if (idx) {
    std::vector<float> rows(static_cast<size_t>(n) * static_cast<size_t>(K));
    for (int r = 0; r < n; ++r)
      std::memcpy(&rows[static_cast<size_t>(r) * K], &p.pixels[static_cast<size_t>(idx[r]) * K], static_cast<size_t>(K) * sizeof(float));
    apply(patch_, rows.data(), n, x, H, pool, "patch embedding");
  } else {
    apply(patch_, p.pixels.data(), n, x, H, pool, "patch embedding");
  }
  std::vector<float> inv(static_cast<size_t>(hd / 4));
  for (int j = 0; j < hd / 4; ++j) inv[static_cast<size_t>(j)] = 1.0f / std::pow(c.rope_theta, static_cast<float>(2 * j) / static_cast<float>(hd / 2));
  pool.parallel_for(n, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int i = idx ? idx[r] : static_cast<int>(r);
      int row = 0, col = 0;
      patch_position(i, p.grid_w, M, row, col);
      int th[2], tw[2];
      float wh[2], ww[2];
      bilinear_taps(row, p.grid_h, side, th, wh);
      bilinear_taps(col, p.grid_w, side, tw, ww);
      float* xi = x + r * H;
      for (int d = 0; d < H; ++d) {
        float sum = 0.0f;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) sum += pos_[static_cast<size_t>(th[a] * side + tw[b]) * H + d] * (wh[a] * ww[b]);
        xi[d] += sum;
      }
      float* ci = cs + r * hd;
      for (int j = 0; j < hd / 2; ++j) {
        const float angle = static_cast<float>(j < hd / 4 ? row : col) * inv[static_cast<size_t>(j % (hd / 4))];
        ci[2 * j] = std::cos(angle);
        ci[2 * j + 1] = std::sin(angle);
      }
    }
  });
}

// One pre-norm block over n rows of x: LayerNorm, fused q/k/v, 2-D rotation, attend(qkv, att)
// (q/k/v rows 3 * hidden apart), proj, residual; LayerNorm, fc1, GELU-tanh, fc2, residual.
void Qwen3VLVision::block(const Qwen3VLBlock& B, float* x, int n, const float* cs, Scratch& s,
                          const std::function<void(float*, float*)>& attend, ThreadPool& pool) const {
  const Qwen3VLVisionConfig& c = cfg_;
  const int H = c.hidden, hd = c.head_dim();
  const size_t NH = static_cast<size_t>(n) * H;
  s.xn.resize(NH), s.qkv.resize(3 * NH), s.att.resize(NH), s.tmp.resize(NH), s.ff.resize(static_cast<size_t>(n) * c.ff);
  const int64_t stride = 3 * static_cast<int64_t>(H);
  const auto add_residual = [&] {  // x += tmp, row by row over the pool
    pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) { add_inplace(x + i0 * H, &s.tmp[static_cast<size_t>(i0) * H], (i1 - i0) * H); });
  };
  preemption_point();  // background encoding (the server's live screen) yields between a block's parts
  layer_norm_rows(x, n, H, B.ln1_w, B.ln1_b, c.eps, s.xn.data(), pool);
  apply(B.qkv, s.xn.data(), n, s.qkv.data(), stride, pool, "qkv");
  {
    prof::OpScope op("rope", "2-D", float_rows_cost(n, 2 * H));
    pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        rope_neox(&s.qkv[static_cast<size_t>(i * stride)], c.heads, hd, cs + i * hd);
        rope_neox(&s.qkv[static_cast<size_t>(i * stride + H)], c.heads, hd, cs + i * hd);
      }
    });
  }
  attend(s.qkv.data(), s.att.data());
  preemption_point();
  apply(B.proj, s.att.data(), n, s.tmp.data(), H, pool, "proj");
  add_residual();
  preemption_point();
  layer_norm_rows(x, n, H, B.ln2_w, B.ln2_b, c.eps, s.xn.data(), pool);
  apply(B.fc1, s.xn.data(), n, s.ff.data(), c.ff, pool, "fc1");
  pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) { gelu_tanh(&s.ff[static_cast<size_t>(i0) * c.ff], (i1 - i0) * c.ff); });
  apply(B.fc2, s.ff.data(), n, s.tmp.data(), H, pool, "fc2");
  add_residual();
}

AttentionShape Qwen3VLVision::attention_shape(int n_kv) const {
  AttentionShape shape;
  shape.n_head = shape.n_head_kv = cfg_.heads;
  shape.head_dim = cfg_.head_dim();
  shape.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  shape.causal = false;
  shape.n_kv = n_kv;
  return shape;
}

// The rotated keys and values of rows idx[0..n) (idx null: 0..n) of a q/k/v buffer into layer
// l of a gating state, as fp16 rows.
void Qwen3VLVision::record_kv(const float* qkv, const int* idx, int n, int l, GateState& st, ThreadPool& pool) const {
  const int H = cfg_.hidden, hd = cfg_.head_dim();
  const size_t layer = static_cast<size_t>(st.grid_h) * st.grid_w * H;
  pool.parallel_for(n, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const size_t at = static_cast<size_t>(l) * layer + static_cast<size_t>(idx ? idx[r] : r) * H;
      for (int h = 0; h < cfg_.heads; ++h) {
        kv_store_row(DType::F16, qkv + r * 3 * H + H + h * hd, hd, reinterpret_cast<uint8_t*>(&st.k[at + static_cast<size_t>(h) * hd]));
        kv_store_row(DType::F16, qkv + r * 3 * H + 2 * H + h * hd, hd, reinterpret_cast<uint8_t*>(&st.v[at + static_cast<size_t>(h) * hd]));
      }
    }
  });
}

void Qwen3VLVision::encode(const Qwen3VLPatches& p, float* out, ThreadPool& pool, std::vector<float>* patch_embeds,
                           std::vector<float>* block0, GateState* record) const {
  const Qwen3VLVisionConfig& c = cfg_;
  const int H = c.hidden, hd = c.head_dim(), K = 3 * c.temporal * c.patch * c.patch, M = c.merge;
  if (p.row_size != K || p.grid_t != 1 || p.grid_h % M || p.grid_w % M || p.grid_h < M || p.grid_w < M)
    fail("vision encoder: patches of %d values on a %d x %d x %d grid do not fit this encoder (%d values, merge %d)", p.row_size,
         p.grid_t, p.grid_h, p.grid_w, K, M);
  const int N = p.grid_h * p.grid_w;
  const size_t NH = static_cast<size_t>(N) * H;
  std::vector<float> x(NH), cs(static_cast<size_t>(N) * hd);
  embed(p, nullptr, N, x.data(), cs.data(), pool);
  if (patch_embeds) patch_embeds->assign(x.begin(), x.end());
  if (record) {
    record->grid_h = p.grid_h, record->grid_w = p.grid_w;
    record->k.assign(static_cast<size_t>(c.depth) * NH, 0);
    record->v.assign(static_cast<size_t>(c.depth) * NH, 0);
  }
  const AttentionShape shape = attention_shape(N);
  const int64_t stride = 3 * static_cast<int64_t>(H);
  const int64_t W = out_row();
  Scratch s;
  size_t next_ds = 0;
  for (int l = 0; l < c.depth; ++l) {
    block(blocks_[static_cast<size_t>(l)], x.data(), N, cs.data(), s, [&](float* qkv, float* att) {
      if (record) record_kv(qkv, nullptr, N, l, *record, pool);
      if (bf16_) {
        prof::OpScope op("attention_bf16", "bidirectional", attention_cost(static_cast<double>(N) * N, H, N, N, 4.0 * H));
        attention_bf16(shape, qkv, N, stride, qkv + H, qkv + 2 * H, stride, att, H, pool);
      } else if (f16_) {
        prof::OpScope op("attention_f16", "bidirectional", attention_cost(static_cast<double>(N) * N, H, N, N, 4.0 * H));
        attention_f16(shape, qkv, N, stride, qkv + H, qkv + 2 * H, stride, att, H, pool);
      } else {
        prof::OpScope op("attention", "bidirectional", attention_cost(static_cast<double>(N) * N, H, N, N, 4.0 * H));
        const KvView view{reinterpret_cast<const uint8_t*>(qkv + H), reinterpret_cast<const uint8_t*>(qkv + 2 * H), DType::F32,
                          stride * 4, static_cast<int64_t>(hd) * 4};
        flash_attention(shape, qkv, N, stride, view, att, H, pool);
      }
    }, pool);
    if (l == 0 && block0) block0->assign(x.begin(), x.end());
    if (next_ds < c.deepstack.size() && c.deepstack[next_ds] == l) {
      merge(deepstack_[next_ds], x.data(), N, out + static_cast<int64_t>(c.out_hidden) * static_cast<int64_t>(1 + next_ds), W, pool);
      ++next_ds;
    }
  }
  merge(merger_, x.data(), N, out, W, pool);
  if (f16_) check_f16_vision_output(out, static_cast<size_t>(N / (M * M)) * static_cast<size_t>(W));
  if (record) record->out.assign(out, out + static_cast<size_t>(N / (M * M)) * static_cast<size_t>(W));
}

// Token gating: only the patches of the changed merge blocks go through the blocks, attending to
// every patch's keys and values as the state holds them (theirs replaced as they are computed);
// the other patches keep their previous outputs, and only the changed blocks' output rows are
// merged again.
void Qwen3VLVision::encode_gated(const Qwen3VLPatches& p, const std::vector<int>& changed_blocks, GateState& st, float* out,
                                 ThreadPool& pool) const {
  const Qwen3VLVisionConfig& c = cfg_;
  const int H = c.hidden, hd = c.head_dim(), mm = c.merge * c.merge;
  const int N = p.grid_h * p.grid_w, blocks = N / mm;
  const int64_t W = out_row();
  if (st.grid_h != p.grid_h || st.grid_w != p.grid_w || st.out.size() != static_cast<size_t>(blocks) * static_cast<size_t>(W) ||
      st.k.size() != static_cast<size_t>(c.depth) * N * H)
    fail("gated encoding needs a state recorded from this tower on the same %d x %d patch grid", p.grid_h, p.grid_w);
  std::vector<int> idx;
  for (size_t b = 0; b < changed_blocks.size(); ++b) {
    const int blk = changed_blocks[b];
    if (blk < 0 || blk >= blocks || (b > 0 && blk <= changed_blocks[b - 1])) fail("gated encoding: block indexes must be increasing and in range");
    for (int k = 0; k < mm; ++k) idx.push_back(blk * mm + k);
  }
  const int n = static_cast<int>(idx.size()), nb = n / mm;
  if (n > 0) {
    std::vector<float> x(static_cast<size_t>(n) * H), cs(static_cast<size_t>(n) * hd), o(static_cast<size_t>(nb) * W);
    embed(p, idx.data(), n, x.data(), cs.data(), pool);
    const AttentionShape shape = attention_shape(N);
    const int64_t stride = 3 * static_cast<int64_t>(H);
    const size_t layer = static_cast<size_t>(N) * H;
    Scratch s;
    size_t next_ds = 0;
    for (int l = 0; l < c.depth; ++l) {
      block(blocks_[static_cast<size_t>(l)], x.data(), n, cs.data(), s, [&](float* qkv, float* att) {
        record_kv(qkv, idx.data(), n, l, st, pool);
        prof::OpScope op("attention", "gated", attention_cost(static_cast<double>(n) * N, H, n, N, 4.0 * H));
        const KvView view{reinterpret_cast<const uint8_t*>(&st.k[static_cast<size_t>(l) * layer]),
                          reinterpret_cast<const uint8_t*>(&st.v[static_cast<size_t>(l) * layer]), DType::F16,
                          static_cast<int64_t>(H) * 2, static_cast<int64_t>(hd) * 2};
        flash_attention(shape, qkv, n, stride, view, att, H, pool);
      }, pool);
      if (next_ds < c.deepstack.size() && c.deepstack[next_ds] == l) {
        merge(deepstack_[next_ds], x.data(), n, o.data() + static_cast<int64_t>(c.out_hidden) * static_cast<int64_t>(1 + next_ds), W, pool);
        ++next_ds;
      }
    }
    merge(merger_, x.data(), n, o.data(), W, pool);
    if (f16_) check_f16_vision_output(o.data(), static_cast<size_t>(nb) * static_cast<size_t>(W));
    for (int b = 0; b < nb; ++b)
      std::copy(&o[static_cast<size_t>(b) * W], &o[static_cast<size_t>(b + 1) * W], st.out.begin() + static_cast<std::ptrdiff_t>(changed_blocks[static_cast<size_t>(b)]) * W);
  }
  std::copy(st.out.begin(), st.out.end(), out);
}

}  // namespace tessera
