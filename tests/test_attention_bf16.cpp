// The opt-in bf16 attention (kernels/attention_bf16.h): the scalar twin and the AMX kernel within a
// bf16 bound of a float64 softmax attention over the same bf16-rounded inputs, the SIMD packing
// byte-equal to the scalar one, and each row the same bits whatever the rows computed with it or
// the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernel_cases.h"
#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"

namespace tessera {
namespace {

using test::random_x;

float rounded(float x) { return bf16_to_float(float_to_bf16(x)); }

struct Case {
  int n_head, n_head_kv, hd;
  int64_t n_q, n_kv;
  float amp;  // input amplitude: 3 makes peaked softmaxes whose running max moves between key blocks
};

// Inputs for a case: q (n_q rows), k and v (n_kv rows), heads side by side.
struct Inputs {
  std::vector<float> q, k, v;
  int64_t qs, kvs;
};
Inputs make_inputs(const Case& c, uint32_t seed) {
  Inputs in;
  in.qs = static_cast<int64_t>(c.n_head) * c.hd;
  in.kvs = static_cast<int64_t>(c.n_head_kv) * c.hd;
  in.q = random_x(c.n_q, in.qs, seed);
  in.k = random_x(c.n_kv, in.kvs, seed + 1);
  in.v = random_x(c.n_kv, in.kvs, seed + 2);
  for (float& x : in.q) x *= c.amp;
  for (float& x : in.k) x *= c.amp;
  return in;
}

AttentionShape shape_of(const Case& c) {
  AttentionShape s;
  s.n_head = c.n_head;
  s.n_head_kv = c.n_head_kv;
  s.head_dim = c.hd;
  s.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  s.causal = false;
  s.n_kv = c.n_kv;
  return s;
}

// Every output within the bound of a float64 softmax attention over the bf16-rounded inputs:
// each weight p_j moves by at most 2^-9 (its bf16 rounding) + 3e-6 (exp2's polynomial) + scale·e_s
// relative, e_s being the score's fp32 summation error (hd · 2^-24 · Σ|q·k|), so the normalised
// weights move by at most twice that in sum; plus n_kv fp32 additions in the output sums. All
// times max_j |v_jd|, with a quarter more for second-order terms.
void expect_within_bound(const Case& c, const Inputs& in, const std::vector<float>& out, const char* what) {
  const AttentionShape s = shape_of(c);
  const int group = c.n_head / c.n_head_kv;
  std::vector<double> sc(static_cast<size_t>(c.n_kv));
  for (int64_t i = 0; i < c.n_q; ++i)
    for (int h = 0; h < c.n_head; ++h) {
      const int g = h / group;
      double mx = -INFINITY, es = 0;
      for (int64_t j = 0; j < c.n_kv; ++j) {
        double dot = 0, mag = 0;
        for (int d = 0; d < c.hd; ++d) {
          const double p = static_cast<double>(rounded(in.q[static_cast<size_t>(i * in.qs + h * c.hd + d)])) *
                           rounded(in.k[static_cast<size_t>(j * in.kvs + g * c.hd + d)]);
          dot += p;
          mag += std::fabs(p);
        }
        sc[static_cast<size_t>(j)] = dot;
        mx = std::max(mx, dot);
        es = std::max(es, c.hd * 0x1p-24 * mag);
      }
      double l = 0;
      for (int64_t j = 0; j < c.n_kv; ++j) l += std::exp(s.scale * (sc[static_cast<size_t>(j)] - mx));
      const double rel = 2.0 * (0x1p-9 + 3e-6 + s.scale * es) + c.n_kv * 0x1p-23;
      for (int d = 0; d < c.hd; ++d) {
        double o = 0, vmax = 0;
        for (int64_t j = 0; j < c.n_kv; ++j) {
          const double v = rounded(in.v[static_cast<size_t>(j * in.kvs + g * c.hd + d)]);
          o += std::exp(s.scale * (sc[static_cast<size_t>(j)] - mx)) / l * v;
          vmax = std::max(vmax, std::fabs(v));
        }
        ASSERT_NEAR(out[static_cast<size_t>(i * in.qs + h * c.hd + d)], o, 1.25 * rel * vmax + 1e-30)
            << what << " heads " << c.n_head << "/" << c.n_head_kv << " hd " << c.hd << " n_q " << c.n_q << " n_kv "
            << c.n_kv << " amp " << c.amp << " row " << i << " head " << h << " d " << d;
      }
    }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int hd : {64, 16, 32, 72, 80, 128})
    for (auto [nh, nkv] : {std::pair{2, 2}, std::pair{4, 2}})
      for (auto [nq, nk] : {std::pair<int64_t, int64_t>{1, 1}, {31, 17}, {33, 100}, {70, 300}, {5, 129}})
        all.push_back({nh, nkv, hd, nq, nk, hd == 64 ? 3.0f : 1.0f});
  // more keys than one online-softmax block (kBf16AttnKeys): the running max moves between blocks
  for (int hd : {64, 32}) all.push_back({2, 1, hd, 33, kBf16AttnKeys + 77, hd == 64 ? 3.0f : 1.0f});
  all.push_back({2, 2, 80, 17, 2 * kBf16AttnKeys + 5, 1.0f});
  return all;
}

// The twin directly (ref packing and rows), whatever this machine has.
std::vector<float> run_twin(const Case& c, const Inputs& in) {
  const Bf16AttnDims D = bf16_attn_dims(shape_of(c), c.n_q);
  std::vector<uint16_t> q(static_cast<size_t>(D.n_head * D.nqp * D.hdk)), k(static_cast<size_t>(D.n_head_kv * D.nkp * D.hdk)),
      v(static_cast<size_t>(D.n_head_kv * D.nkp * D.hdv));
  const Bf16AttnBuffers b{q.data(), k.data(), v.data()};
  ref::pack_attn_bf16(D, in.q.data(), in.qs, in.k.data(), in.v.data(), in.kvs, 0, D.nqp, 0, D.nkp, b);
  std::vector<float> out(in.q.size(), -1.0f);
  for (int h = 0; h < c.n_head; ++h)
    for (int64_t i0 = 0; i0 < c.n_q; i0 += kBf16AttnRows) ref::attention_bf16_rows(D, b, h, i0, out.data(), in.qs);
  return out;
}

// The softmax's exp2: within the 3e-6 the docs/numerics.md bound uses, never denormal (so the
// hardware rounding to bf16, which flushes denormals, rounds it as float_to_bf16 does), and
// exactly 1 at 0. Checked on a grid that includes every integer (f = 0) and values just below.
TEST(AttentionBf16, Exp2WithinItsBound) {
  EXPECT_EQ(exp2_bf16attn(0.0f), 1.0f);
  double worst = 0.0;
  for (int i = 0; i <= 1'400'000; ++i) {
    const float t = -140.0f + 140.0f * static_cast<float>(i) / 1'400'000.0f;
    for (const float u : {t, std::nextafter(t, -200.0f)}) {
      const float e = exp2_bf16attn(u);
      ASSERT_GE(e, 0x1p-126f) << u;
      const double want = std::exp2(std::max(static_cast<double>(u), -126.0));
      worst = std::max(worst, std::fabs(e / want - 1.0));
    }
  }
  EXPECT_LT(worst, 3e-6);
  std::printf("exp2_bf16attn: worst relative error %.3g\n", worst);
}

// The AMX kernel's exp2 (VREDUCEPS, VSCALEFPS) gives exp2_bf16attn's bits over its domain (t below
// about 0: a score minus the running max), including the tiny negative t whose reduction to
// [0, 1) would have to round, exact halves (ties go to even) and values just below integers.
TEST(AttentionBf16, SimdExp2IsTheScalarOneBitwise) {
  if (!attention_bf16_available()) GTEST_SKIP() << "no AMX bf16 here";
  std::vector<float> t;
  for (int i = 0; i <= 200'000; ++i) t.push_back(-140.0f + 141.0f * static_cast<float>(i) / 200'000.0f);
  for (float x = -1e-30f; x > -2.0f; x *= 1.01f) t.insert(t.end(), {x, -x, std::nextafter(x, 0.0f)});
  for (int k = -130; k <= 1; ++k) t.insert(t.end(), {k + 0.5f, static_cast<float>(k), std::nextafter(k + 0.5f, -1e9f)});
  std::mt19937 rng(5);
  while (t.size() < 400'000) {  // random bit patterns in the domain
    const uint32_t bits = rng();
    float x;
    std::memcpy(&x, &bits, 4);
    if (x <= 1.0f) t.push_back(x);
  }
  t.push_back(-INFINITY);
  std::vector<float> e(t.size());
  avx512::exp2_bf16attn_lanes(t.data(), e.data(), static_cast<int64_t>(t.size()));
  for (size_t i = 0; i < t.size(); ++i) {
    const float want = exp2_bf16attn(t[i]);
    ASSERT_EQ(std::memcmp(&want, &e[i], 4), 0) << "t = " << t[i] << ": " << want << " vs " << e[i];
  }
}

TEST(AttentionBf16, TwinWithinBoundOfFloat64) {
  for (const Case& c : cases()) {
    const Inputs in = make_inputs(c, static_cast<uint32_t>(c.hd * 31 + c.n_kv));
    expect_within_bound(c, in, run_twin(c, in), "twin");
  }
}

TEST(AttentionBf16, WithinBoundAndInvariantOverRowsAndThreads) {
  ThreadPool one(1), two(2), three(3);
  if (!attention_bf16_available()) std::printf("note: no AMX bf16 here: the scalar twin only\n");
  for (const Case& c : cases()) {
    const Inputs in = make_inputs(c, static_cast<uint32_t>(c.hd * 31 + c.n_kv));
    const AttentionShape s = shape_of(c);
    std::vector<float> out(in.q.size(), -1.0f);
    attention_bf16(s, in.q.data(), c.n_q, in.qs, in.k.data(), in.v.data(), in.kvs, out.data(), in.qs, one);
    expect_within_bound(c, in, out, attention_bf16_available() ? "amx" : "scalar");
    if (!attention_bf16_available()) {
      ASSERT_EQ(out, run_twin(c, in)) << "the scalar path is the twin";
    }
    for (ThreadPool* pool : {&two, &three}) {
      std::vector<float> o(out.size(), -1.0f);
      attention_bf16(s, in.q.data(), c.n_q, in.qs, in.k.data(), in.v.data(), in.kvs, o.data(), in.qs, *pool);
      ASSERT_EQ(std::memcmp(o.data(), out.data(), o.size() * 4), 0) << "threads " << pool->size();
    }
    // the last row alone, and the rows from 1 on (every block of 32 shifted by one)
    std::vector<float> o(out.size(), -1.0f);
    const int64_t last = c.n_q - 1;
    attention_bf16(s, in.q.data() + last * in.qs, 1, in.qs, in.k.data(), in.v.data(), in.kvs, o.data(), in.qs, two);
    ASSERT_EQ(std::memcmp(o.data(), out.data() + last * in.qs, static_cast<size_t>(in.qs) * 4), 0);
    if (c.n_q > 1) {
      attention_bf16(s, in.q.data() + in.qs, c.n_q - 1, in.qs, in.k.data(), in.v.data(), in.kvs, o.data(), in.qs, two);
      ASSERT_EQ(std::memcmp(o.data(), out.data() + in.qs, static_cast<size_t>((c.n_q - 1) * in.qs) * 4), 0);
    }
  }
}

TEST(AttentionBf16, SimdPackingMatchesScalar) {
#if defined(TESSERA_HAVE_AVX512)
  if (!attention_bf16_available()) GTEST_SKIP() << "no AMX bf16 here";
  for (const Case& c : cases()) {
    Inputs in = make_inputs(c, 7);
    // ties, NaNs, infinities, denormals and signed zeros go through the same rounding
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0xff800001u, 0x7f800000u,
                                0x00000001u, 0x80008000u, 0x80000000u, 0x7f7fffffu};
    for (size_t i = 0; i < sizeof special / 4 && i * 5 < in.v.size(); ++i) {
      std::memcpy(&in.v[i * 5], &special[i], 4);
      std::memcpy(&in.k[i * 5], &special[i], 4);
    }
    const Bf16AttnDims D = bf16_attn_dims(shape_of(c), c.n_q);
    const size_t nq = static_cast<size_t>(D.n_head * D.nqp * D.hdk), nk = static_cast<size_t>(D.n_head_kv * D.nkp * D.hdk),
                 nv = static_cast<size_t>(D.n_head_kv * D.nkp * D.hdv);
    std::vector<uint16_t> a(nq + nk + nv, 1), b(nq + nk + nv, 2);
    const Bf16AttnBuffers ba{a.data(), a.data() + nq, a.data() + nq + nk}, bb{b.data(), b.data() + nq, b.data() + nq + nk};
    ref::pack_attn_bf16(D, in.q.data(), in.qs, in.k.data(), in.v.data(), in.kvs, 0, D.nqp, 0, D.nkp, ba);
    avx512::pack_attn_bf16(D, in.q.data(), in.qs, in.k.data(), in.v.data(), in.kvs, 0, D.nqp, 0, D.nkp, bb);
    ASSERT_EQ(a, b) << "hd " << c.hd << " n_q " << c.n_q << " n_kv " << c.n_kv;
    // in pieces, as the pool splits the rows (even bounds): whole 16-key tiles go through the
    // transpose, keys of a tile split between pieces through the scatter; the same bytes
    for (const int64_t piece : {6, 16, 34}) {
      std::fill(b.begin(), b.end(), uint16_t{2});
      for (int64_t r0 = 0; r0 < std::max(D.nqp, D.nkp); r0 += piece) {
        const int64_t r1 = r0 + piece;
        avx512::pack_attn_bf16(D, in.q.data(), in.qs, in.k.data(), in.v.data(), in.kvs, std::min(r0, D.nqp),
                               std::min(r1, D.nqp), std::min(r0, D.nkp), std::min(r1, D.nkp), bb);
      }
      ASSERT_EQ(a, b) << "pieces of " << piece << ", hd " << c.hd << " n_q " << c.n_q << " n_kv " << c.n_kv;
    }
  }
#else
  GTEST_SKIP() << "x86 only";
#endif
}

// Output rounded for the o projection (out_b16): the bytes of round_row_bf16 over the fp32 output,
// whether the AMX kernel rounds in place (head_dim 64 and 80: whole 16-value halves per head) or
// the rows are rounded after (head_dim 72; 3 heads of 16, a width of 48; and no keys at all).
TEST(AttentionBf16, RoundedOutputIsTheRoundedRows) {
  ThreadPool two(2);
  const std::vector<Case> cs = {{2, 2, 64, 45, 70, 3.0f}, {2, 1, 80, 33, 40, 1.0f}, {2, 2, 72, 20, 30, 1.0f},
                                {3, 3, 16, 17, 9, 1.0f}, {2, 2, 64, 5, 0, 1.0f}};
  for (const Case& c : cs) {
    const Inputs in = make_inputs(c, 77);
    const AttentionShape s = shape_of(c);
    const int64_t width = static_cast<int64_t>(c.n_head) * c.hd;
    std::vector<float> out(static_cast<size_t>(c.n_q * width)), scratch(out.size());
    attention_bf16(s, in.q.data(), c.n_q, in.qs, in.k.data(), in.v.data(), in.kvs, out.data(), width, two);
    std::vector<uint16_t> want(static_cast<size_t>(bf16_act_elems(c.n_q, width)), 0), got(want.size(), 0);
    for (int64_t i = 0; i < c.n_q; ++i) round_row_bf16(out.data() + i * width, i, width, want.data());
    attention_bf16(s, in.q.data(), c.n_q, in.qs, in.k.data(), in.v.data(), in.kvs, scratch.data(), width, two, got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 2), 0) << "head_dim " << c.hd << ", " << c.n_kv << " keys";
  }
}

// A q/k/v GEMM that rounds its results straight into the attention's layouts (Bf16QkvTarget):
// the same bytes as packing its fp32 output, padding tokens zeroed (45 tokens), grouped heads,
// at 1 and 2 threads; the attention over them gives attention_bf16's bits.
TEST(AttentionBf16, QkvGemmWritesThePackedLayouts) {
  if (!attention_bf16_available()) GTEST_SKIP() << "no AMX bf16 here";
  const int64_t m = 45, K = 40, hd = 32, nh = 4, nkv = 2, rows = (nh + 2 * nkv) * hd;
  const test::RandomMatrix W = test::make_matrix(DType::F32, rows, K, 61);
  const PackedWeights P = pack_bf16_tiles(W.w);
  const std::vector<float> x = random_x(m, K, 62), bias = random_x(1, rows, 63);
  std::vector<uint16_t> xb(static_cast<size_t>(bf16_act_elems(m, K)));
  zero_pad_tokens_bf16(xb.data(), m, K);
  for (int64_t t = 0; t < m; ++t) round_row_bf16(x.data() + t * K, t, K, xb.data());
  AttentionShape s;
  s.n_head = nh, s.n_head_kv = nkv, s.head_dim = hd, s.n_kv = m, s.scale = 0.2f, s.causal = false;
  const Bf16AttnDims D = bf16_attn_dims(s, m);
  const size_t nq = static_cast<size_t>(D.n_head * D.nqp * D.hdk), nk = static_cast<size_t>(D.n_head_kv * D.nkp * D.hdk),
               nv = static_cast<size_t>(D.n_head_kv * D.nkp * D.hdv);
  ThreadPool one(1), two(2);
  std::vector<float> y(static_cast<size_t>(m * rows));
  gemm_bf16_rounded(P.matrix, xb.data(), m, y.data(), rows, one, bias.data());
  std::vector<uint16_t> want(nq + nk + nv);
  const Bf16AttnBuffers wb{want.data(), want.data() + nq, want.data() + nq + nk};
  ref::pack_attn_bf16(D, y.data(), rows, y.data() + nh * hd, y.data() + (nh + nkv) * hd, rows, 0, D.nqp, 0, D.nkp, wb);
  std::vector<float> want_out(static_cast<size_t>(m * nh * hd)), got_out(want_out.size());
  attention_bf16(s, y.data(), m, rows, y.data() + nh * hd, y.data() + (nh + nkv) * hd, rows, want_out.data(), nh * hd, two);
  for (ThreadPool* pool : {&one, &two}) {
    std::vector<uint16_t> got(want.size(), 0xffff);  // the padding must come back zero
    const Bf16QkvTarget target{&D, {got.data(), got.data() + nq, got.data() + nq + nk}};
    gemm_bf16_rounded(P.matrix, xb.data(), m, nullptr, 0, *pool, bias.data(), nullptr, &target);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 2), 0) << pool->size() << " threads";
    attention_bf16_packed(D, target.bufs, got_out.data(), nh * hd, *pool);
    EXPECT_EQ(got_out, want_out);
  }
  // shapes the layouts cannot take are errors
  const Bf16QkvTarget target{&D, wb};
  EXPECT_THROW(gemm_bf16_rounded(P.matrix, xb.data(), m - 1, nullptr, 0, one, bias.data(), nullptr, &target), Error);
}

// Keys and values kept packed (a recorded vision tile state): packing every key with
// pack_attn_bf16_keys gives pack_attn_bf16's bytes; replacing a scattered subset of keys (in any
// order) and attending over the packed buffers gives attention_bf16's bits over the fp32 keys
// and values with the same rows replaced, for any number of queries and threads. A key out of
// range is an error.
TEST(AttentionBf16, KeptKeysTakeChangedRows) {
  ThreadPool one(1), two(2);
  const std::vector<Case> cs = {{2, 2, 64, 45, 70, 3.0f}, {4, 2, 32, 33, 100, 1.0f}, {2, 1, 72, 5, 129, 1.0f},
                                {2, 2, 64, 3, kBf16AttnKeys + 77, 3.0f}};
  for (const Case& c : cs) {
    Inputs in = make_inputs(c, 91);
    const AttentionShape s = shape_of(c);
    const Bf16AttnDims D = bf16_attn_dims(s, c.n_q);
    const size_t nq = static_cast<size_t>(D.n_head * D.nqp * D.hdk), nk = static_cast<size_t>(bf16_attn_k_elems(D)),
                 nv = static_cast<size_t>(bf16_attn_v_elems(D));
    EXPECT_EQ(nk, static_cast<size_t>(D.n_head_kv * D.nkp * D.hdk));
    std::vector<uint16_t> want(nq + nk + nv, 0);
    ref::pack_attn_bf16(D, in.q.data(), in.qs, in.k.data(), in.v.data(), in.kvs, 0, D.nqp, 0, D.nkp,
                        {want.data(), want.data() + nq, want.data() + nq + nk});
    std::vector<int> all(static_cast<size_t>(c.n_kv));
    for (int j = 0; j < c.n_kv; ++j) all[static_cast<size_t>(j)] = j;
    std::vector<uint16_t> k16(nk, 0), v16(nv, 0);
    pack_attn_bf16_keys(D, in.k.data(), in.v.data(), in.kvs, all.data(), c.n_kv, k16.data(), v16.data());
    ASSERT_EQ(std::memcmp(k16.data(), want.data() + nq, nk * 2), 0) << "hd " << c.hd;
    ASSERT_EQ(std::memcmp(v16.data(), want.data() + nq + nk, nv * 2), 0) << "hd " << c.hd;
    // new values for every third key, from the last down (odd and even keys: both halves of a V pair)
    std::vector<int> changed;
    for (int j = static_cast<int>(c.n_kv) - 1; j >= 0; j -= 3) changed.push_back(j);
    const int64_t n = static_cast<int64_t>(changed.size());
    const std::vector<float> nk_rows = random_x(n, in.kvs, 92), nv_rows = random_x(n, in.kvs, 93);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t e = 0; e < in.kvs; ++e) {
        in.k[static_cast<size_t>(changed[static_cast<size_t>(r)] * in.kvs + e)] = nk_rows[static_cast<size_t>(r * in.kvs + e)];
        in.v[static_cast<size_t>(changed[static_cast<size_t>(r)] * in.kvs + e)] = nv_rows[static_cast<size_t>(r * in.kvs + e)];
      }
    pack_attn_bf16_keys(D, nk_rows.data(), nv_rows.data(), in.kvs, changed.data(), n, k16.data(), v16.data());
    std::vector<float> want_out(in.q.size(), -1.0f);
    attention_bf16(s, in.q.data(), c.n_q, in.qs, in.k.data(), in.v.data(), in.kvs, want_out.data(), in.qs, two);
    for (ThreadPool* pool : {&one, &two}) {
      std::vector<float> out(in.q.size(), -2.0f);
      attention_bf16_over(s, in.q.data(), c.n_q, in.qs, k16.data(), v16.data(), out.data(), in.qs, *pool);
      ASSERT_EQ(std::memcmp(out.data(), want_out.data(), out.size() * 4), 0) << "hd " << c.hd << ", " << pool->size() << " threads";
    }
    const int bad[] = {0, static_cast<int>(c.n_kv)};
    EXPECT_THROW(pack_attn_bf16_keys(D, nk_rows.data(), nv_rows.data(), in.kvs, bad, 2, k16.data(), v16.data()), Error);
  }
}

TEST(AttentionBf16, BadShapesAreErrors) {
  ThreadPool one(1);
  const Case c{2, 2, 64, 4, 8, 1.0f};
  const Inputs in = make_inputs(c, 3);
  std::vector<float> out(in.q.size(), -1.0f);
  AttentionShape s = shape_of(c);
  s.causal = true;
  EXPECT_THROW(attention_bf16(s, in.q.data(), 4, in.qs, in.k.data(), in.v.data(), in.kvs, out.data(), in.qs, one), Error);
  s = shape_of(c);
  s.n_head_kv = 3;
  EXPECT_THROW(attention_bf16(s, in.q.data(), 4, in.qs, in.k.data(), in.v.data(), in.kvs, out.data(), in.qs, one), Error);
  s = shape_of(c);
  s.head_dim = 300;
  EXPECT_THROW(attention_bf16(s, in.q.data(), 4, in.qs, in.k.data(), in.v.data(), in.kvs, out.data(), in.qs, one), Error);
  s = shape_of(c);
  s.n_kv = 0;  // no keys: zeros
  attention_bf16(s, in.q.data(), 4, in.qs, in.k.data(), in.v.data(), in.kvs, out.data(), in.qs, one);
  for (float x : out) ASSERT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace tessera
