#include "models/smolvlm/siglip.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/zeroed_buffer.h"
#include "core/error.h"
#include "core/preempt.h"
#include "kernels/attention.h"
#include "kernels/attention_bf16.h"
#include "kernels/attention_f16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/elementwise.h"
#include "kernels/f16_tiles.h"
#include "kernels/q8_panels.h"
#include "kernels/quantize.h"
#include "models/gguf_source.h"
#include "profile/profiler.h"

namespace tessera {

AttentionShape tile_attention_shape(const SiglipConfig& c) {
  AttentionShape shape;
  shape.n_head = shape.n_head_kv = c.heads;
  shape.head_dim = c.hidden / c.heads;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  shape.causal = false;
  shape.n_kv = c.n_patches();
  return shape;
}

namespace {

uint64_t u(int x) { return static_cast<uint64_t>(x); }

Linear linear(const TensorSource& s, const std::string& w, const std::string& b, int rows, int cols) {
  Linear l;
  l.w = s.matrix(w, rows, cols);
  if (!b.empty()) l.b = s.floats(b, {u(rows)});
  return l;
}

// A float matrix (F32, F16, BF16: the types the fp32-GEMM panels take) whose rows are whole Q8_0
// blocks: what quantize_to_q8_0 takes.
bool quantizable_to_q8_0(const WeightMatrix& w) { return supports_gemm_panels(w.type) && w.cols % 32 == 0 && w.data; }

// n rows of x (xs floats apart, cols used) quantized per 32 for matmul_q8, into this thread's
// buffer (workers get its pointer, never the vector).
const BlockQ8_1* quantized_rows(const float* x, int n, int64_t xs, int64_t cols, ThreadPool& pool) {
  thread_local std::vector<BlockQ8_1> xq;
  xq.resize(static_cast<size_t>(n) * static_cast<size_t>(cols / 32));
  quantize_rows_q8_1(x, n, xs, xq.data(), cols, pool);
  return xq.data();
}

// y[n][w.rows] = x[n][xs-strided rows of w.cols] W^T: the fp32 GEMM, or, on weights that carry
// q8 panels (use_q8_activations), 8-bit activations and matmul_q8, or on weights that carry bf16
// tiles (use_bf16_gemm) or f16 tiles (use_f16_gemm), the bf16 or fp16 GEMM.
// xb: x already rounded to bf16 tiles (bf16_tiles.h) for weights that carry bf16 tiles; x unused.
// bias: taken by the bf16 and fp16 GEMMs as their sums' start (only with their tiles; the caller
// adds it else).
// gelu_b16, qkv (with xb): the bf16 GEMM's epilogues (gemm_bf16_rounded); y is not written.
void mm(const WeightMatrix& w, const float* x, int n, int64_t xs, float* y, ThreadPool& pool, const char* what,
        const uint16_t* xb = nullptr, const float* bias = nullptr, uint16_t* gelu_b16 = nullptr,
        const Bf16QkvTarget* qkv = nullptr) {
  char detail[80] = "";
  if (prof::on())
    std::snprintf(detail, sizeof detail, "%s %s %lldx%lld", what, dtype_name(w.type), static_cast<long long>(w.rows),
                  static_cast<long long>(w.cols));
  prof::OpScope op(w.panels ? "matmul_q8" : w.bf16_tiles ? "gemm_bf16" : w.f16_tiles ? "gemm_f16" : "gemm", detail,
                   matmul_cost(w, n));
  if (xb) return gemm_bf16_rounded(w, xb, n, y, w.rows, pool, bias, gelu_b16, qkv);
  if (w.bf16_tiles) return gemm_bf16(w, x, n, xs, y, w.rows, pool, bias);
  if (w.f16_tiles) return gemm_f16(w, x, n, xs, y, w.rows, pool, bias);
  if (!w.panels) return gemm(w, x, n, xs, y, w.rows, pool);
  matmul_q8(w, quantized_rows(x, n, xs, w.cols, pool), n, w.cols / 32, y, w.rows, pool);
}

// y[n][rows] = x[n][cols] W^T + b, then GELU-tanh if asked (fc1). The bias and the GELU go row by
// row over the pool in one pass, while each row is still in cache: the same bits as adding the
// bias and then applying the GELU to whole rows, one sweep over y instead of a serial one plus a
// parallel one. The bf16 GEMM starts its sums from the bias instead (bf16_tiles.h), so with bf16
// weights a layer without GELU or bf16 output needs no pass at all.
//
// With the bf16 path, xb is x already rounded (see mm), and where the next GEMM takes bf16 too,
// out_b16 receives the result rounded into its A tiles instead of y: each row is finished in a
// per-thread scratch row (bias, GELU, rounding in L1), so y is read once and never written back.
// fc1 with bf16 tiles and rounded input does not even write y: its GEMM applies the GELU and
// rounds each 32 × 32 block of results into fc2's tiles while they are in L1 (gemm_bf16_rounded's
// epilogue; the same bits, faster than the GEMM plus this pass: docs/measurements.md).
void apply(const Linear& l, const float* x, int n, float* y, ThreadPool& pool, const char* what, bool gelu = false,
           const uint16_t* xb = nullptr, uint16_t* out_b16 = nullptr) {
  const float* const bias = l.b.empty() ? nullptr : l.b.data();
  const bool bias_in_gemm = l.w.bf16_tiles || l.w.f16_tiles;
  // fc1 on rounded activations into fc2's: the GEMM applies the GELU and rounds as it goes, and y
  // is never written (the same bits as the pass below)
  if (gelu && xb && out_b16 && bias_in_gemm) return mm(l.w, x, n, l.w.cols, y, pool, what, xb, bias, out_b16);
  mm(l.w, x, n, l.w.cols, y, pool, what, xb, bias_in_gemm ? bias : nullptr);
  const float* const b = bias_in_gemm ? nullptr : bias;
  if (!b && !gelu && !out_b16) return;
  const int64_t R = l.w.rows;
  prof::OpScope op(gelu ? (b ? "bias+gelu" : "gelu") : b ? "bias" : "round bf16", what,
                   bias_gelu_cost(n, R, gelu, out_b16 != nullptr));
  pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> scratch;
    if (out_b16) scratch.resize(static_cast<size_t>(R));
    for (int64_t i = i0; i < i1; ++i) {
      float* row = y + i * R;
      if (out_b16) row = static_cast<float*>(std::memcpy(scratch.data(), row, static_cast<size_t>(R) * sizeof(float)));
      if (b) add_inplace(row, b, R);
      if (gelu) gelu_tanh(row, R);
      if (out_b16) round_row_bf16(row, i, R, out_b16);
    }
  });
}

// Bidirectional attention of n_q query rows over all of a tile's keys/values (n_patches x
// hidden, f32, heads side by side): flash_attention, or with bf16 (use_bf16_gemm) the bf16
// attention on AMX tiles, or with f16 (use_f16_gemm) the fp16 attention.
// out_b16 (bf16 only): the output rounded into the o projection's activation tiles instead.

void tile_attention(const SiglipConfig& c, const float* q, int n_q, const float* k, const float* v, int64_t stride,
                    float* out, bool bf16, bool f16, ThreadPool& pool, const char* what, uint16_t* out_b16 = nullptr) {
  const int N = c.n_patches(), H = c.hidden, hd = H / c.heads;
  const AttentionShape shape = tile_attention_shape(c);
  const KvView view{reinterpret_cast<const uint8_t*>(k), reinterpret_cast<const uint8_t*>(v), DType::F32,
                    stride * 4, static_cast<int64_t>(hd) * 4};
  prof::OpScope op(bf16 ? "attention_bf16" : f16 ? "attention_f16" : "attention", what,
                   attention_cost(static_cast<double>(n_q) * N, H, n_q, N, 4.0 * H));  // fp32 K/V
  if (bf16) return attention_bf16(shape, q, n_q, stride, k, v, stride, out, H, pool, out_b16);
  if (f16) return attention_f16(shape, q, n_q, stride, k, v, stride, out, H, pool);
  flash_attention(shape, q, n_q, stride, view, out, H, pool);
}

// Whether q, k and v all run on 8-bit activations (use_q8_activations) over rows of one length:
// then one quantization of the normed rows feeds all three (qkv_q8).
bool q8_qkv(const SiglipLayer& L) {
  return L.q.w.panels && L.k.w.panels && L.v.w.panels && L.k.w.cols == L.q.w.cols && L.v.w.cols == L.q.w.cols;
}

// q, k and v of n rows of x on 8-bit activations into y, each row [q | k | v] (row stride the
// three widths): x quantized once and the three matrices in one pass of the pool
// (matmul_q8_group), then their biases. Each output has the bits three separate mm + bias passes
// give it.
void qkv_q8(const SiglipLayer& L, const float* x, int n, float* y, ThreadPool& pool) {
  const int64_t cols = L.q.w.cols, ys = L.q.w.rows + L.k.w.rows + L.v.w.rows;
  {
    OpCost cost;  // the three matrices' costs, x read once
    for (const Linear* l : {&L.q, &L.k, &L.v}) {
      const OpCost c = matmul_cost(l->w, n);
      cost.flops += c.flops, cost.bytes += c.bytes;
    }
    cost.bytes -= 2 * 4.0 * static_cast<double>(n) * static_cast<double>(cols);
    char detail[80] = "";
    if (prof::on()) std::snprintf(detail, sizeof detail, "qkv %s %lldx%lld", dtype_name(L.q.w.type), static_cast<long long>(ys),
                                  static_cast<long long>(cols));
    prof::OpScope op("matmul_q8", detail, cost);
    const Q8Output outs[3] = {{&L.q.w, y, ys}, {&L.k.w, y + L.q.w.rows, ys}, {&L.v.w, y + L.q.w.rows + L.k.w.rows, ys}};
    matmul_q8_group(outs, 3, quantized_rows(x, n, cols, cols, pool), n, cols / 32, pool);
  }
  if (L.q.b.empty() && L.k.b.empty() && L.v.b.empty()) return;
  prof::OpScope op("bias", "qkv", bias_gelu_cost(n, ys, false, false));
  pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = y + i * ys;
      for (const Linear* l : {&L.q, &L.k, &L.v}) {
        if (!l->b.empty()) add_inplace(row, l->b.data(), l->w.rows);
        row += l->w.rows;
      }
    }
  });
}

// Whether a layer's q/k/v GEMM rounds its results straight into the bf16 attention's layouts
// (Bf16QkvTarget): one stacked bf16 matrix (use_bf16_gemm), rounded input, head_dim of 32s.
bool fused_qkv(const SiglipLayer& L, const AttentionShape& s) {
  return L.qkv.w.bf16_tiles && L.q.w.bf16_tiles && L.k.w.bf16_tiles && L.v.w.bf16_tiles && s.head_dim % 32 == 0;
}

// im2col for the patch embedding: row r of cols is patch patches[r] (every patch in order when
// patches is null) as (channel, ky, kx).
void im2col(const SiglipConfig& c, const float* chw, const int* patches, int n, float* cols) {
  const int S = c.image_size, P = c.patch_size, side = S / P;
  for (int r = 0; r < n; ++r) {
    const int patch = patches ? patches[r] : r, py = patch / side, px = patch % side;
    float* dst = cols + static_cast<size_t>(r) * 3 * P * P;
    for (int ch = 0; ch < 3; ++ch)
      for (int ky = 0; ky < P; ++ky)
        std::memcpy(dst + (ch * P + ky) * P, chw + (static_cast<size_t>(ch) * S + py * P + ky) * S + px * P, P * sizeof(float));
  }
}

// Row-wise LayerNorm of n rows of x over the pool; `pending` is a residual still to add (fused
// into the norm: add_layer_norm). With out_b16, the normed rows go (through a per-thread scratch
// row) straight into the next bf16 GEMMs' A tiles, and out is not written.
void norm_rows(float* x, int n, int H, float eps, const float* w, const float* b, const float* pending, float* out,
               uint16_t* out_b16, ThreadPool& pool) {
  prof::OpScope op(pending ? "add+layer_norm" : "layer_norm", "", layer_norm_cost(n, H, pending != nullptr, out_b16 ? 2 : 4));
  pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> scratch;
    if (out_b16) scratch.resize(static_cast<size_t>(H));
    for (int64_t i = i0; i < i1; ++i) {
      float* xi = x + static_cast<size_t>(i) * H;
      float* o = out_b16 ? scratch.data() : out + static_cast<size_t>(i) * H;
      if (pending) add_layer_norm(xi, pending + static_cast<size_t>(i) * H, w, b, o, H, eps);
      else layer_norm(xi, w, b, o, H, eps);
      if (out_b16) round_row_bf16(o, i, H, out_b16);
    }
  });
}

// A float buffer of the tile's pass: zero pages from calloc, resident only once written, so a
// buffer a path never writes costs no memory. The bf16 path's GEMM epilogues leave the fp32
// normed rows, attention output and MLP activations unwritten (12.6 MB of MLP rows at SmolVLM's
// shape); value-initialized vectors had made them all resident and cost the first tile their
// page faults. Every element read is written first within a tile.
class TileFloats {
 public:
  void resize(size_t n) {
    if (n != size()) buf_.reset(n * sizeof(float), "vision encoder's buffers");
  }
  float* data() { return reinterpret_cast<float*>(buf_.data()); }
  size_t size() const { return buf_.size() / sizeof(float); }

 private:
  ZeroedBuffer buf_;
};

// The buffers of one tile's pass, per thread (workers get raw pointers, never the buffers).
// q, k, v and qkv are sized by the path that uses them.
struct TileScratch {
  TileFloats cols, x, xn, q, k, v, qkv, att, tmp, ff;
  std::vector<uint16_t> xnb, ffb;  // xn and ff rounded for bf16 GEMMs (bf16_tiles.h)
};

TileScratch& tile_scratch(const SiglipConfig& c, bool bf16) {
  thread_local TileScratch s;
  const size_t N = static_cast<size_t>(c.n_patches()), H = static_cast<size_t>(c.hidden);
  const int P = c.patch_size;
  s.cols.resize(N * 3 * static_cast<size_t>(P * P));
  s.x.resize(N * H);
  s.xn.resize(N * H);
  s.att.resize(N * H);
  s.tmp.resize(N * H);
  s.ff.resize(N * static_cast<size_t>(c.ff));
  // bf16 activations where every consumer of a norm or GELU output is a bf16 GEMM (use_bf16_gemm
  // repacks all of them unless a layer's weights are quantized): rounded once, by their producer.
  // The same bits as each gemm_bf16 rounding its own copy.
  if (bf16) {
    s.xnb.resize(static_cast<size_t>(bf16_act_elems(c.n_patches(), c.hidden)));
    s.ffb.resize(static_cast<size_t>(bf16_act_elems(c.n_patches(), c.ff)));
    zero_pad_tokens_bf16(s.xnb.data(), c.n_patches(), c.hidden);
    zero_pad_tokens_bf16(s.ffb.data(), c.n_patches(), c.ff);
  }
  return s;
}

// What a tile's pass needs to know once: the attention's shape and bf16 layout. A recorded state
// keeps the bf16 attention's packed K/V wherever that attention runs (bf16): a layer whose q/k/v
// GEMM cannot round into the layouts (8-bit activations, head_dim not of 32s) packs its fp32 K/V
// into the state instead (attention_bf16_keeping), the same bf16 bits; else fp32 K/V.
struct TilePlan {
  AttentionShape shape;
  Bf16AttnDims dims;
  bool bf16 = false;      // use_bf16_gemm was called: a recorded state is record->k16/v16
  bool f16 = false;       // use_f16_gemm was called (the fp16 attention)
  size_t nk = 0, nv = 0;  // elements of one layer's packed K and V
};

TilePlan plan_tile(const SiglipConfig& c, bool bf16, bool f16) {
  TilePlan p;
  p.shape = tile_attention_shape(c);
  p.bf16 = bf16;
  p.f16 = f16;
  if (bf16) check_bf16_attn_shape(p.shape);
  p.dims = bf16_attn_dims(p.shape, c.n_patches());
  p.nk = static_cast<size_t>(bf16_attn_k_elems(p.dims));
  p.nv = static_cast<size_t>(bf16_attn_v_elems(p.dims));
  return p;
}

// The pre-rounded bf16 inputs of one layer's GEMMs, where their weights take bf16 (else null).
// q/k/v, o and fc1 all read xnb in turn (each rewritten after the last reader); fc2 reads ffb.
struct LayerBf16Inputs {
  uint16_t *qkv = nullptr, *o = nullptr, *fc1 = nullptr, *fc2 = nullptr;
};

LayerBf16Inputs bf16_inputs(const SiglipLayer& L, bool bf16, TileScratch& s) {
  LayerBf16Inputs in;
  if (!bf16) return in;
  if (L.q.w.bf16_tiles && L.k.w.bf16_tiles && L.v.w.bf16_tiles) in.qkv = s.xnb.data();
  if (L.o.w.bf16_tiles) in.o = s.xnb.data();
  if (L.fc1.w.bf16_tiles) in.fc1 = s.xnb.data();
  if (L.fc2.w.bf16_tiles) in.fc2 = s.ffb.data();
  return in;
}

// Self-attention of layer li over the tile's own keys (no cache: K/V are this layer's), from the
// normed rows s.xn (or in.qkv) into s.att (or rounded into in.o); K/V copied into a recorded state.
void self_attention(const SiglipConfig& c, const SiglipLayer& L, size_t li, const TilePlan& plan, TileScratch& s,
                    const LayerBf16Inputs& in, Idefics3Vision::TileState* record, ThreadPool& pool) {
  const int N = c.n_patches(), H = c.hidden;
  if (plan.bf16 && fused_qkv(L, plan.shape)) {
    // the GEMM rounds q, k and v straight into the attention's tile layouts: no fp32 q/k/v,
    // no packing pass (the same bits as packing them); a recorded state is where K/V go
    Bf16AttnBuffers bufs = bf16_attn_scratch(plan.dims);
    if (record) bufs.k = record->k16.data() + li * plan.nk, bufs.v = record->v16.data() + li * plan.nv;
    const Bf16QkvTarget target{&plan.dims, bufs};
    mm(L.qkv.w, s.xn.data(), N, H, nullptr, pool, "qkv", in.qkv, L.qkv.b.empty() ? nullptr : L.qkv.b.data(), nullptr, &target);
    prof::OpScope op("attention_bf16", "bidirectional", attention_cost(static_cast<double>(N) * N, H, N, N, 2.0 * H));
    attention_bf16_packed(plan.dims, target.bufs, s.att.data(), H, pool, in.o);
    return;
  }
  const float *qp, *kp, *vp;
  int64_t stride = H;
  if (in.qkv && L.qkv.w.bf16_tiles) {  // q, k and v side by side in one row (one GEMM over the stacked matrix)
    s.qkv.resize(3 * s.x.size());
    apply(L.qkv, s.xn.data(), N, s.qkv.data(), pool, "qkv", false, in.qkv);
    qp = s.qkv.data(), kp = qp + H, vp = qp + 2 * H, stride = 3 * H;
  } else if (q8_qkv(L)) {  // 8-bit activations: the normed rows quantized once, q, k and v side by side
    s.qkv.resize(3 * s.x.size());
    qkv_q8(L, s.xn.data(), N, s.qkv.data(), pool);
    qp = s.qkv.data(), kp = qp + H, vp = qp + 2 * H, stride = 3 * H;
  } else {  // each in its own buffer
    s.q.resize(s.x.size()), s.k.resize(s.x.size()), s.v.resize(s.x.size());
    qp = s.q.data(), kp = s.k.data(), vp = s.v.data();
    apply(L.q, s.xn.data(), N, s.q.data(), pool, "q", false, in.qkv);
    apply(L.k, s.xn.data(), N, s.k.data(), pool, "k", false, in.qkv);
    apply(L.v, s.xn.data(), N, s.v.data(), pool, "v", false, in.qkv);
  }
  if (record && plan.bf16) {  // the attention packs K/V into the state as it runs
    prof::OpScope op("attention_bf16", "bidirectional", attention_cost(static_cast<double>(N) * N, H, N, N, 4.0 * H));
    attention_bf16_keeping(plan.shape, qp, N, stride, kp, vp, stride, record->k16.data() + li * plan.nk,
                           record->v16.data() + li * plan.nv, s.att.data(), H, pool, in.o);
    return;
  }
  if (record)
    for (int i = 0; i < N; ++i) {
      const size_t at = li * static_cast<size_t>(N) * H + static_cast<size_t>(i) * H;
      std::copy_n(kp + i * stride, H, record->k.begin() + static_cast<std::ptrdiff_t>(at));
      std::copy_n(vp + i * stride, H, record->v.begin() + static_cast<std::ptrdiff_t>(at));
    }
  tile_attention(c, qp, N, kp, vp, stride, s.att.data(), plan.bf16, plan.f16, pool, "bidirectional", in.o);
}

void check_config(const SiglipConfig& c, const std::string& file) {
  auto bad = [&](const char* what) { fail("%s: vision config: %s", file.c_str(), what); };
  if (c.patch_size < 1 || c.patch_size > 64) bad("patch size out of range");
  if (c.image_size < c.patch_size || c.image_size > 4096 || c.image_size % c.patch_size) bad("image size is not a multiple of the patch size");
  if (c.hidden < 1 || c.hidden > 16384 || c.ff < 1 || c.ff > 65536) bad("widths out of range");
  if (c.layers < 1 || c.layers > 256) bad("layer count out of range");
  if (c.heads < 1 || c.hidden % c.heads || (c.hidden / c.heads) % 2) bad("head count does not divide the width");
  const int side = c.image_size / c.patch_size;
  if (c.scale_factor < 1 || side % c.scale_factor) bad("pixel-shuffle scale factor does not divide the patch grid");
  if (!(c.eps > 0 && c.eps < 1)) bad("layer-norm epsilon out of range");
  if (c.text_hidden < 1 || c.text_hidden > 65536) bad("projection width out of range");
}

}  // namespace

void Idefics3Vision::load_weights(const TensorSource& s, bool g, bool q8_0_at_load) {
  const SiglipConfig& c = cfg_;
  const int P = c.patch_size, H = c.hidden;
  const std::string vp = g ? "v." : "model.vision_model.";
  // the conv kernel [H][3][P][P] is a matrix of rows (c, ky, kx): the order im2col produces
  {
    const TensorView& t = s.need(g ? "v.patch_embd.weight" : vp + "embeddings.patch_embedding.weight", {u(P), u(P), 3, u(H)});
    patch_.w.type = t.type;
    patch_.w.rows = H;
    patch_.w.cols = 3 * P * P;
    patch_.w.data = t.data;
    patch_.w.row_stride = row_bytes(t.type, patch_.w.cols);
  }
  patch_.b = s.floats(g ? "v.patch_embd.bias" : vp + "embeddings.patch_embedding.bias", {u(H)});
  pos_ = s.floats(g ? "v.position_embd.weight" : vp + "embeddings.position_embedding.weight", {u(H), u(c.n_patches())});
  layers_.resize(static_cast<size_t>(c.layers));
  for (int i = 0; i < c.layers; ++i) {
    SiglipLayer& L = layers_[static_cast<size_t>(i)];
    const std::string p = g ? "v.blk." + std::to_string(i) + "." : vp + "encoder.layers." + std::to_string(i) + ".";
    auto name = [&](const char* gguf, const char* hf) { return p + (g ? gguf : hf); };
    L.ln1_w = s.floats(name("ln1.weight", "layer_norm1.weight"), {u(H)});
    L.ln1_b = s.floats(name("ln1.bias", "layer_norm1.bias"), {u(H)});
    L.ln2_w = s.floats(name("ln2.weight", "layer_norm2.weight"), {u(H)});
    L.ln2_b = s.floats(name("ln2.bias", "layer_norm2.bias"), {u(H)});
    L.q = linear(s, name("attn_q.weight", "self_attn.q_proj.weight"), name("attn_q.bias", "self_attn.q_proj.bias"), H, H);
    L.k = linear(s, name("attn_k.weight", "self_attn.k_proj.weight"), name("attn_k.bias", "self_attn.k_proj.bias"), H, H);
    L.v = linear(s, name("attn_v.weight", "self_attn.v_proj.weight"), name("attn_v.bias", "self_attn.v_proj.bias"), H, H);
    std::string out = name("attn_out", "self_attn.out_proj");
    if (g && !s.find(out + ".weight")) out = p + "attn_output";
    L.o = linear(s, out + ".weight", out + ".bias", H, H);
    if (g) {
      // llama.cpp's converters have named SigLIP's fc1/fc2 both ways round: go by shape
      const TensorView* up = s.find(p + "ffn_up.weight");
      const bool up_is_fc1 = up && up->dims.size() == 2 && up->dims[0] == u(H);
      const std::string f1 = p + (up_is_fc1 ? "ffn_up" : "ffn_down"), f2 = p + (up_is_fc1 ? "ffn_down" : "ffn_up");
      L.fc1 = linear(s, f1 + ".weight", f1 + ".bias", c.ff, H);
      L.fc2 = linear(s, f2 + ".weight", f2 + ".bias", H, c.ff);
    } else {
      L.fc1 = linear(s, p + "mlp.fc1.weight", p + "mlp.fc1.bias", c.ff, H);
      L.fc2 = linear(s, p + "mlp.fc2.weight", p + "mlp.fc2.bias", H, c.ff);
    }
  }
  post_w_ = s.floats(g ? "v.post_ln.weight" : vp + "post_layernorm.weight", {u(H)});
  post_b_ = s.floats(g ? "v.post_ln.bias" : vp + "post_layernorm.bias", {u(H)});
  const int in = H * c.scale_factor * c.scale_factor;
  proj_ = s.matrix(g ? "mm.model.fc.weight" : "model.connector.modality_projection.proj.weight", c.text_hidden, in);
  // Repack the dense GEMM weights once into the kernels' panel layout (as llama.cpp's CPU_REPACK
  // does for its own kernels), then let the file's copy go: the panels take the same bytes.
  const std::vector<WeightMatrix*> dense = linear_weights();
  packed_.reserve(dense.size());
  for (WeightMatrix* w : dense) {
    if (!supports_gemm_panels(w->type)) continue;
    // a matrix about to be quantized (quantize_to_q8_0) is read from the file once, for that: its
    // panels would only raise the load's peak by the float weights' size
    if (q8_0_at_load && w != &patch_.w && quantizable_to_q8_0(*w)) continue;
    packed_.push_back(pack_gemm_panels(*w));
    packed_bytes_ += packed_.back().bytes;
    s.release(w->data, static_cast<size_t>(w->rows) * w->row_stride);
    released_file_bytes_ += static_cast<size_t>(w->rows) * w->row_stride;
    *w = packed_.back().matrix;
  }
}

SiglipConfig read_siglip_config(const GgufFile& f, const std::string& path, Idefics3PreprocessConfig& pre) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != "clip") fail("%s: not an mmproj file (architecture '%s', expected 'clip')", path.c_str(), arch.c_str());
  const std::string proj = f.get_string("clip.projector_type", f.get_string("clip.vision.projector_type", ""));
  if (proj != "idefics3") fail("%s: projector type '%s' is not supported (expected 'idefics3')", path.c_str(), proj.c_str());
  if (!f.get_bool("clip.has_vision_encoder", true)) fail("%s: the file has no vision encoder", path.c_str());
  SiglipConfig c;
  c.image_size = static_cast<int>(f.get_int("clip.vision.image_size", 1, 4096));
  c.patch_size = static_cast<int>(f.get_int("clip.vision.patch_size", 1, 64));
  c.hidden = static_cast<int>(f.get_int("clip.vision.embedding_length", 1, 16384));
  c.ff = static_cast<int>(f.get_int("clip.vision.feed_forward_length", 1, 65536));
  c.layers = static_cast<int>(f.get_int("clip.vision.block_count", 1, 256));
  c.heads = static_cast<int>(f.get_int("clip.vision.attention.head_count", 1, 1024));
  c.eps = static_cast<float>(f.get_float("clip.vision.attention.layer_norm_epsilon", 1e-12, 0.1, 1e-6));
  c.scale_factor = static_cast<int>(f.get_int("clip.vision.projector.scale_factor", 1, 64, 4));
  c.text_hidden = static_cast<int>(f.get_int("clip.vision.projection_dim", 1, 65536));
  check_config(c, path);
  // image_mean / image_std: exactly 3 finite numbers each (short arrays were a llama.cpp CVE)
  for (const char* key : {"clip.vision.image_mean", "clip.vision.image_std"}) {
    const GgufValue* a = f.find(key);
    if (!a) continue;
    if (a->type != GgufType::ARRAY || a->count != 3 || gguf_scalar_size(a->elem) == 0)
      fail("%s: %s must be an array of 3 numbers", path.c_str(), key);
    const bool is_std = std::strcmp(key, "clip.vision.image_std") == 0;
    for (int i = 0; i < 3; ++i) {
      const double x = a->double_at(static_cast<uint64_t>(i));
      if (!std::isfinite(x) || (is_std && !(x > 1e-6)) || std::fabs(x) > 1e3)
        fail("%s: %s[%d] = %g is out of range", path.c_str(), key, i, x);
      (is_std ? pre.std : pre.mean)[i] = static_cast<float>(x);
    }
  }
  pre.tile = c.image_size;
  pre.longest_edge = static_cast<int>(f.get_int("clip.vision.preproc_image_size", c.image_size, 4 * 4096, 4 * c.image_size));
  return c;
}

std::unique_ptr<Idefics3Vision> Idefics3Vision::load_mmproj(const std::string& path, bool q8_0) {
  std::unique_ptr<Idefics3Vision> v(new Idefics3Vision());
  v->file_ = GgufFile::open(path);
  const GgufFile& f = *v->file_;
  v->cfg_ = read_siglip_config(f, path, v->pre_);
  GgufTensorSource src(f);
  v->load_weights(src, true, q8_0);
  if (q8_0) v->quantize_at_load();
  return v;
}

std::unique_ptr<Idefics3Vision> Idefics3Vision::from_hf(const SiglipConfig& cfg, std::shared_ptr<const TensorSource> src,
                                                        const Idefics3PreprocessConfig& pre, bool q8_0) {
  check_config(cfg, src->describe());
  std::unique_ptr<Idefics3Vision> v(new Idefics3Vision());
  v->cfg_ = cfg;
  v->pre_ = pre;
  v->load_weights(*src, false, q8_0);
  v->source_ = std::move(src);
  if (q8_0) v->quantize_at_load();
  return v;
}

void Idefics3Vision::quantize_at_load() {
  ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  quantize_to_q8_0(pool);
}

void Idefics3Vision::encode_tile(const float* chw, float* encoded, ThreadPool& pool, TileState* record) const {
  const SiglipConfig& c = cfg_;
  const int N = c.n_patches(), H = c.hidden;
  const size_t NH = static_cast<size_t>(N) * H;
  prof::note_memory("vision weights (repacked)", packed_bytes_);
  // bf16 activation tiles where some layer's GEMM takes them (not where 8-bit activations replaced them all)
  bool b16_acts = false;
  for (const SiglipLayer& L : layers_)
    for (const Linear* l : {&L.q, &L.k, &L.v, &L.o, &L.fc1, &L.fc2}) b16_acts = b16_acts || l->w.bf16_tiles;
  TileScratch& s = tile_scratch(c, bf16_attention_ && b16_acts);
  embed_patches(chw, nullptr, N, s.cols.data(), s.x.data(), pool, "patch");
  const TilePlan plan = plan_tile(c, bf16_attention_, f16_);
  if (record) {
    record->k = record->v = {};
    record->k16 = record->v16 = {};
    if (plan.bf16) {
      record->k16.resize(layers_.size() * plan.nk);
      record->v16.resize(layers_.size() * plan.nv);
    } else {
      record->k.resize(layers_.size() * NH);
      record->v.resize(layers_.size() * NH);
    }
    record->encoded.resize(NH);
  }
  const float* pending = nullptr;  // the previous layer's MLP output, added in the next norm
  for (size_t li = 0; li < layers_.size(); ++li) {
    preemption_point();  // background encoding yields here (the tile is encoded again later)
    const SiglipLayer& L = layers_[li];
    const LayerBf16Inputs in = bf16_inputs(L, bf16_attention_, s);
    norm_rows(s.x.data(), N, H, c.eps, L.ln1_w.data(), L.ln1_b.data(), pending, s.xn.data(), in.qkv, pool);
    self_attention(c, L, li, plan, s, in, record, pool);
    preemption_point();  // and inside the layer: a question waits for one of its three parts
    apply(L.o, s.att.data(), N, s.tmp.data(), pool, "o", false, in.o);
    norm_rows(s.x.data(), N, H, c.eps, L.ln2_w.data(), L.ln2_b.data(), s.tmp.data(), s.xn.data(), in.fc1, pool);
    apply(L.fc1, s.xn.data(), N, s.ff.data(), pool, "fc1", /*gelu=*/true, in.fc1, in.fc2);
    preemption_point();
    apply(L.fc2, s.ff.data(), N, s.tmp.data(), pool, "fc2", false, in.fc2);
    pending = s.tmp.data();
  }
  norm_rows(s.x.data(), N, H, c.eps, post_w_.data(), post_b_.data(), pending, encoded, nullptr, pool);
  if (f16_) check_f16_vision_output(encoded, NH);
  if (record) std::copy(encoded, encoded + NH, record->encoded.begin());
}

void Idefics3Vision::embed_patches(const float* chw, const int* patches, int n, float* cols, float* x, ThreadPool& pool,
                                   const char* what) const {
  const int H = cfg_.hidden;
  im2col(cfg_, chw, patches, n, cols);
  apply(patch_, cols, n, x, pool, what);
  for (int r = 0; r < n; ++r)
    add_inplace(x + static_cast<size_t>(r) * H, &pos_[static_cast<size_t>(patches ? patches[r] : r) * H], H);
}


void Idefics3Vision::encode_tile_gated(const float* chw, const std::vector<int>& changed, TileState& st, float* encoded,
                                       ThreadPool& pool) const {
  const SiglipConfig& c = cfg_;
  const int P = c.patch_size, N = c.n_patches(), H = c.hidden;
  const size_t NH = static_cast<size_t>(N) * H;
  const AttentionShape attn_shape = tile_attention_shape(c);
  const Bf16AttnDims D = bf16_attn_dims(attn_shape, N);
  const size_t nk = static_cast<size_t>(bf16_attn_k_elems(D)), nv = static_cast<size_t>(bf16_attn_v_elems(D));
  const bool packed = !st.k16.empty();  // K/V as the bf16 attention holds them (encode_tile)
  const bool fits = packed ? bf16_attention_ && st.k16.size() == layers_.size() * nk && st.v16.size() == layers_.size() * nv
                           : st.k.size() == layers_.size() * NH && st.v.size() == layers_.size() * NH;
  if (st.encoded.size() != NH || !fits) fail("gated encoding needs a state recorded from this tower");
  const int n = static_cast<int>(changed.size());
  for (int i : changed)
    if (i < 0 || i >= N) fail("gated encoding: patch %d out of range", i);
  if (n == 0) {
    std::copy(st.encoded.begin(), st.encoded.end(), encoded);
    return;
  }
  std::vector<float> cols(static_cast<size_t>(n) * 3 * P * P), x(static_cast<size_t>(n) * H), xn(x.size()), q(x.size()),
      kk(x.size()), vv(x.size()), att(x.size()), tmp(x.size()), ff(static_cast<size_t>(n) * c.ff);
  embed_patches(chw, changed.data(), n, cols.data(), x.data(), pool, "patch (gated)");
  auto norm = [&](const float* w, const float* b, const float* pending, float* out) {
    norm_rows(x.data(), n, H, c.eps, w, b, pending, out, nullptr, pool);
  };
  const float* pending = nullptr;
  size_t li = 0;
  for (const SiglipLayer& L : layers_) {
    norm(L.ln1_w.data(), L.ln1_b.data(), pending, xn.data());
    apply(L.q, xn.data(), n, q.data(), pool, "q (gated)");
    apply(L.k, xn.data(), n, kk.data(), pool, "k (gated)");
    apply(L.v, xn.data(), n, vv.data(), pool, "v (gated)");
    // the changed tokens' keys and values replace their old ones
    if (packed) {
      uint16_t* K = st.k16.data() + li * nk;
      uint16_t* V = st.v16.data() + li * nv;
      pack_attn_bf16_keys(D, kk.data(), vv.data(), H, changed.data(), n, K, V);
      prof::OpScope op("attention_bf16", "gated", attention_cost(static_cast<double>(n) * N, H, n, N, 2.0 * H));
      attention_bf16_over(attn_shape, q.data(), n, H, K, V, att.data(), H, pool);
    } else {
      float* K = st.k.data() + li * NH;
      float* V = st.v.data() + li * NH;
      for (int r = 0; r < n; ++r) {
        const size_t at = static_cast<size_t>(changed[static_cast<size_t>(r)]) * H;
        std::copy(&kk[static_cast<size_t>(r) * H], &kk[static_cast<size_t>(r) * H] + H, K + at);
        std::copy(&vv[static_cast<size_t>(r) * H], &vv[static_cast<size_t>(r) * H] + H, V + at);
      }
      tile_attention(c, q.data(), n, K, V, H, att.data(), bf16_attention_, f16_, pool, "gated");
    }
    apply(L.o, att.data(), n, tmp.data(), pool, "o (gated)");
    norm(L.ln2_w.data(), L.ln2_b.data(), tmp.data(), xn.data());
    apply(L.fc1, xn.data(), n, ff.data(), pool, "fc1 (gated)", /*gelu=*/true);
    apply(L.fc2, ff.data(), n, tmp.data(), pool, "fc2 (gated)");
    pending = tmp.data();
    ++li;
  }
  norm(post_w_.data(), post_b_.data(), pending, xn.data());
  if (f16_) check_f16_vision_output(xn.data(), static_cast<size_t>(n) * H);
  for (int r = 0; r < n; ++r)
    std::copy(&xn[static_cast<size_t>(r) * H], &xn[static_cast<size_t>(r) * H] + H,
              st.encoded.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(changed[static_cast<size_t>(r)]) * H));
  std::copy(st.encoded.begin(), st.encoded.end(), encoded);
}

// Idefics3Connector.pixel_shuffle: output token (hb, wb) of the (side/s)^2 grid holds, at
// feature ((i*s + j) * H + d), patch (s*hb + i, s*wb + j) feature d.
void Idefics3Vision::connector(const float* enc, float* out, ThreadPool& pool) const {
  const SiglipConfig& c = cfg_;
  const int side = c.image_size / c.patch_size, s = c.scale_factor, g = side / s, H = c.hidden;
  const int T = g * g, F = H * s * s;
  // workers get its pointer, never the buffer; zero pages (TileFloats), so a first call's page
  // faults fall in the shuffle that writes them, not in a value-initializing pass before it
  thread_local TileFloats shuffled;
  shuffled.resize(static_cast<size_t>(T) * F);
  float* const sh = shuffled.data();
  {
    // output tokens over the pool (a serial copy was most of the connector's time between kernels)
    prof::OpScope op("pixel shuffle", "connector", OpCost{0, 8.0 * T * F});
    pool.parallel_for(T, 4, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int hb = static_cast<int>(t) / g, wb = static_cast<int>(t) % g;
        for (int i = 0; i < s; ++i)
          for (int j = 0; j < s; ++j)
            std::memcpy(sh + t * F + static_cast<int64_t>(i * s + j) * H, enc + static_cast<size_t>((s * hb + i) * side + s * wb + j) * H,
                        H * sizeof(float));
      }
    });
  }
  mm(proj_, sh, T, F, out, pool, "connector proj");
}

std::vector<WeightMatrix*> Idefics3Vision::linear_weights() {
  std::vector<WeightMatrix*> all = {&patch_.w, &proj_};
  for (SiglipLayer& L : layers_)
    for (Linear* l : {&L.q, &L.k, &L.v, &L.o, &L.fc1, &L.fc2}) all.push_back(&l->w);
  return all;
}

void Idefics3Vision::set_longest_edge(int edge) {
  if (edge < pre_.tile || edge > 4 * 4096) fail("the longest edge must be from the tile size %d to 16384 (got %d)", pre_.tile, edge);
  pre_.longest_edge = edge;
}

void Idefics3Vision::drop_gemm_panels(WeightMatrix& w) {
  // The fp32-GEMM panels a matrix's 16-bit tiles were made from are read no more: each is freed as
  // soon as its tiles exist (as Qwen3-VL's tower does), which halves an fp16 tower's resident
  // weights and keeps the conversion's peak to one matrix more.
  const uint8_t* gp = w.gemm_panels;
  w.gemm_panels = nullptr;
  if (!gp) return;
  for (PackedWeights& p : packed_)
    if (p.data && p.matrix.gemm_panels == gp && !p.matrix.bf16_tiles && !p.matrix.f16_tiles)
      packed_bytes_ -= p.bytes, p.data.reset(), p.bytes = 0;
}

void Idefics3Vision::release_file_pages(const WeightMatrix& w) {
  // only a matrix read from the file itself: one with fp32-GEMM panels was released at load
  if (w.gemm_panels || !w.data) return;
  released_file_bytes_ += give_back_rows(w);
}

size_t Idefics3Vision::give_back_rows(const WeightMatrix& w) const {
  const size_t n = static_cast<size_t>(w.rows) * w.row_stride;
  if (source_) source_->release(w.data, n);
  else if (file_) file_->release(w.data, n);
  return n;
}

int Idefics3Vision::repack_linear(PackedWeights (*pack)(const WeightMatrix&)) {
  int n = 0;
  for (WeightMatrix* w : linear_weights()) {
    if (w->bf16_tiles || w->f16_tiles || w->panels || !supports_bf16_tiles(w->type)) continue;
    packed_.push_back(pack(*w));
    packed_bytes_ += packed_.back().bytes;
    release_file_pages(*w);  // a quantized matrix's file pages, read to make its tiles
    drop_gemm_panels(*w);
    *w = packed_.back().matrix;
    w->gemm_panels = nullptr;
    ++n;
  }
  return n;
}

int Idefics3Vision::use_bf16_gemm() {
  if (!bf16_gemm_available()) fail("bf16 vision GEMM needs AVX512_BF16 or AMX bf16: this CPU or OS gives neither, or --isa/TESSERA_ISA caps below avx512vnni");
  bf16_attention_ = true;
  int n = 0;
  // q, k and v read the same normed rows: one stacked matrix makes them one GEMM (same bits,
  // faster than three calls: docs/measurements.md), and the three keep views into it for the
  // gated re-encoding
  for (SiglipLayer& L : layers_) {
    const std::vector<const WeightMatrix*> parts = {&L.q.w, &L.k.w, &L.v.w};
    bool ok = true;
    for (const WeightMatrix* w : parts)
      ok = ok && !w->bf16_tiles && !w->f16_tiles && !w->panels && supports_bf16_tiles(w->type) && w->type == L.q.w.type &&
           w->cols == L.q.w.cols && w->rows % 32 == 0;
    if (!ok) continue;
    StackedBf16Tiles st = stack_bf16_tiles(parts);
    for (Linear* l : {&L.q, &L.k, &L.v}) release_file_pages(l->w), drop_gemm_panels(l->w);
    for (WeightMatrix& v : st.views) v.gemm_panels = nullptr;
    L.q.w = st.views[0], L.k.w = st.views[1], L.v.w = st.views[2];
    L.qkv.w = st.all.matrix;
    L.qkv.b.clear();
    if (!L.q.b.empty() || !L.k.b.empty() || !L.v.b.empty())
      for (const Linear* l : {&L.q, &L.k, &L.v}) {  // a missing bias starts its sums at +0, as none does
        if (l->b.empty()) L.qkv.b.insert(L.qkv.b.end(), static_cast<size_t>(l->w.rows), 0.0f);
        else L.qkv.b.insert(L.qkv.b.end(), l->b.begin(), l->b.end());
      }
    packed_bytes_ += st.all.bytes;
    packed_.push_back(std::move(st.all));
    n += 3;
  }
  return n + repack_linear(pack_bf16_tiles);
}

int Idefics3Vision::use_f16_gemm() {
  if (!f16_gemm_available()) fail("fp16 vision GEMM needs AVX512-FP16 or ARM FP16 arithmetic: this CPU gives neither, or --isa/TESSERA_ISA caps below avx512vnni (neon on ARM)");
  f16_ = true;
  return repack_linear(pack_f16_tiles);
}

int Idefics3Vision::use_q8_activations() {
  int n = 0;
  for (WeightMatrix* w : linear_weights()) {
    if (w->panels || !supports_q8_activations(w->type) || w->cols % q8_col_multiple(w->type) != 0) continue;
    packed_.push_back(pack_q8_panels(*w));
    packed_bytes_ += packed_.back().bytes;
    release_file_pages(*w);  // the panels replace them
    *w = packed_.back().matrix;
    ++n;
  }
  q8_ = q8_ || n > 0;
  return n;
}

int Idefics3Vision::quantize_to_q8_0(ThreadPool& pool) {
  int n = 0;
  const int64_t rb = static_cast<int64_t>(row_bytes(DType::Q8_0, 32));  // one block of 32
  for (WeightMatrix* w : linear_weights()) {
    // the patch embedding stays: its GGUF rows are the conv kernel's 16 (or 14) pixels, no whole
    // block, so `tessera convert` and llama-quantize keep it too
    if (w == &patch_.w || w->panels || w->bf16_tiles || w->f16_tiles || !quantizable_to_q8_0(*w)) continue;
    // the bytes `tessera convert --type q8_0` writes for this tensor (its dequantize + quantize)
    const int64_t qs = w->cols / 32 * rb;
    std::vector<uint8_t> rows(static_cast<size_t>(w->rows * qs));
    const WeightMatrix& f = *w;
    pool.parallel_for(w->rows, 16, [&](int64_t r0, int64_t r1) {
      std::vector<float> x(static_cast<size_t>(f.cols));
      for (int64_t r = r0; r < r1; ++r) {
        dequantize_row(f.type, f.data + static_cast<size_t>(r) * f.row_stride, x.data(), f.cols);
        quantize_row(DType::Q8_0, x.data(), f.cols, rows.data() + r * qs);
      }
    });
    WeightMatrix q = *w;
    q.type = DType::Q8_0, q.data = rows.data(), q.row_stride = static_cast<size_t>(qs);
    q.gemm_panels = nullptr, q.row_panels = nullptr;
    packed_.push_back(pack_q8_panels(q));
    packed_bytes_ += packed_.back().bytes;
    if (w->gemm_panels) {  // the file rows were read again for this: give their pages back (counted at load)
      give_back_rows(*w);
      drop_gemm_panels(*w);
    } else {
      release_file_pages(*w);  // read for the first time (load_mmproj(path, true)): counted now
    }
    *w = packed_.back().matrix;
    w->data = nullptr;  // only the panels are kept (the scalar twin reads a Q8_0 block from them)
    ++n;
  }
  q8_ = q8_ || n > 0;
  quantized_at_load_ += n;
  return n;
}

}  // namespace tessera
