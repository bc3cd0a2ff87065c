// The fp16 attention (kernels/attention_f16.h): its AVX-512 steps are their scalar twins bit for
// bit, the whole attention at this CPU's level is the scalar-level one bit for bit, the same bits
// whatever the thread count or the rows asked for, and close to a float64 attention.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention_bf16.h"
#include "kernels/attention_f16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/f16_tiles.h"
#include "kernels/kernel_table.h"

namespace tessera {
namespace {

std::vector<float> normal(size_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

TEST(AttentionF16, SimdStepsAreTheirTwins) {
  const KernelTable& simd = kernel_table(Isa::Avx512);
  if (simd.isa != Isa::Avx512 && simd.isa != Isa::Avx512Vnni && simd.isa != Isa::Amx)
    GTEST_SKIP() << "no AVX-512 here";
  for (int64_t hd : {40, 64, 72}) {
    for (int64_t n_kv : {1, 17, 64, 101, 1024}) {
      const int heads = 3;
      const int64_t stride = heads * hd + 5;
      const std::vector<float> k = normal(static_cast<size_t>(n_kv * stride), 1, 1.0f),
                               v = normal(static_cast<size_t>(n_kv * stride), 2, 3.0f);
      const int64_t elems = bf16_padded_k(n_kv) * bf16_padded_k(hd);
      for (int g = 0; g < heads; ++g) {
        std::vector<uint16_t> k1(static_cast<size_t>(elems), 0), v1(k1), k2(k1), v2(k1);
        for (int64_t j0 = 0; j0 < n_kv; j0 += 64) {  // in the driver's pieces
          ref::pack_kv_f16(k.data(), v.data(), stride, g, hd, n_kv, j0, std::min(n_kv, j0 + 64), k1.data(), v1.data());
          simd.pack_kv_f16(k.data(), v.data(), stride, g, hd, n_kv, j0, std::min(n_kv, j0 + 64), k2.data(), v2.data());
        }
        ASSERT_EQ(k1, k2) << "hd " << hd << " n_kv " << n_kv;
        ASSERT_EQ(v1, v2) << "hd " << hd << " n_kv " << n_kv;
      }
      const int64_t rows = 13, ss = bf16_padded_k(n_kv) + 8, nkp = bf16_padded_k(n_kv);
      std::vector<float> S = normal(static_cast<size_t>(rows * ss), 3, 20.0f);
      S[5] = -INFINITY;  // a masked-out score
      std::vector<uint16_t> p1(static_cast<size_t>(bf16_act_elems(rows, n_kv)), 7), p2(p1);
      float l1[rows], l2[rows];
      ref::softmax_rows_f16(S.data(), ss, rows, n_kv, 0.125f * 1.4426950f, p1.data(), l1);
      simd.softmax_rows_f16(S.data(), ss, rows, n_kv, 0.125f * 1.4426950f, p2.data(), l2);
      for (int64_t t = 0; t < rows; ++t)
        for (int64_t j = 0; j < nkp; ++j)
          ASSERT_EQ(p1[static_cast<size_t>(bf16_act_index(t, j, nkp))], p2[static_cast<size_t>(bf16_act_index(t, j, nkp))])
              << t << " " << j;
      ASSERT_EQ(std::memcmp(l1, l2, sizeof l1), 0);
    }
  }
}

// float64 attention of row i, head h, over all keys (bidirectional).
std::vector<double> exact_row(const AttentionShape& s, const std::vector<float>& q, int64_t qs, const std::vector<float>& k,
                              const std::vector<float>& v, int64_t kvs, int64_t i, int h) {
  const int64_t hd = s.head_dim;
  const int g = h / (s.n_head / s.n_head_kv);
  std::vector<double> sc(static_cast<size_t>(s.n_kv)), o(static_cast<size_t>(hd), 0.0);
  double m = -INFINITY, l = 0;
  for (int64_t j = 0; j < s.n_kv; ++j) {
    double d = 0;
    for (int64_t e = 0; e < hd; ++e) d += static_cast<double>(q[i * qs + h * hd + e]) * k[j * kvs + g * hd + e];
    sc[static_cast<size_t>(j)] = d * s.scale;
    m = std::max(m, sc[static_cast<size_t>(j)]);
  }
  for (int64_t j = 0; j < s.n_kv; ++j) {
    const double p = std::exp(sc[static_cast<size_t>(j)] - m);
    l += p;
    for (int64_t e = 0; e < hd; ++e) o[static_cast<size_t>(e)] += p * v[j * kvs + g * hd + e];
  }
  for (double& x : o) x /= l;
  return o;
}

TEST(AttentionF16, TwinAtEveryLevelInvariantAndCloseToFloat64) {
  ThreadPool one(1), two(2), three(3);
  if (!attention_f16_available()) std::printf("note: no AVX512-FP16 here: the scalar twin only\n");
  const Isa before = active_isa();
  struct Case {
    int heads, heads_kv, hd;
    int64_t n_q, n_kv;
  };
  for (const Case& c : {Case{2, 2, 64, 37, 101}, Case{4, 2, 40, 70, 64}, Case{1, 1, 72, 33, 300}, Case{12, 12, 64, 64, 1024}}) {
    AttentionShape s;
    s.n_head = c.heads, s.n_head_kv = c.heads_kv, s.head_dim = c.hd, s.causal = false, s.n_kv = c.n_kv;
    s.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
    const int64_t qs = c.heads * c.hd + 3, kvs = c.heads_kv * c.hd + 1, os = c.heads * c.hd;
    const std::vector<float> q = normal(static_cast<size_t>(c.n_q * qs), 4, 1.5f), k = normal(static_cast<size_t>(c.n_kv * kvs), 5, 1.5f),
                             v = normal(static_cast<size_t>(c.n_kv * kvs), 6, 2.0f);
    std::vector<float> o1(static_cast<size_t>(c.n_q * os)), o_twin(o1.size()), o(o1.size());
    attention_f16(s, q.data(), c.n_q, qs, k.data(), v.data(), kvs, o1.data(), os, one);
    set_isa_cap(Isa::Scalar);
    attention_f16(s, q.data(), c.n_q, qs, k.data(), v.data(), kvs, o_twin.data(), os, two);
    set_isa_cap(before);
    ASSERT_EQ(std::memcmp(o1.data(), o_twin.data(), o1.size() * 4), 0) << isa_name(before) << " n_kv " << c.n_kv;
    for (ThreadPool* p : {&two, &three}) {
      attention_f16(s, q.data(), c.n_q, qs, k.data(), v.data(), kvs, o.data(), os, *p);
      ASSERT_EQ(std::memcmp(o1.data(), o.data(), o1.size() * 4), 0) << "threads " << p->size();
    }
    // the last row alone: the same bits
    std::vector<float> last(static_cast<size_t>(os));
    attention_f16(s, q.data() + (c.n_q - 1) * qs, 1, qs, k.data(), v.data(), kvs, last.data(), os, two);
    ASSERT_EQ(std::memcmp(last.data(), o1.data() + (c.n_q - 1) * os, static_cast<size_t>(os) * 4), 0);
    // against float64: fp16 inputs and weights (2^-11 relative each), fp16 chunk sums; and the bf16
    // attention's error on the same rows (its inputs keep 3 bits fewer)
    std::vector<float> ob(o1.size());
    attention_bf16(s, q.data(), c.n_q, qs, k.data(), v.data(), kvs, ob.data(), os, two);
    double err = 0, errb = 0, ss = 0, worst = 0;
    for (int64_t i = 0; i < c.n_q; ++i)
      for (int h = 0; h < c.heads; ++h) {
        const std::vector<double> e = exact_row(s, q, qs, k, v, kvs, i, h);
        for (int d = 0; d < c.hd; ++d) {
          const double diff = o1[static_cast<size_t>(i * os + h * c.hd + d)] - e[static_cast<size_t>(d)];
          const double db = ob[static_cast<size_t>(i * os + h * c.hd + d)] - e[static_cast<size_t>(d)];
          err += diff * diff, errb += db * db, ss += e[static_cast<size_t>(d)] * e[static_cast<size_t>(d)];
          worst = std::max(worst, std::fabs(diff));
        }
      }
    const double rel = std::sqrt(err / ss), rel_b = std::sqrt(errb / ss);
    std::printf("heads %d/%d hd %d n_q %lld n_kv %lld: relative rms error %.2e (bf16 attention %.2e), worst %.2e\n",
                c.heads, c.heads_kv, c.hd, static_cast<long long>(c.n_q), static_cast<long long>(c.n_kv), rel, rel_b, worst);
    EXPECT_LT(rel, 5e-3);
    EXPECT_LT(rel, 0.8 * rel_b);  // measured 0.5-0.7: the fp16 score sums cost most of the 3 bits
    EXPECT_LT(worst, 5e-2);
  }
}

TEST(AttentionF16, RejectsCausalAndBadHeads) {
  ThreadPool one(1);
  AttentionShape s;
  s.n_head = 2, s.n_head_kv = 2, s.head_dim = 8, s.n_kv = 4, s.causal = true;
  std::vector<float> x(64), o(64);
  EXPECT_ANY_THROW(attention_f16(s, x.data(), 2, 16, x.data(), x.data(), 16, o.data(), 16, one));
  s.causal = false, s.n_head_kv = 3;
  EXPECT_ANY_THROW(attention_f16(s, x.data(), 2, 16, x.data(), x.data(), 16, o.data(), 16, one));
}

}  // namespace
}  // namespace tessera
