// The bf16 attention driver (attention_bf16.h): packing over the pool, then one work item per
// (head, block of 32 query rows); and the scalar twin of both steps.
#include "kernels/attention_bf16.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/kernel_table.h"

namespace tessera {

bool attention_bf16_available() { return bf16_gemm_available(); }

Bf16AttnDims bf16_attn_dims(const AttentionShape& s, int64_t n_q) {
  Bf16AttnDims D;
  D.n_head = s.n_head;
  D.n_head_kv = s.n_head_kv;
  D.hd = s.head_dim;
  D.hdk = (D.hd + 31) / 32 * 32;
  D.hdv = (D.hd + 15) / 16 * 16;
  D.n_q = n_q;
  D.nqp = (n_q + kBf16AttnRows - 1) / kBf16AttnRows * kBf16AttnRows;
  D.n_kv = s.n_kv;
  D.nkp = (s.n_kv + 31) / 32 * 32;
  D.scale = s.scale;
  D.c = s.scale * 1.44269504088896341f;
  return D;
}

namespace ref {

void pack_attn_bf16(const Bf16AttnDims& D, const float* q, int64_t q_stride, const float* k, const float* v,
                    int64_t kv_stride, int64_t i0, int64_t i1, int64_t j0, int64_t j1, const Bf16AttnBuffers& b) {
  for (int64_t i = i0; i < i1; ++i)
    for (int h = 0; h < D.n_head; ++h)
      for (int64_t d = 0; d < D.hdk; ++d)
        b.q[bf16_attn_q_index(D, h, i, d)] = i < D.n_q && d < D.hd ? float_to_bf16(q[i * q_stride + h * D.hd + d]) : 0;
  for (int64_t j = j0; j < j1; ++j)
    for (int g = 0; g < D.n_head_kv; ++g) {
      const bool in = j < D.n_kv;
      for (int64_t d = 0; d < D.hdk; ++d)
        b.k[bf16_attn_k_index(D, g, j, d)] = in && d < D.hd ? float_to_bf16(k[j * kv_stride + g * D.hd + d]) : 0;
      for (int64_t d = 0; d < D.hdv; ++d)
        b.v[bf16_attn_v_index(D, g, j, d)] = in && d < D.hd ? float_to_bf16(v[j * kv_stride + g * D.hd + d]) : 0;
    }
}

void attention_bf16_rows(const Bf16AttnDims& D, const Bf16AttnBuffers& b, int64_t h, int64_t i0, float* out,
                         int64_t out_stride) {
  const int64_t g = h / (D.n_head / D.n_head_kv);
  const float c = D.c;
  thread_local std::vector<float> s, o, ob;
  s.resize(static_cast<size_t>(D.n_kv));
  o.resize(static_cast<size_t>(D.hd));
  ob.resize(static_cast<size_t>(D.hd));
  for (int64_t i = i0; i < std::min(i0 + kBf16AttnRows, D.n_q); ++i) {
    for (int64_t j = 0; j < D.n_kv; ++j) {
      float acc = 0.0f;
      for (int64_t d = 0; d < D.hd; ++d)  // bf16 products are exact in fp32: one rounding per step
        acc += bf16_to_float(b.q[bf16_attn_q_index(D, h, i, d)]) * bf16_to_float(b.k[bf16_attn_k_index(D, g, j, d)]);
      s[static_cast<size_t>(j)] = acc;
    }
    float m = -INFINITY, l = 0.0f;
    std::fill(o.begin(), o.end(), 0.0f);
    for (int64_t j0 = 0; j0 < D.n_kv; j0 += kBf16AttnKeys) {
      const int64_t j1 = std::min(D.n_kv, j0 + kBf16AttnKeys);
      float mn = m;
      for (int64_t j = j0; j < j1; ++j) mn = std::max(mn, s[static_cast<size_t>(j)]);
      const float mc = mn * c, a = m == -INFINITY ? 0.0f : exp2_bf16attn(std::fma(m, c, -mc));
      float lb = 0.0f;
      std::fill(ob.begin(), ob.end(), 0.0f);
      for (int64_t j = j0; j < j1; ++j) {
        const float p = bf16_to_float(float_to_bf16(exp2_bf16attn(std::fma(s[static_cast<size_t>(j)], c, -mc))));
        lb += p;
        for (int64_t d = 0; d < D.hd; ++d) ob[static_cast<size_t>(d)] += p * bf16_to_float(b.v[bf16_attn_v_index(D, g, j, d)]);
      }
      l = std::fma(l, a, lb);
      for (int64_t d = 0; d < D.hd; ++d) o[static_cast<size_t>(d)] = std::fma(o[static_cast<size_t>(d)], a, ob[static_cast<size_t>(d)]);
      m = mn;
    }
    for (int64_t d = 0; d < D.hd; ++d) out[i * out_stride + h * D.hd + d] = o[static_cast<size_t>(d)] / l;
  }
}

}  // namespace ref

namespace {

// The fp32 output rows rounded into the next GEMM's activation tiles (round_row_bf16).
void round_out_rows(const float* out, int64_t n_q, int64_t out_stride, int64_t width, uint16_t* out_b16, ThreadPool& pool) {
  pool.parallel_for(n_q, 16, [&](int64_t a, int64_t e) {
    for (int64_t i = a; i < e; ++i) round_row_bf16(out + i * out_stride, i, width, out_b16);
  });
}

}  // namespace

Bf16AttnBuffers bf16_attn_scratch(const Bf16AttnDims& D) {
  thread_local std::vector<uint16_t> buf;  // grows to the largest call, then stays
  const int64_t nq_el = D.n_head * D.nqp * D.hdk, nk_el = bf16_attn_k_elems(D);
  buf.resize(static_cast<size_t>(nq_el + nk_el + bf16_attn_v_elems(D)));
  return {buf.data(), buf.data() + nq_el, buf.data() + nq_el + nk_el};
}

void attention_bf16_packed(const Bf16AttnDims& D, const Bf16AttnBuffers& b, float* out, int64_t out_stride,
                           ThreadPool& pool, uint16_t* out_b16) {
  const KernelTable& kt = kernels();
  const int64_t qblocks = D.nqp / kBf16AttnRows, width = D.n_head * D.hd;
  // the AMX kernel rounds its rows into out_b16 itself where each 16-value half of a tile line
  // belongs to one head; otherwise the fp32 rows are rounded after
  const bool direct_b16 = out_b16 && kt.bf16_tiles && D.hd % 16 == 0 && width % kBf16K == 0;
  pool.parallel_for(D.n_head * qblocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t h = t / qblocks, i0 = (t % qblocks) * kBf16AttnRows;
      kt.attention_bf16_rows(D, b, h, i0, out, out_stride, direct_b16 ? out_b16 : nullptr);
    }
  });
  if (out_b16 && !direct_b16) round_out_rows(out, D.n_q, out_stride, width, out_b16, pool);
}

namespace {

// q, k and v packed into b (rows over the pool), then the attention over them.
void pack_and_attend(const Bf16AttnDims& D, const float* q, int64_t q_stride, const float* k, const float* v,
                     int64_t kv_stride, const Bf16AttnBuffers& b, float* out, int64_t out_stride, ThreadPool& pool,
                     uint16_t* out_b16) {
  const auto pack = kernels().pack_attn_bf16;
  // rows in pairs (a V tile line holds two keys); padded rows are written as zeros
  pool.parallel_for(std::max(D.nqp, D.nkp) / 2, 8, [&](int64_t a, int64_t e) {
    const int64_t r0 = 2 * a, r1 = 2 * e;
    const int64_t i0 = std::min(r0, D.nqp), i1 = std::min(r1, D.nqp), j0 = std::min(r0, D.nkp), j1 = std::min(r1, D.nkp);
    pack(D, q, q_stride, k, v, kv_stride, i0, i1, j0, j1, b);
  });
  attention_bf16_packed(D, b, out, out_stride, pool, out_b16);
}

}  // namespace

void attention_bf16(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, const float* k,
                    const float* v, int64_t kv_stride, float* out, int64_t out_stride, ThreadPool& pool,
                    uint16_t* out_b16) {
  check_bf16_attn_shape(s);
  if (n_q <= 0) return;
  if (s.n_kv <= 0) {  // no keys: zeros, as flash_attention gives
    for (int64_t i = 0; i < n_q; ++i) std::fill_n(out + i * out_stride, static_cast<int64_t>(s.n_head) * s.head_dim, 0.0f);
    if (out_b16) round_out_rows(out, n_q, out_stride, static_cast<int64_t>(s.n_head) * s.head_dim, out_b16, pool);
    return;
  }
  const Bf16AttnDims D = bf16_attn_dims(s, n_q);
  pack_and_attend(D, q, q_stride, k, v, kv_stride, bf16_attn_scratch(D), out, out_stride, pool, out_b16);
}

void attention_bf16_keeping(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, const float* k,
                            const float* v, int64_t kv_stride, uint16_t* k16, uint16_t* v16, float* out,
                            int64_t out_stride, ThreadPool& pool, uint16_t* out_b16) {
  check_bf16_attn_shape(s);
  if (n_q <= 0 || n_q != s.n_kv) fail("bf16 attention keeping its keys: needs one query per key (a whole tile)");
  const Bf16AttnDims D = bf16_attn_dims(s, n_q);
  pack_and_attend(D, q, q_stride, k, v, kv_stride, {bf16_attn_scratch(D).q, k16, v16}, out, out_stride, pool, out_b16);
}

int64_t bf16_attn_k_elems(const Bf16AttnDims& D) { return D.n_head_kv * D.nkp * D.hdk; }
int64_t bf16_attn_v_elems(const Bf16AttnDims& D) { return D.n_head_kv * D.nkp * D.hdv; }

void pack_attn_bf16_keys(const Bf16AttnDims& D, const float* k, const float* v, int64_t kv_stride, const int* keys,
                         int64_t n, uint16_t* k16, uint16_t* v16) {
  for (int64_t r = 0; r < n; ++r) {
    const int64_t j = keys[r];
    if (j < 0 || j >= D.n_kv) fail("bf16 attention: key %lld out of range (%lld keys)", static_cast<long long>(j),
                                   static_cast<long long>(D.n_kv));
    for (int g = 0; g < D.n_head_kv; ++g)
      for (int64_t d = 0; d < D.hd; ++d) {  // padding dims stay the zeros the full pack wrote
        k16[bf16_attn_k_index(D, g, j, d)] = float_to_bf16(k[r * kv_stride + g * D.hd + d]);
        v16[bf16_attn_v_index(D, g, j, d)] = float_to_bf16(v[r * kv_stride + g * D.hd + d]);
      }
  }
}

void attention_bf16_over(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, uint16_t* k16,
                         uint16_t* v16, float* out, int64_t out_stride, ThreadPool& pool) {
  check_bf16_attn_shape(s);
  if (n_q <= 0 || s.n_kv <= 0) fail("bf16 attention over packed keys: needs queries and keys");
  const Bf16AttnDims D = bf16_attn_dims(s, n_q);
  const Bf16AttnBuffers b{bf16_attn_scratch(D).q, k16, v16};
  const auto pack = kernels().pack_attn_bf16;
  pool.parallel_for(D.nqp / 2, 8, [&](int64_t a, int64_t e) {  // the queries only (j0 = j1: no keys)
    pack(D, q, q_stride, nullptr, nullptr, 0, 2 * a, 2 * e, 0, 0, b);
  });
  attention_bf16_packed(D, b, out, out_stride, pool);
}

void check_bf16_attn_shape(const AttentionShape& s) {
  if (s.causal) fail("bf16 attention: bidirectional only (vision tiles); causal attention runs in flash_attention");
  if (s.head_dim <= 0 || s.head_dim > 256 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0)
    fail("bf16 attention: unsupported shape (head_dim %d, %d heads, %d kv heads)", s.head_dim, s.n_head, s.n_head_kv);
  if (!(s.scale > 0.0f)) fail("bf16 attention: the score scale must be positive");
}

}  // namespace tessera
