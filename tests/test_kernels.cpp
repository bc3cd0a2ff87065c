// Kernel checks in the spirit of llama.cpp's test-backend-ops: every dtype over shapes with odd
// and tail sizes, against a float64 reference; the SIMD path bitwise equal to its scalar twin;
// results invariant to batch size and thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/kernels.h"
#include "kernels/elementwise.h"
#include "kernels/exact_repack.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernel_table.h"
#include "kernels/q8_panels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quantize.h"
#include "kernel_cases.h"

using namespace tessera;

using namespace tessera::test;

namespace {
bool has_avx512() { return detected_isa() >= Isa::Avx512; }
bool has_vnni() { return detected_isa() >= Isa::Avx512Vnni; }
bool has_avx2() { return detected_isa() >= Isa::Avx2 && detected_isa() != Isa::Neon; }
}  // namespace

// Tolerance against float64 (documented in docs/numerics.md): fp32 accumulation of K products
// in 16 lanes, plus one rounding of each dequantized weight, relative to sum |w x|.
TEST(Kernels, MatmulMatchesFloat64AndScalarTwinBitwise) {
  const std::vector<int64_t> ns = {1, 3, 8, 13, 29};  // 29: AVX2's 24-row prefill panel and a tail
  const std::vector<int64_t> ms = {1, 2, 3, 4, 5, 7, 17};  // 17: AVX2 prefill by k residue (from 16 tokens)
  for (const Case& c : cases()) {
    for (int64_t K : c.ks) {
      for (int64_t N : ns) {
        const RandomMatrix W = make_matrix(c.type, N, K, static_cast<uint32_t>(K * 131 + N));
        for (int64_t M : ms) {
          const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M + 7 * K));
          std::vector<float> y_ref(static_cast<size_t>(M * N)), y_simd(y_ref.size());
          ref::matmul_rows(W.w, 0, N, x.data(), M, K, y_ref.data(), N);
          for (int64_t t = 0; t < M; ++t) {
            for (int64_t r = 0; r < N; ++r) {
              double mag;
              const double want = exact_dot(W, x, r, t, &mag);
              const double tol = 4e-7 * std::sqrt(static_cast<double>(K)) * mag + 1e-30;
              ASSERT_NEAR(y_ref[static_cast<size_t>(t * N + r)], want, tol)
                  << dtype_name(c.type) << " K=" << K << " N=" << N << " M=" << M << " t=" << t << " r=" << r;
            }
          }
          if (has_avx2()) {
            avx2::matmul_rows(W.w, 0, N, x.data(), M, K, y_simd.data(), N);
            ASSERT_EQ(std::memcmp(y_ref.data(), y_simd.data(), y_ref.size() * 4), 0)
                << "avx2 differs from scalar: " << dtype_name(c.type) << " K=" << K << " N=" << N << " M=" << M;
          }
          if (has_avx512()) {
            avx512::matmul_rows(W.w, 0, N, x.data(), M, K, y_simd.data(), N);
            ASSERT_EQ(std::memcmp(y_ref.data(), y_simd.data(), y_ref.size() * 4), 0)
                << "avx512 differs from scalar: " << dtype_name(c.type) << " K=" << K << " N=" << N << " M=" << M;
          }
        }
      }
    }
  }
}

// A row's result must not depend on the batch it shares or on the thread count.
TEST(Kernels, MatmulIsBatchAndThreadInvariant) {
  ThreadPool one(1), two(2);
  for (const Case& c : cases()) {
    const int64_t K = c.ks.back(), N = 37, M = 11;
    const RandomMatrix W = make_matrix(c.type, N, K, 99);
    const std::vector<float> x = random_x(M, K, 5);
    std::vector<float> batch1(static_cast<size_t>(M * N)), batch2(batch1.size()), single(static_cast<size_t>(N));
    matmul(W.w, x.data(), M, K, batch1.data(), N, one);
    matmul(W.w, x.data(), M, K, batch2.data(), N, two);
    ASSERT_EQ(std::memcmp(batch1.data(), batch2.data(), batch1.size() * 4), 0) << dtype_name(c.type);
    for (int64_t t = 0; t < M; ++t) {
      matmul(W.w, x.data() + t * K, 1, K, single.data(), N, two);
      ASSERT_EQ(std::memcmp(single.data(), batch1.data() + t * N, N * 4), 0) << dtype_name(c.type) << " token " << t;
    }
    // uneven sub-batches (as chunked prefill makes them)
    std::vector<float> chunked(batch1.size());
    for (int64_t t0 = 0; t0 < M;) {
      const int64_t n = std::min<int64_t>(M - t0, 1 + t0 % 4);
      matmul(W.w, x.data() + t0 * K, n, K, chunked.data() + t0 * N, N, two);
      t0 += n;
    }
    ASSERT_EQ(std::memcmp(chunked.data(), batch1.data(), batch1.size() * 4), 0) << dtype_name(c.type);
  }
}

TEST(Kernels, IsaCapFallsBackToScalar) {
  const Isa before = active_isa();
  set_isa_cap(Isa::Scalar);
  EXPECT_EQ(active_isa(), Isa::Scalar);
  set_isa_cap(Isa::Amx);
  EXPECT_EQ(active_isa(), detected_isa());
  set_isa_cap(before);
}

// 8-bit activations: quantization semantics, scalar twin vs AVX-512 bitwise, error vs float64
// bounded by the activation quantization step, batch invariance.
TEST(Kernels, QuantizeRowQ8_1FollowsGgml) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i - 20) * 0.37f;
  x[5] = 0.5f * (127.0f / 43.0f * 0 + 1);  // arbitrary
  std::vector<BlockQ8_1> y(2);
  quantize_row_q8_1(x.data(), y.data(), 64);
  for (int b = 0; b < 2; ++b) {
    float amax = 0;
    int sum = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(32 * b + i)]));
    for (int i = 0; i < 32; ++i) {
      const int q = static_cast<int>(std::nearbyint(x[static_cast<size_t>(32 * b + i)] * (127.0f / amax)));
      EXPECT_EQ(y[static_cast<size_t>(b)].q[i], q);
      sum += q;
    }
    EXPECT_EQ(y[static_cast<size_t>(b)].d, fp16_to_float(float_to_fp16(amax / 127.0f)));
    EXPECT_EQ(y[static_cast<size_t>(b)].s, fp16_to_float(float_to_fp16(amax / 127.0f * static_cast<float>(sum))));
    EXPECT_EQ(y[static_cast<size_t>(b)].sum, sum);
  }
  std::vector<float> zero(32, 0.0f);
  quantize_row_q8_1(zero.data(), y.data(), 32);
  EXPECT_EQ(y[0].d, 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[0].q[i], 0);
}

// Each level's activation quantizer gives the scalar twin's bytes: rows of 1 to 97 blocks (the
// AVX-512 one reduces 16 blocks side by side: whole groups, short last groups, single blocks),
// with all-zero blocks, exact rounding ties, denormals, signed zeros and wide ranges.
TEST(Kernels, QuantizeRowQ8_1IsTheScalarTwinOnEveryLevel) {
  for (int64_t nb : {1, 2, 15, 16, 17, 18, 24, 33, 48, 97}) {
    const int64_t K = 32 * nb;
    std::vector<float> x = random_x(1, K, static_cast<uint32_t>(K + 3));
    for (int64_t i = 0; i < K; ++i) {
      const int64_t b = i / 32;
      if (b % 5 == 1) x[static_cast<size_t>(i)] = 0.0f;                                            // an all-zero block
      if (b % 5 == 2) x[static_cast<size_t>(i)] = static_cast<float>(i % 32 - 15) * 0.5f;          // ties: 127/15 steps
      if (b % 5 == 3) x[static_cast<size_t>(i)] *= static_cast<float>(1 << (i % 20)) * 1e-3f;      // wide range
      if (b % 5 == 4 && i % 3 == 0) x[static_cast<size_t>(i)] = i % 2 ? 1e-40f : -0.0f;          // denormal, -0
    }
    std::vector<BlockQ8_1> want(static_cast<size_t>(nb)), got(want.size());
    ref::quantize_row_q8_1(x.data(), want.data(), K);
    const auto same = [&](const char* level) {
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ8_1 &w = want[static_cast<size_t>(b)], &g = got[static_cast<size_t>(b)];
        ASSERT_EQ(std::memcmp(w.q, g.q, 32), 0) << level << " blocks " << nb << " block " << b;
        ASSERT_EQ(std::memcmp(&w.d, &g.d, 4), 0) << level << " d, blocks " << nb << " block " << b;
        ASSERT_EQ(std::memcmp(&w.s, &g.s, 4), 0) << level << " s, blocks " << nb << " block " << b;
        ASSERT_EQ(w.sum, g.sum) << level;
        ASSERT_EQ(w.sum_lo, g.sum_lo) << level;
      }
    };
    if (has_avx2()) {
      avx2::quantize_row_q8_1(x.data(), got.data(), K);
      same("avx2");
    }
    if (has_avx512()) {
      avx512::quantize_row_q8_1(x.data(), got.data(), K);
      same("avx512");
    }
  }
}

// Q8_0 weights (a float mmproj quantized at load, `tessera convert --type q8_0`): every level
// bitwise the scalar twin, whose rule is ggml's (round half away from zero) — checked on exact
// ties, the float just below 0.5, zero, denormal, huge, NaN and infinite values, and tails of rows.
TEST(Kernels, QuantizeRowQ8_0IsTheScalarTwinOnEveryLevel) {
  {  // ggml's values on a block whose scale is exactly 1: ties go away from zero
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f, x[1] = 2.5f, x[2] = -2.5f, x[3] = 0.5f, x[4] = -0.5f, x[5] = 0.49999997f, x[6] = 3.5f, x[7] = -126.5f;
    std::vector<uint8_t> q(34);
    ref::quantize_row_q8_0(x.data(), 32, q.data());
    EXPECT_EQ(fp16_at(q.data()), 1.0f);
    const int want[8] = {127, 3, -3, 1, -1, 0, 4, -127};
    for (int i = 0; i < 8; ++i) EXPECT_EQ(static_cast<int8_t>(q[2 + i]), want[i]) << i;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t nb : {1, 2, 3, 17, 24, 97}) {
    const int64_t K = 32 * nb;
    std::vector<float> x = random_x(1, K, static_cast<uint32_t>(K + 7));
    for (int64_t i = 0; i < K; ++i) {
      float& v = x[static_cast<size_t>(i)];
      const int64_t b = i / 32, j = i % 32;
      switch (b % 8) {
        case 1: v = 0.0f; break;                                                        // an all-zero block
        case 2: v = j == 0 ? 254.0f : static_cast<float>(2 * (j - 16) + 1); break;      // d = 2: odd values tie
        case 3: v *= static_cast<float>(1 << (j % 20)) * 1e-3f; break;                  // a wide range
        case 4: v = j % 3 == 0 ? (j % 2 ? 1e-40f : -0.0f) : v * 1e-39f; break;          // denormal scale: 1/d overflows
        case 5: if (j == 7) v = nan; break;                                              // NaN: ignored by amax, quant 0
        case 6: if (j == 9) v = j % 2 ? inf : -inf; break;                               // infinite amax: d = inf, quants 0
        case 7: v *= 3e37f; break;                                                       // near float's range
        default: break;
      }
    }
    std::vector<uint8_t> want(static_cast<size_t>(nb * 34)), got(want.size());
    ref::quantize_row_q8_0(x.data(), K, want.data());
    for (Isa level : {Isa::Neon, Isa::Avx2, Isa::Avx512}) {
      const KernelTable& k = kernel_table(level);
      if (k.isa != level) continue;  // not on this CPU
      std::fill(got.begin(), got.end(), 0xab);
      k.quantize_row_q8_0(x.data(), K, got.data());
      for (int64_t b = 0; b < nb; ++b)
        ASSERT_EQ(std::memcmp(want.data() + 34 * b, got.data() + 34 * b, 34), 0) << isa_name(level) << " blocks " << nb << " block " << b;
    }
    std::vector<uint8_t> via_row(want.size());
    quantize_row(DType::Q8_0, x.data(), K, via_row.data());  // the public entry takes the active level
    ASSERT_EQ(via_row, want);
  }
}

// fp16 rows widened (dequantize_row of an F16 tensor): every half pattern, tails included; a
// signalling NaN comes back quiet with its payload, as the conversion instructions return it.
TEST(Kernels, Fp16LoadIsTheScalarTwinOnEveryHalf) {
  std::vector<uint16_t> h(65536 + 13);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i * 40503u);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  const int64_t n = static_cast<int64_t>(h.size());
  std::vector<float> want(h.size()), got(h.size());
  ref::load_f16(h.data(), n, want.data());
  for (uint32_t i = 0; i < 65536; ++i) {
    const bool nan = (i & 0x7c00u) == 0x7c00u && (i & 0x3ffu) != 0;
    const float f = fp16_to_float(static_cast<uint16_t>(i));
    if (!nan) ASSERT_EQ(std::memcmp(&want[i], &f, 4), 0) << i;
    else ASSERT_TRUE(std::isnan(want[i]));
  }
  for (Isa level : {Isa::Neon, Isa::Avx2, Isa::Avx512}) {
    const KernelTable& k = kernel_table(level);
    if (k.isa != level) continue;
    for (int64_t len : {n, int64_t{37}, int64_t{16}, int64_t{5}}) {
      std::fill(got.begin(), got.end(), -1.0f);
      k.load_f16(h.data(), len, got.data());
      ASSERT_EQ(std::memcmp(want.data(), got.data(), static_cast<size_t>(len) * 4), 0) << isa_name(level) << " n " << len;
    }
  }
}

TEST(Kernels, MatmulQ8ActivationsMatchScalarTwinAndFloat64) {
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::A4G64, DType::Q5_0, DType::Q5_1,
                  DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::Q3_K, DType::Q2_K}) {
    for (int64_t K : {32, 64, 256, 576, 1536}) {
      if (K % info(t).block_elems) continue;  // Q4_K: super-blocks of 256
      for (int64_t N : {1, 3, 8, 13, 17, 40}) {
        const RandomMatrix W = make_matrix(t, N, K, static_cast<uint32_t>(K + N));
        const PackedWeights P = pack_q8_panels(W.w);
        for (int64_t M : {1, 2, 5, 9, 15, 16, 37}) {
          const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M * 3 + K));
          const int64_t nb = K / 32;
          std::vector<BlockQ8_1> xq(static_cast<size_t>(M * nb));
          for (int64_t i = 0; i < M; ++i) quantize_row_q8_1(x.data() + i * K, xq.data() + i * nb, K);
          std::vector<float> y_ref(static_cast<size_t>(M * N)), y_simd(y_ref.size());
          ref::matmul_q8_rows(W.w, 0, N, xq.data(), M, nb, y_ref.data(), N);
          for (int64_t i = 0; i < M; ++i) {
            for (int64_t r = 0; r < N; ++r) {
              double mag;
              const double want = exact_dot(W, x, r, i, &mag);
              // each activation moves by at most half a step (amax/254) plus fp16 rounding of d
              ASSERT_NEAR(y_ref[static_cast<size_t>(i * N + r)], want, 0.01 * mag + 1e-6)
                  << dtype_name(t) << " K=" << K << " N=" << N << " M=" << M;
            }
          }
          for (Isa level : {Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni}) {
            if (level == Isa::Avx2 ? !has_avx2() : !has_avx512() || (level == Isa::Avx512Vnni && !has_vnni())) continue;
            const auto q8_rows = kernel_table(level).matmul_q8_rows;  // VNNI's tries vpdpbusd first
            std::fill(y_simd.begin(), y_simd.end(), -1.0f);
            q8_rows(P.matrix, 0, N, xq.data(), M, nb, y_simd.data(), N);
            ASSERT_EQ(std::memcmp(y_ref.data(), y_simd.data(), y_ref.size() * 4), 0)
                << isa_name(level) << " differs from scalar: " << dtype_name(t) << " K=" << K << " N=" << N
                << " M=" << M;
            // batch invariance: token 0 alone, and any row range, give the same bits
            std::vector<float> single(static_cast<size_t>(N));
            q8_rows(P.matrix, 0, N, xq.data(), 1, nb, single.data(), N);
            ASSERT_EQ(std::memcmp(single.data(), y_simd.data(), N * 4), 0);
            if (N > 1) {  // ranges that start and end inside a panel
              std::fill(y_simd.begin(), y_simd.end(), -1.0f);
              const int64_t cut = N / 3 + 1;
              q8_rows(P.matrix, cut, N, xq.data(), M, nb, y_simd.data(), N);
              q8_rows(P.matrix, 0, cut, xq.data(), M, nb, y_simd.data(), N);
              ASSERT_EQ(std::memcmp(y_ref.data(), y_simd.data(), y_ref.size() * 4), 0);
            }
          }
        }
      }
    }
  }
}

// q, k, v (and gate, up) in one pass of the pool: every output bitwise what its own matmul_q8
// gives, for decode and prefill, row counts that are not whole panels, 1 to 3 threads.
// Blocks at the quants' extremes (every weight +1 but one -1 per block: quants 0 and the top
// value) against activations at ±127: the largest block sums the kernels can meet. The AVX2
// kernel adds maddubs results in int16 before widening (as many as cannot overflow); an
// overflow there would show as a difference from the scalar twin's int32 sums.
TEST(Kernels, MatmulQ8ExtremeBlocksMatchScalarTwin) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2";
  constexpr int64_t K = 512, N = 16, M = 3;
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::A4G64, DType::Q5_0, DType::Q5_1,
                  DType::Q5_K, DType::Q6_K, DType::Q3_K}) {
    const size_t rb = row_bytes(t, K);
    std::vector<uint8_t> bytes(rb * N);
    std::vector<float> row(K);
    for (int64_t r = 0; r < N; ++r) {
      for (int64_t k = 0; k < K; ++k) row[k] = k % 32 == r % 32 ? (r % 2 ? 1.0f : -1.0f) : (r % 2 ? -1.0f : 1.0f);
      quantize_row(t, row.data(), K, bytes.data() + r * rb);
    }
    const WeightMatrix w{t, N, K, bytes.data(), rb};
    const PackedWeights P = pack_q8_panels(w);
    std::vector<float> x(M * K);
    for (int64_t k = 0; k < K; ++k) {
      x[k] = 1.0f;            // every activation +127
      x[K + k] = -1.0f;       // every activation -127
      x[2 * K + k] = k % 2 ? 1.0f : -1.0f;
    }
    const int64_t nb = K / 32;
    std::vector<BlockQ8_1> xq(M * nb);
    for (int64_t i = 0; i < M; ++i) quantize_row_q8_1(x.data() + i * K, xq.data() + i * nb, K);
    std::vector<float> y_ref(M * N), y(M * N);
    ref::matmul_q8_rows(w, 0, N, xq.data(), M, nb, y_ref.data(), N);
    for (int64_t i = 0; i < M; ++i)  // the twin itself: sum = ±(K − 2·blocks)·127·scales, nonzero
      for (int64_t r = 0; r < 2; ++r) EXPECT_NE(y_ref[i * N + r], 0.0f) << dtype_name(t);
    avx2::matmul_q8_rows(P.matrix, 0, N, xq.data(), M, nb, y.data(), N);
    ASSERT_EQ(std::memcmp(y_ref.data(), y.data(), y.size() * 4), 0) << "avx2, " << dtype_name(t);
    if (has_vnni()) {
      std::fill(y.begin(), y.end(), -1.0f);
      kernel_table(Isa::Avx512Vnni).matmul_q8_rows(P.matrix, 0, N, xq.data(), M, nb, y.data(), N);
      ASSERT_EQ(std::memcmp(y_ref.data(), y.data(), y.size() * 4), 0) << "vnni, " << dtype_name(t);
    }
  }
}

// IQ4_NL and IQ4_XS at their extremes: every nibble 0 (level −127) or 15 (113), block scales ±32
// (IQ4_XS), against activations at ±127: the sign trick's pair sums reach 2·127·127, just inside
// maddubs' int16. And IQ4_NL's panels give the bits of its exact Q8_0 copy's (exact_repack.h),
// the copy the fp32 kernels take: the two paths of a session are the same weights.
TEST(Kernels, MatmulQ8Iq4ExtremesAndHeldCopy) {
  constexpr int64_t K = 512, N = 21, M = 4, nb = K / 32;
  std::mt19937 rng(5);
  for (DType t : {DType::IQ4_NL, DType::IQ4_XS}) {
    const size_t rb = row_bytes(t, K);
    std::vector<uint8_t> bytes(rb * N);
    for (int64_t r = 0; r < N; ++r) {
      uint8_t* row = bytes.data() + r * rb;
      const bool xs = t == DType::IQ4_XS;
      for (int64_t b = 0; b < K / (xs ? 256 : 32); ++b) {
        uint8_t* p = row + b * (xs ? 136 : 18);
        const uint16_t d = float_to_fp16(r % 3 == 2 ? 0.001f * static_cast<float>(rng() % 100 + 1) : 0.01f);
        std::memcpy(p, &d, 2);
        if (xs) {  // ls = 0 (−32) for rows 0 mod 3, 63 (+31) for rows 1 mod 3, random for the rest
          const uint8_t fill = r % 3 == 0 ? 0x00 : 0xff;
          for (int i = 2; i < 8; ++i) p[i] = r % 3 == 2 ? static_cast<uint8_t>(rng()) : fill;
        }
        const uint8_t nib = r % 3 == 0 ? 0x00 : r % 3 == 1 ? 0xff : 0;
        for (int i = xs ? 8 : 2; i < (xs ? 136 : 18); ++i) p[i] = r % 3 == 2 ? static_cast<uint8_t>(rng()) : nib;
      }
    }
    const WeightMatrix w{t, N, K, bytes.data(), rb};
    const PackedWeights P = pack_q8_panels(w);
    std::vector<float> x(M * K);
    for (int64_t k = 0; k < K; ++k) {
      x[k] = 1.0f, x[K + k] = -1.0f;  // every activation +127, -127
      x[2 * K + k] = k % 2 ? 1.0f : -1.0f;
      x[3 * K + k] = std::sin(0.37f * static_cast<float>(k));
    }
    std::vector<BlockQ8_1> xq(M * nb);
    for (int64_t i = 0; i < M; ++i) quantize_row_q8_1(x.data() + i * K, xq.data() + i * nb, K);
    std::vector<float> y_ref(M * N), y(M * N);
    ref::matmul_q8_rows(w, 0, N, xq.data(), M, nb, y_ref.data(), N);
    EXPECT_NE(y_ref[0], 0.0f);
    for (Isa level : {Isa::Neon, Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni}) {
      const KernelTable& kt = kernel_table(level);
      if (kt.isa != level) continue;
      std::fill(y.begin(), y.end(), -1.0f);
      kt.matmul_q8_rows(P.matrix, 0, N, xq.data(), M, nb, y.data(), N);
      ASSERT_EQ(std::memcmp(y_ref.data(), y.data(), y.size() * 4), 0) << isa_name(level) << ", " << dtype_name(t);
    }
    if (t != DType::IQ4_NL) continue;
    const PackedWeights held = hold_exactly(w);
    ASSERT_EQ(held.matrix.type, DType::Q8_0);
    const PackedWeights HP = pack_q8_panels(held.matrix);
    ThreadPool pool(2);
    std::vector<float> y_held(M * N), y_native(M * N), f_held(M * N), f_native(M * N);
    matmul_q8(HP.matrix, xq.data(), M, nb, y_held.data(), N, pool);
    matmul_q8(P.matrix, xq.data(), M, nb, y_native.data(), N, pool);
    EXPECT_EQ(std::memcmp(y_held.data(), y_native.data(), y.size() * 4), 0) << "8-bit activations";
    matmul(held.matrix, x.data(), M, K, f_held.data(), N, pool);  // fp32: SIMD on the copy, the twin on IQ4_NL
    matmul(w, x.data(), M, K, f_native.data(), N, pool);
    EXPECT_EQ(std::memcmp(f_held.data(), f_native.data(), y.size() * 4), 0) << "fp32 activations";
  }
}

// Q3_K's own panels (quants + 4 as nibbles, the halves' scales as Q6_K's) against its exact Q6_K
// copy (exact_repack.h), the one the fp32 kernels take: the same bits on 8-bit activations, and
// the scalar twin on the Q3_K rows the bits of the SIMD kernels on the copy on fp32 ones.
TEST(Kernels, MatmulQ8Q3KEqualsItsHeldQ6K) {
  ThreadPool pool(2);
  for (int64_t K : {256, 1536})
    for (int64_t N : {5, 37}) {
      const RandomMatrix W = make_matrix(DType::Q3_K, N, K, static_cast<uint32_t>(K + N));
      const PackedWeights held = hold_exactly(W.w);
      ASSERT_EQ(held.matrix.type, DType::Q6_K);
      const PackedWeights P = pack_q8_panels(W.w), HP = pack_q8_panels(held.matrix);
      for (int64_t M : {1, 3, 12}) {
        const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M + K));
        const int64_t nb = K / 32;
        std::vector<BlockQ8_1> xq(static_cast<size_t>(M * nb));
        for (int64_t i = 0; i < M; ++i) quantize_row_q8_1(x.data() + i * K, xq.data() + i * nb, K);
        std::vector<float> a(static_cast<size_t>(M * N)), b(a.size(), -1.0f);
        matmul_q8(HP.matrix, xq.data(), M, nb, a.data(), N, pool);
        matmul_q8(P.matrix, xq.data(), M, nb, b.data(), N, pool);
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "8-bit, K=" << K << " N=" << N << " M=" << M;
        matmul(held.matrix, x.data(), M, K, a.data(), N, pool);
        matmul(W.w, x.data(), M, K, b.data(), N, pool);
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "fp32, K=" << K << " N=" << N << " M=" << M;
      }
    }
}

TEST(Kernels, MatmulQ8GroupEqualsSeparateCalls) {
  const int64_t K = 576, nb = K / 32;
  for (DType t : {DType::Q4_1, DType::Q8_0, DType::Q4_K}) {
    if (K % info(t).block_elems) continue;
    const int64_t rows[3] = {72, 24, 29};
    std::vector<RandomMatrix> W;
    std::vector<PackedWeights> P;
    for (int i = 0; i < 3; ++i) W.push_back(make_matrix(t, rows[i], K, static_cast<uint32_t>(11 + i)));
    for (int i = 0; i < 3; ++i) P.push_back(pack_q8_panels(W[static_cast<size_t>(i)].w));
    for (int64_t M : {1, 7}) {
      const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M + 2));
      std::vector<BlockQ8_1> xq(static_cast<size_t>(M * nb));
      for (int64_t i = 0; i < M; ++i) quantize_row_q8_1(x.data() + i * K, xq.data() + i * nb, K);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<std::vector<float>> want(3), got(3);
        Q8Output outs[3];
        for (int i = 0; i < 3; ++i) {
          want[static_cast<size_t>(i)].assign(static_cast<size_t>(M * rows[i]), 0.0f);
          got[static_cast<size_t>(i)].assign(static_cast<size_t>(M * rows[i]), -1.0f);
          matmul_q8(P[static_cast<size_t>(i)].matrix, xq.data(), M, nb, want[static_cast<size_t>(i)].data(), rows[i], pool);
          outs[i] = {&P[static_cast<size_t>(i)].matrix, got[static_cast<size_t>(i)].data(), rows[i]};
        }
        matmul_q8_group(outs, 3, xq.data(), M, nb, pool);
        for (int i = 0; i < 3; ++i)
          ASSERT_EQ(want[static_cast<size_t>(i)], got[static_cast<size_t>(i)])
              << dtype_name(t) << " M=" << M << " threads=" << threads << " output " << i;
      }
    }
  }
}

// Prefill long enough to be split into token chunks (VNNI: 256 tokens; the 256-bit kernel: its
// L2-sized chunks, 108 tokens here, in tiles of 6) and 16-row panels, with a row range that starts
// mid-panel; the AVX2 kernel too where the CPU has it.
TEST(Kernels, MatmulQ8LongPrefillMatchesScalarTwin) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2";
  const int64_t K = 1536, N = 75, M = 270, nb = K / 32;
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::A4G64, DType::Q5_0, DType::Q5_1,
                  DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::Q3_K, DType::Q2_K}) {
    const RandomMatrix W = make_matrix(t, N, K, 99);
    const PackedWeights P = pack_q8_panels(W.w);
    const std::vector<float> x = random_x(M, K, 5);
    std::vector<BlockQ8_1> xq(static_cast<size_t>(M * nb));
    ThreadPool pool(2);
    quantize_rows_q8_1(x.data(), M, K, xq.data(), K, pool);
    std::vector<float> y_ref(static_cast<size_t>(M * N)), y(y_ref.size(), -1.0f);
    ref::matmul_q8_rows(W.w, 0, N, xq.data(), M, nb, y_ref.data(), N);
    avx2::matmul_q8_rows(P.matrix, 0, 3, xq.data(), M, nb, y.data(), N);
    avx2::matmul_q8_rows(P.matrix, 3, N, xq.data(), M, nb, y.data(), N);
    ASSERT_EQ(std::memcmp(y_ref.data(), y.data(), y.size() * 4), 0) << "avx2 " << dtype_name(t);
    if (!has_avx512()) continue;
    std::fill(y.begin(), y.end(), -1.0f);
    avx512::matmul_q8_rows(P.matrix, 0, 3, xq.data(), M, nb, y.data(), N);
    avx512::matmul_q8_rows(P.matrix, 3, N, xq.data(), M, nb, y.data(), N);
    ASSERT_EQ(std::memcmp(y_ref.data(), y.data(), y.size() * 4), 0) << dtype_name(t);
  }
}

// The word-at-a-time unpacking of Q4_K's 6-bit scales and mins equals the field-by-field one.
TEST(Kernels, Q4KScalesMins8MatchesFieldByField) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    uint8_t scales[12], sc8[8], mn8[8];
    for (auto& b : scales) b = static_cast<uint8_t>(rng());
    uint64_t s64, m64;
    q4k_scales_mins8(scales, s64, m64);
    std::memcpy(sc8, &s64, 8);
    std::memcpy(mn8, &m64, 8);
    for (int j = 0; j < 8; ++j) {
      int sc, mn;
      q4k_scale_min(scales, j, sc, mn);
      ASSERT_EQ(sc8[j], sc) << j;
      ASSERT_EQ(mn8[j], mn) << j;
    }
  }
}

// The vectorised activation quantizer gives the scalar twin's bytes, including all-zero
// blocks, tiny (fp16-subnormal) scales, huge values and exact .5 ties.
TEST(Kernels, QuantizeRowQ8_1SimdMatchesScalar) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2";
  for (Isa level : {Isa::Avx2, Isa::Avx512}) {
    if (kernel_table(level).isa != level) continue;  // not on this CPU
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float scale : {1.0f, 1e-6f, 1e-30f, 3e4f, 1e30f, 0.0f}) {
      std::vector<float> x(32 * 40);
      for (auto& v : x) v = u(rng) * scale;
      for (int i = 0; i < 32; ++i) x[static_cast<size_t>(64 + i)] = static_cast<float>(i) - 15.5f;  // ties after scaling? amax 15.5
      for (int i = 0; i < 32; ++i) x[static_cast<size_t>(96 + i)] = i == 3 ? 127.0f : static_cast<float>(i) + 0.5f;
      std::vector<BlockQ8_1> a(40), b(40);
      ref::quantize_row_q8_1(x.data(), a.data(), 32 * 40);
      kernel_table(level).quantize_row_q8_1(x.data(), b.data(), 32 * 40);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(BlockQ8_1)), 0) << isa_name(level) << " scale " << scale;
    }
  }
}

// The encoder GEMM: one FMA chain per output in k order, the AVX-512 kernel bitwise equal to the
// scalar twin, within the float64 tolerance, and independent of the thread count.
TEST(Kernels, GemmMatchesScalarTwinAndFloat64) {
  ThreadPool one(1), two(2);
  for (const Case& c : cases()) {
    for (int64_t K : {c.ks.front(), c.ks.back()}) {
      for (int64_t N : {1, 17, 32, 45}) {
        const RandomMatrix W = make_matrix(c.type, N, K, static_cast<uint32_t>(3 * K + N));
        for (int64_t M : {1, 5, 12, 13, 30}) {
          const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M + K));
          std::vector<float> y_ref(static_cast<size_t>(M * N)), y1(y_ref.size()), y2(y_ref.size());
          ref::gemm_rows(W.w, 0, N, x.data(), M, K, y_ref.data(), N);
          gemm(W.w, x.data(), M, K, y1.data(), N, one);
          gemm(W.w, x.data(), M, K, y2.data(), N, two);
          ASSERT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0) << dtype_name(c.type);
          ASSERT_EQ(std::memcmp(y_ref.data(), y1.data(), y1.size() * 4), 0) << dtype_name(c.type) << " K=" << K << " N=" << N << " M=" << M;
          if (has_avx2()) {  // the other x86 level, called directly
            std::vector<float> y3(y_ref.size());
            avx2::gemm_rows(W.w, 0, N, x.data(), M, K, y3.data(), N);
            ASSERT_EQ(std::memcmp(y_ref.data(), y3.data(), y3.size() * 4), 0) << "avx2 " << dtype_name(c.type) << " K=" << K;
          }
          for (int64_t t = 0; t < M; ++t)
            for (int64_t r = 0; r < N; ++r) {
              double mag;
              const double want = exact_dot(W, x, r, t, &mag);
              // a single sequential chain: error grows like K (not sqrt(K)) in the worst case
              ASSERT_NEAR(y_ref[static_cast<size_t>(t * N + r)], want, 1e-7 * static_cast<double>(K) * mag + 1e-30);
            }
        }
      }
    }
  }
}

// The GEMM's cache blocking: rows past one packed row block (256), k past one k block (768) with
// a tail, partial 32-row panels and token groups: still bitwise the scalar twin's single chain.
TEST(Kernels, GemmBlockingKeepsOneChain) {
  ThreadPool one(1), two(2);
  for (DType t : {DType::F32, DType::F16, DType::Q4_1}) {
    const int64_t K = t == DType::Q4_1 ? 1600 : 1700, N = 300, M = 25;
    const RandomMatrix W = make_matrix(t, N, K, 99);
    const std::vector<float> x = random_x(M, K, 98);
    std::vector<float> y_ref(static_cast<size_t>(M * N)), y1(y_ref.size()), y2(y_ref.size());
    ref::gemm_rows(W.w, 0, N, x.data(), M, K, y_ref.data(), N);
    gemm(W.w, x.data(), M, K, y1.data(), N, one);
    gemm(W.w, x.data(), M, K, y2.data(), N, two);
    EXPECT_EQ(std::memcmp(y_ref.data(), y1.data(), y1.size() * 4), 0) << dtype_name(t);
    EXPECT_EQ(std::memcmp(y_ref.data(), y2.data(), y2.size() * 4), 0) << dtype_name(t);
  }
}

// Weights repacked at load (gemm_panels.h) give the same bits as the per-call packing and the
// scalar twin at every x86 level and thread count, for row ranges that start on a panel, on a
// 16-row half of one, and off both (which fall back to per-call packing); odd row counts leave
// partial panels and uneven thread ranges.
TEST(Kernels, GemmOnRepackedPanelsGivesTheSameBits) {
  ThreadPool one(1), two(2), three(3);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t N : {1, 17, 45, 300, 576}) {
      const int64_t K = N == 300 ? 1700 : 77, M = N >= 300 ? 25 : 13;
      const RandomMatrix W = make_matrix(t, N, K, static_cast<uint32_t>(N + 11));
      const PackedWeights P = pack_gemm_panels(W.w);
      ASSERT_EQ(P.matrix.gemm_panels, P.data.get());
      ASSERT_GE(P.bytes, static_cast<size_t>((N + 31) / 32 * 32 * K) * (t == DType::F32 ? 4 : 2));
      const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M + K));
      std::vector<float> y_ref(static_cast<size_t>(M * N));
      ref::gemm_rows(W.w, 0, N, x.data(), M, K, y_ref.data(), N);
      for (ThreadPool* pool : {&one, &two, &three}) {
        std::vector<float> y(y_ref.size());
        gemm(P.matrix, x.data(), M, K, y.data(), N, *pool);
        ASSERT_EQ(std::memcmp(y_ref.data(), y.data(), y.size() * 4), 0) << dtype_name(t) << " N=" << N << " t=" << pool->size();
      }
      for (int64_t r0 : {int64_t{0}, int64_t{16}, int64_t{5}}) {
        if (r0 >= N) continue;
        const int64_t r1 = std::min<int64_t>(N, r0 + 40);
        std::vector<float> y(y_ref.size(), 0.0f), y_want(y_ref.size(), 0.0f);
        ref::gemm_rows(W.w, r0, r1, x.data(), M, K, y_want.data(), N);
        if (has_avx512()) {
          avx512::gemm_rows(P.matrix, r0, r1, x.data(), M, K, y.data(), N);
          ASSERT_EQ(std::memcmp(y_want.data(), y.data(), y.size() * 4), 0) << "avx512 " << dtype_name(t) << " r0=" << r0;
        }
        if (has_avx2()) {
          std::fill(y.begin(), y.end(), 0.0f);
          avx2::gemm_rows(P.matrix, r0, r1, x.data(), M, K, y.data(), N);
          ASSERT_EQ(std::memcmp(y_want.data(), y.data(), y.size() * 4), 0) << "avx2 " << dtype_name(t) << " r0=" << r0;
        }
      }
    }
  }
  const RandomMatrix Q = make_matrix(DType::Q4_1, 4, 64, 1);
  EXPECT_THROW(pack_gemm_panels(Q.w), Error);
}

// SwiGLU: every ISA bitwise its scalar twin (tails included), and within 4 ulp-ish of float64
// silu(g)·u, from deep negatives (silu -> ~0) through ±0 to large positives (silu -> g).
TEST(Kernels, SwigluMatchesScalarTwinAndFloat64) {
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.0f, 6.0f);
  for (int64_t n : {1, 15, 16, 17, 100, 1031}) {
    std::vector<float> g(static_cast<size_t>(n)), u(g.size());
    for (auto& v : g) v = nd(rng);
    for (auto& v : u) v = nd(rng);
    const float special[] = {0.0f, -0.0f, -100.0f, 100.0f, -87.0f, 88.0f, 1e-30f, -1e-30f};
    for (size_t i = 0; i < g.size() && i < 8; ++i) g[i] = special[i];
    std::vector<float> want = g;
    ref::swiglu(want.data(), u.data(), n);
    std::vector<float> got = g;
    swiglu(got.data(), u.data(), n);
    ASSERT_EQ(std::memcmp(want.data(), got.data(), got.size() * 4), 0) << "active ISA, n=" << n;
    if (has_avx2()) {
      got = g;
      avx2::swiglu(got.data(), u.data(), n);
      ASSERT_EQ(std::memcmp(want.data(), got.data(), got.size() * 4), 0) << "avx2, n=" << n;
    }
    for (int64_t i = 0; i < n; ++i) {
      const double x = g[static_cast<size_t>(i)], exact = x / (1.0 + std::exp(-x)) * u[static_cast<size_t>(i)];
      // exp's argument is clamped at -87.33 (exp_poly.h), so below that silu is g·1.2e-38, not ~0
      EXPECT_NEAR(want[static_cast<size_t>(i)], exact, 5e-7 * std::fabs(exact) + 2e-36 * std::fabs(u[static_cast<size_t>(i)]))
          << "g=" << x;
    }
  }
}

// The fp16 store (the KV cache's): every level bitwise float_to_fp16 (round to nearest even) on
// every upper half-word of a float with low half-words at and around the rounding ties, then on a
// random sample, contiguous and strided (the K tile's step of 16), tails included.
TEST(Kernels, Fp16StoreMatchesScalarTwinBitwise) {
  std::vector<uint32_t> bits;
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x2fffu, 0x3000u, 0x3001u, 0x8000u, 0xffffu})
      bits.push_back(hi << 16 | lo);
  std::mt19937 rng(5);
  for (int i = 0; i < 1'000'003; ++i) bits.push_back(static_cast<uint32_t>(rng()));
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  const int64_t n = static_cast<int64_t>(x.size());
  using Store = void (*)(const float*, int64_t, uint16_t*, int64_t);
  std::vector<std::pair<const char*, Store>> levels = {{"active", store_f16}};
  if (has_avx2()) levels.push_back({"avx2", avx2::store_f16});
  if (has_avx512()) levels.push_back({"avx512", avx512::store_f16});
  for (int64_t step : {1, 16}) {
    const int64_t len = step == 1 ? n : 4099;  // strided: a tile-sized run with a tail
    std::vector<uint16_t> want(static_cast<size_t>(len * step), 0xabcd), got;
    ref::store_f16(x.data(), len, want.data(), step);
    for (int64_t i = 0; i < len; ++i) ASSERT_EQ(want[static_cast<size_t>(i * step)], float_to_fp16(x[static_cast<size_t>(i)]));
    for (const auto& [name, store] : levels) {
      got.assign(want.size(), 0xabcd);
      store(x.data(), len, got.data(), step);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << name << " step " << step << " at " << i << " (bits " << std::hex << bits[i / step] << ")";
    }
  }
}

// RMS and Layer norms (with and without the fused residual add): every level this CPU has (AVX2,
// AVX-512 and NEON keep the statistics' eight partial sums in double vectors) bitwise the scalar
// twins, tails included, and within a few float ulp of float64 (rows with a large common offset
// included, where a float mean would lose the variance).
TEST(Kernels, NormsMatchScalarTwinAndFloat64) {
  for (Isa level : {Isa::Neon, Isa::Avx2, Isa::Avx512}) {
    const KernelTable& k = kernel_table(level);
    if (k.isa != level) continue;  // not on this CPU
    const auto layer_norm = k.layer_norm;
    const auto add_layer_norm = k.add_layer_norm;
    const auto rms_norm = k.rms_norm;
    const auto add_rms_norm = k.add_rms_norm;
    std::mt19937 rng(13);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 576, 768, 1031}) {
      for (float offset : {0.0f, 300.0f}) {
        std::vector<float> x(static_cast<size_t>(n)), d(x.size()), w(x.size()), b(x.size());
        for (auto& v : x) v = nd(rng) + offset;
        for (auto& v : d) v = nd(rng);
        for (auto& v : w) v = nd(rng);
        for (auto& v : b) v = nd(rng);
        const float eps = 1e-6f;
        std::vector<float> want(x.size()), got(x.size()), xw = x, xg = x;
        ref::layer_norm(x.data(), w.data(), b.data(), want.data(), n, eps);
        layer_norm(x.data(), w.data(), b.data(), got.data(), n, eps);
        ASSERT_EQ(std::memcmp(want.data(), got.data(), got.size() * 4), 0) << "layer_norm n=" << n << " " << isa_name(level);
        double mean = 0, var = 0;
        for (float v : x) mean += v;
        mean /= static_cast<double>(n);
        for (float v : x) var += (v - mean) * (v - mean);
        var /= static_cast<double>(n);
        for (int64_t i = 0; i < n; ++i) {
          // x - m is taken in float with m the mean rounded to float: up to half an ulp of the mean
          // (relative 6e-8), scaled by 1/σ and w, on top of a few ulp of the result
          const double inv = 1.0 / std::sqrt(var + eps), exact = (x[i] - mean) * inv * w[i] + b[i];
          const double tol = 4e-6 * (std::fabs((x[i] - mean) * inv * w[i]) + std::fabs(b[i])) + 6e-8 * std::fabs(mean) * inv * std::fabs(w[i]);
          ASSERT_NEAR(got[i], exact, tol) << "layer_norm n=" << n << " i=" << i << " offset " << offset;
        }
        ref::add_layer_norm(xw.data(), d.data(), w.data(), b.data(), want.data(), n, eps);
        add_layer_norm(xg.data(), d.data(), w.data(), b.data(), got.data(), n, eps);
        ASSERT_EQ(std::memcmp(xw.data(), xg.data(), xg.size() * 4), 0) << "add_layer_norm's x, n=" << n;
        ASSERT_EQ(std::memcmp(want.data(), got.data(), got.size() * 4), 0) << "add_layer_norm n=" << n << " " << isa_name(level);
        xw = x, xg = x;
        ref::rms_norm(x.data(), w.data(), want.data(), n, eps);
        rms_norm(x.data(), w.data(), got.data(), n, eps);
        ASSERT_EQ(std::memcmp(want.data(), got.data(), got.size() * 4), 0) << "rms_norm n=" << n << " " << isa_name(level);
        double ss = 0;
        for (float v : x) ss += static_cast<double>(v) * v;
        for (int64_t i = 0; i < n; ++i) {
          const double exact = x[i] / std::sqrt(ss / static_cast<double>(n) + eps) * w[i];
          ASSERT_NEAR(got[i], exact, 4e-7 * std::fabs(exact) + 1e-30) << "rms_norm n=" << n << " i=" << i;
        }
        ref::add_rms_norm(xw.data(), d.data(), w.data(), want.data(), n, eps);
        add_rms_norm(xg.data(), d.data(), w.data(), got.data(), n, eps);
        ASSERT_EQ(std::memcmp(xw.data(), xg.data(), xg.size() * 4), 0) << "add_rms_norm's x, n=" << n;
        ASSERT_EQ(std::memcmp(want.data(), got.data(), got.size() * 4), 0) << "add_rms_norm n=" << n;
      }
    }
  }
}

// Vectorised softmax and GELU-tanh against their scalar twins (softmax: the same polynomial exp,
// summed in another order; GELU: libm tanh) and softmax against float64: within a few ulp.
TEST(Kernels, SoftmaxAndGeluMatchScalar) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (int64_t n : {1, 15, 16, 17, 100, 1024}) {
    std::vector<float> a(static_cast<size_t>(n)), b;
    for (auto& v : a) v = nd(rng);
    b = a;
    std::vector<float> g1 = a, g2 = a;
    ref::softmax_row(a.data(), n, 0.125f);
    softmax_row(b.data(), n, 0.125f);
    std::vector<double> want(static_cast<size_t>(n));
    double mx = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, 0.125 * g1[static_cast<size_t>(i)]);
    for (int64_t i = 0; i < n; ++i) sum += want[static_cast<size_t>(i)] = std::exp(0.125 * g1[static_cast<size_t>(i)] - mx);
    ref::gelu_tanh(g1.data(), n);
    gelu_tanh(g2.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double w = want[static_cast<size_t>(i)] / sum;
      EXPECT_NEAR(a[i], w, 2e-6 * w) << n;
      EXPECT_NEAR(b[i], w, 2e-6 * w) << n;
      EXPECT_NEAR(a[i], b[i], 1e-6f * std::max(1e-3f, a[i])) << n;
      EXPECT_NEAR(g1[i], g2[i], 2e-6f * std::max(1.0f, std::fabs(g1[i]))) << n;
    }
  }
  // GELU against float64 over a dense grid (AVX-512 computes v / (1 + 2^t), docs/numerics.md)
  std::vector<float> v(400'001);
  for (size_t i = 0; i < v.size(); ++i) v[i] = -20.0f + 40.0f * static_cast<float>(i) / 400'000.0f;
  std::vector<float> g = v;
  gelu_tanh(g.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = v[i], u = 0.7978845608028654 * (x + 0.044715 * x * x * x), want = 0.5 * x * (1.0 + std::tanh(u));
    ASSERT_NEAR(g[i], want, 2e-7 * std::max(1.0, std::fabs(want))) << x;
  }
}
