// The fp16 attention driver (attention_f16.h): the keys and values of every kv head packed over
// the pool, then one work item per (head, block of 32 query rows): queries rounded, scores by the
// fp16 GEMM, the softmax into fp16 weights, outputs by the fp16 GEMM, divided by the sums. The
// scalar twins of the two steps the table holds.
#include "kernels/attention_f16.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/f16_tiles.h"
#include "kernels/kernel_table.h"

namespace tessera {

bool attention_f16_available() { return f16_gemm_available(); }

namespace {

constexpr int64_t kRows = 32;  // query rows per work item

// Elements of one kv head's key tiles (n_kv rows padded to 32, hd to 32) and value tiles (hd rows
// padded to 32, n_kv to 32): the same count.
int64_t head_tile_elems(int64_t hd, int64_t n_kv) { return (n_kv + 31) / 32 * 32 * bf16_padded_k(hd); }

// Sixteen partial sums added as attention_f16.h defines.
float tree16(float* s) {
  for (int w = 8; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) s[i] += s[i + w];
  return s[0];
}

}  // namespace

namespace ref {

void pack_kv_f16(const float* k, const float* v, int64_t kv_stride, int g, int64_t hd, int64_t n_kv, int64_t j0,
                 int64_t j1, uint16_t* kt, uint16_t* vt) {
  const int64_t nkb_k = bf16_padded_k(hd) / kBf16K, nkb_v = bf16_padded_k(n_kv) / kBf16K;
  for (int64_t j = j0; j < j1; ++j)
    for (int64_t d = 0; d < hd; ++d) {
      kt[bf16_weight_index(j, d, nkb_k)] = float_to_fp16(k[j * kv_stride + g * hd + d]);
      vt[bf16_weight_index(d, j, nkb_v)] = float_to_fp16(v[j * kv_stride + g * hd + d]);
    }
}

void softmax_rows_f16(const float* S, int64_t ss, int64_t rows, int64_t n_kv, float c, uint16_t* P, float* l) {
  const int64_t nkp = bf16_padded_k(n_kv);
  for (int64_t t = 0; t < rows; ++t) {
    const float* s = S + t * ss;
    float m = -INFINITY;
    for (int64_t j = 0; j < n_kv; ++j) m = std::max(m, s[j]);
    const float mc = m * c;
    float part[16] = {};
    for (int64_t j = 0; j < nkp; ++j) {
      const uint16_t p = j < n_kv ? float_to_fp16(exp2_bf16attn(std::fma(s[j], c, -mc))) : 0;
      P[bf16_act_index(t, j, nkp)] = p;
      part[j % 16] += fp16_to_float(p);
    }
    l[t] = tree16(part);
  }
}

}  // namespace ref

void attention_f16(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, const float* k,
                   const float* v, int64_t kv_stride, float* out, int64_t out_stride, ThreadPool& pool) {
  if (s.causal) fail("attention_f16: bidirectional only");
  if (s.n_head <= 0 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0 || s.head_dim <= 0)
    fail("attention_f16: %d heads over %d kv heads of dim %d", s.n_head, s.n_head_kv, s.head_dim);
  if (n_q <= 0 || s.n_kv <= 0) return;
  const KernelTable& kt = kernels();
  const int64_t hd = s.head_dim, n_kv = s.n_kv, nkp = bf16_padded_k(n_kv), hdp = bf16_padded_k(hd);
  const int64_t per_head = head_tile_elems(hd, n_kv);
  const float c = s.scale * 1.44269504088896341f;
  // every kv head's K and Vᵀ tiles, zero where padded (the buffers grow to the largest call)
  thread_local std::vector<uint16_t> kbuf, vbuf;
  kbuf.assign(static_cast<size_t>(per_head * s.n_head_kv), 0);
  vbuf.assign(static_cast<size_t>(per_head * s.n_head_kv), 0);
  uint16_t *kp = kbuf.data(), *vp = vbuf.data();
  const int64_t kv_items = s.n_head_kv * ((n_kv + 63) / 64);  // 64 keys per item (even starts)
  pool.parallel_for(kv_items, 1, [&](int64_t a, int64_t b) {
    for (int64_t it = a; it < b; ++it) {
      const int g = static_cast<int>(it % s.n_head_kv);
      const int64_t j0 = (it / s.n_head_kv) * 64, j1 = std::min(n_kv, j0 + 64);
      kt.pack_kv_f16(k, v, kv_stride, g, hd, n_kv, j0, j1, kp + g * per_head, vp + g * per_head);
    }
  });
  const int64_t blocks = (n_q + kRows - 1) / kRows;
  pool.parallel_for(s.n_head * blocks, 1, [&](int64_t a, int64_t b) {
    thread_local std::vector<uint16_t> qh, P;
    thread_local std::vector<float> S, O;
    qh.assign(static_cast<size_t>(kRows * hdp), 0);
    P.resize(static_cast<size_t>(kRows * nkp));
    S.resize(static_cast<size_t>(kRows * nkp));
    O.resize(static_cast<size_t>(kRows * hd));
    for (int64_t it = a; it < b; ++it) {
      const int h = static_cast<int>(it / blocks);
      const int g = h / (s.n_head / s.n_head_kv);
      const int64_t i0 = (it % blocks) * kRows, rows = std::min(kRows, n_q - i0);
      WeightMatrix wk, wv;  // the head's keys (n_kv × hd) and values' transpose (hd × n_kv)
      wk.type = wv.type = DType::F16;
      wk.rows = n_kv, wk.cols = hd, wk.f16_tiles = reinterpret_cast<const uint8_t*>(kp + g * per_head);
      wv.rows = hd, wv.cols = n_kv, wv.f16_tiles = reinterpret_cast<const uint8_t*>(vp + g * per_head);
      kt.round_rows_f16(q + i0 * q_stride + h * hd, 0, rows, q_stride, hd, qh.data(), hdp);
      kt.gemm_f16_rows(wk, 0, n_kv, qh.data(), rows, hdp, S.data(), nkp, nullptr);
      alignas(64) float l[kRows];
      kt.softmax_rows_f16(S.data(), nkp, rows, n_kv, c, P.data(), l);
      kt.gemm_f16_rows(wv, 0, hd, P.data(), rows, nkp, O.data(), hd, nullptr);
      for (int64_t t = 0; t < rows; ++t)
        for (int64_t d = 0; d < hd; ++d) out[(i0 + t) * out_stride + h * hd + d] = O[static_cast<size_t>(t * hd + d)] / l[t];
    }
  });
}

}  // namespace tessera
