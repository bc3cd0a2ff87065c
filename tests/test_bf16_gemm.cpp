// The opt-in bf16 GEMM (kernels/bf16_tiles.h): the scalar twin and the AMX and AVX512-BF16 kernels within fp32
// summation error of a float64 sum of the bf16-rounded inputs, the twin within the bf16 rounding
// bound of the unrounded ones, and the same bits whatever the batch, row range or thread count.
// On AMD Zen 4 the AVX512-BF16 kernel is also the twin bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu.h"
#include "core/error.h"
#include "core/fp16.h"
#include "kernel_cases.h"
#include "kernels/bf16_tiles.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernel_table.h"

namespace tessera {
namespace {

using test::make_matrix;
using test::random_x;

// The AVX512-BF16 kernel is in use (no AMX) on a CPU where VDPBF16PS was checked to follow its
// specification (odd product, then even, one rounding each): AMD Zen 4. Elsewhere it is held to the
// bound only (not checked on an Intel core without AMX).
bool vdp_is_the_twin() { return bf16_gemm_available() && active_isa() == Isa::Avx512Vnni && cpu_features().amd; }

TEST(Bf16Gemm, WithinBoundsOfFloat64AndInvariant) {
  ThreadPool one(1), two(2), three(3);
  if (!bf16_gemm_available()) std::printf("note: no AMX or AVX512_BF16 here: the scalar twin only\n");
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t K : {16, 37, 64, 200, 576}) {
      for (int64_t N : {1, 16, 17, 33, 64}) {
        const test::RandomMatrix W = make_matrix(t, N, K, static_cast<uint32_t>(K * 7 + N));
        const PackedWeights P = pack_bf16_tiles(W.w);
        // packing from the gemm panels gives the same tiles as from the rows
        const PackedWeights G = pack_gemm_panels(W.w);
        const PackedWeights PG = pack_bf16_tiles(G.matrix);
        ASSERT_EQ(P.bytes, PG.bytes);
        ASSERT_EQ(std::memcmp(P.data.get(), PG.data.get(), P.bytes), 0) << dtype_name(t) << " K=" << K << " N=" << N;
        for (int64_t M : {1, 5, 31, 33, 70}) {
          const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M * 5 + K));
          const int64_t kp = bf16_padded_k(K);
          std::vector<uint16_t> xb(static_cast<size_t>((M + 15) / 16 * 16 * kp));
          round_rows_bf16(x.data(), 0, M, K, K, xb.data(), kp);
          std::vector<float> y_ref(static_cast<size_t>(M * N));
          ref::gemm_bf16_rows(P.matrix, 0, N, xb.data(), M, kp, y_ref.data(), N);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t r = 0; r < N; ++r) {
              double rounded = 0, exact = 0, mag = 0;
              for (int64_t k = 0; k < K; ++k) {
                const double wr = bf16_to_float(float_to_bf16(static_cast<float>(W.exact[static_cast<size_t>(r * K + k)])));
                const double xr = bf16_to_float(xb[static_cast<size_t>(bf16_act_index(i, k, kp))]);
                rounded += wr * xr;
                exact += W.exact[static_cast<size_t>(r * K + k)] * x[static_cast<size_t>(i * K + k)];
                mag += std::fabs(wr * xr);
              }
              const double got = y_ref[static_cast<size_t>(i * N + r)];
              // K fp32 additions: each rounds by at most 2^-24 of the running magnitude
              ASSERT_NEAR(got, rounded, static_cast<double>(K) * 0x1p-24 * mag + 1e-30) << "K=" << K;
              // each input moves by at most 2^-9 relative: products by (1 + 2^-9)^2 - 1
              ASSERT_NEAR(got, exact, 0x1p-8 * 1.01 * mag + static_cast<double>(K) * 0x1p-24 * mag + 1e-30);
            }
          // the dispatcher (AMX here where granted): within the same bound of the float64 sum of
          // the rounded inputs (TDPBF16PS sums inside a tile op in its own undocumented order, so
          // it is not bitwise equal to the twin), and the same bits at 1, 2, 3 threads and for
          // the last token alone
          std::vector<float> y1(y_ref.size(), -1.0f);
          gemm_bf16(P.matrix, x.data(), M, K, y1.data(), N, one);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t r = 0; r < N; ++r) {
              double rounded = 0, mag = 0;
              for (int64_t k = 0; k < K; ++k) {
                const double p = bf16_to_float(float_to_bf16(static_cast<float>(W.exact[static_cast<size_t>(r * K + k)]))) *
                                 static_cast<double>(bf16_to_float(xb[static_cast<size_t>(bf16_act_index(i, k, kp))]));
                rounded += p;
                mag += std::fabs(p);
              }
              ASSERT_NEAR(y1[static_cast<size_t>(i * N + r)], rounded, static_cast<double>(K) * 0x1p-24 * mag + 1e-30)
                  << isa_name(active_isa()) << " " << dtype_name(t) << " K=" << K << " N=" << N
                  << " M=" << M;
            }
          if (!bf16_gemm_available()) {
            ASSERT_EQ(std::memcmp(y1.data(), y_ref.data(), y1.size() * 4), 0) << "the scalar path is the twin";
          }
          if (vdp_is_the_twin()) {
            ASSERT_EQ(std::memcmp(y1.data(), y_ref.data(), y1.size() * 4), 0)
                << "VDPBF16PS (odd product first, then even) is the twin, bit for bit: " << dtype_name(t) << " K=" << K
                << " N=" << N << " M=" << M;
          }
          for (ThreadPool* pool : {&two, &three}) {
            std::vector<float> y(y_ref.size(), -1.0f);
            gemm_bf16(P.matrix, x.data(), M, K, y.data(), N, *pool);
            ASSERT_EQ(std::memcmp(y.data(), y1.data(), y.size() * 4), 0)
                << dtype_name(t) << " K=" << K << " N=" << N << " M=" << M << " threads=" << pool->size();
          }
          std::vector<float> single(static_cast<size_t>(N));
          gemm_bf16(P.matrix, x.data() + (M - 1) * K, 1, K, single.data(), N, one);
          ASSERT_EQ(std::memcmp(single.data(), y1.data() + (M - 1) * N, static_cast<size_t>(N) * 4), 0);
        }
      }
    }
  }
}

// llama.cpp's block types go into the tiles dequantized and rounded (each weight float_to_bf16 of
// its dequantize_row value), and the GEMM over them keeps the float types' bound.
TEST(Bf16Gemm, BlockTypesAreDequantizedThenRounded) {
  ThreadPool two(2);
  for (DType t : {DType::Q8_0, DType::Q4_1, DType::Q5_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t N = 37, K = 512, M = 19, kp = bf16_padded_k(K), nkb = kp / kBf16K;
    ASSERT_TRUE(supports_bf16_tiles(t)) << dtype_name(t);
    const test::RandomMatrix W = make_matrix(t, N, K, 5);
    const PackedWeights P = pack_bf16_tiles(W.w);
    const uint16_t* tiles = reinterpret_cast<const uint16_t*>(P.matrix.bf16_tiles);
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t r = 0; r < N; ++r) {
      dequantize_row(t, W.w.data + r * static_cast<int64_t>(W.w.row_stride), row.data(), K);
      for (int64_t k = 0; k < K; ++k)
        ASSERT_EQ(tiles[bf16_weight_index(r, k, nkb)], float_to_bf16(row[static_cast<size_t>(k)])) << dtype_name(t) << " " << r << " " << k;
    }
    const std::vector<float> x = random_x(M, K, 6);
    std::vector<uint16_t> xb(static_cast<size_t>(bf16_act_elems(M, K)), 0);
    round_rows_bf16(x.data(), 0, M, K, K, xb.data(), kp);
    std::vector<float> y(static_cast<size_t>(M * N));
    gemm_bf16(P.matrix, x.data(), M, K, y.data(), N, two);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t r = 0; r < N; ++r) {
        double want = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = bf16_to_float(tiles[bf16_weight_index(r, k, nkb)]) *
                           static_cast<double>(bf16_to_float(xb[static_cast<size_t>(bf16_act_index(i, k, kp))]));
          want += p;
          mag += std::fabs(p);
        }
        ASSERT_NEAR(y[static_cast<size_t>(i * N + r)], want, static_cast<double>(K) * 0x1p-24 * mag + 1e-30) << dtype_name(t);
      }
  }
  EXPECT_FALSE(supports_bf16_tiles(DType::A4G64));
}

TEST(Bf16Gemm, SimdRoundingMatchesScalar) {
#if defined(TESSERA_HAVE_AVX512)
  if (!bf16_gemm_available()) GTEST_SKIP() << "no AMX bf16 here";
  const int64_t K = 83, kp = bf16_padded_k(K), M = 17;
  std::vector<float> x = random_x(M, K, 11);
  // ties, NaNs, infinities, denormals (rounding to zero, to a bf16 denormal and up to the least
  // normal: a converter that flushes denormals, as VCVTNE2PS2BF16 does, fails on the last two) and
  // signed zeros
  const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0xff800001u, 0x7f800000u, 0xff800000u,
                              0x00000001u, 0x80008000u, 0x80000000u, 0x7f7fffffu, 0x00400000u, 0x807fffffu};
  for (size_t i = 0; i < sizeof special / 4; ++i) std::memcpy(&x[i * 7], &special[i], 4);
  std::vector<uint16_t> a(static_cast<size_t>((M + 15) / 16 * 16 * kp), 1), b(a.size(), 1);
  round_rows_bf16(x.data(), 0, M, K, K, a.data(), kp);
  avx512::round_rows_bf16_avx512(x.data(), 0, M, K, K, b.data(), kp);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 2), 0);
#else
  GTEST_SKIP() << "x86 only";
#endif
}

TEST(Bf16Gemm, RowRangesAndBadInput) {
  const test::RandomMatrix W = make_matrix(DType::F32, 70, 96, 3);
  const PackedWeights P = pack_bf16_tiles(W.w);
  const std::vector<float> x = random_x(40, 96, 4);
  std::vector<uint16_t> xb(48 * 96);
  round_rows_bf16(x.data(), 0, 40, 96, 96, xb.data(), 96);
  std::vector<float> whole(40 * 70), parts(40 * 70, -1.0f);
  ref::gemm_bf16_rows(P.matrix, 0, 70, xb.data(), 40, 96, whole.data(), 70);
  ref::gemm_bf16_rows(P.matrix, 0, 32, xb.data(), 40, 96, parts.data(), 70);
  ref::gemm_bf16_rows(P.matrix, 32, 70, xb.data(), 40, 96, parts.data(), 70);
  EXPECT_EQ(std::memcmp(whole.data(), parts.data(), whole.size() * 4), 0);
  // a type it does not take (MLX's A4G64) and matrices without tiles are refused with an error, not
  // a crash
  const test::RandomMatrix Q = make_matrix(DType::Q8_0, 4, 64, 5);
  WeightMatrix a4 = Q.w;
  a4.type = DType::A4G64;
  EXPECT_THROW(pack_bf16_tiles(a4), Error);
  ThreadPool one(1);
  std::vector<float> y(40 * 70);
  EXPECT_THROW(gemm_bf16(W.w, x.data(), 40, 96, y.data(), 70, one), Error);
  EXPECT_THROW(gemm_bf16_rounded(W.w, xb.data(), 40, y.data(), 70, one), Error);
}

// Stacked matrices (q, k and v as one GEMM): the stacked call gives, for each part's rows, the
// bits of that part packed and called alone, and so does each part's view into the stack; parts
// other than the last must have whole row groups, and all one width and type.
TEST(Bf16Gemm, StackedMatricesGiveEachPartsBits) {
  const int64_t M = 37, K = 83;
  const test::RandomMatrix A = make_matrix(DType::F16, 64, K, 31), B = make_matrix(DType::F16, 32, K, 32),
                           C = make_matrix(DType::F16, 40, K, 33);
  const StackedBf16Tiles S = stack_bf16_tiles({&A.w, &B.w, &C.w});
  ASSERT_EQ(S.all.matrix.rows, 136);
  ASSERT_EQ(S.views.size(), 3u);
  const std::vector<float> x = random_x(M, K, 34), bias = random_x(1, 136, 35);
  std::vector<uint16_t> xb(static_cast<size_t>(bf16_act_elems(M, K)));
  zero_pad_tokens_bf16(xb.data(), M, K);
  for (int64_t t = 0; t < M; ++t) round_row_bf16(x.data() + t * K, t, K, xb.data());
  ThreadPool two(2);
  std::vector<float> all(static_cast<size_t>(M * 136)), alone(all.size(), -1.0f), viewed(all.size(), -2.0f);
  gemm_bf16_rounded(S.all.matrix, xb.data(), M, all.data(), 136, two, bias.data());
  int64_t r0 = 0;
  for (size_t i = 0; i < 3; ++i) {
    const test::RandomMatrix& part = i == 0 ? A : i == 1 ? B : C;
    const PackedWeights P = pack_bf16_tiles(part.w);
    gemm_bf16_rounded(P.matrix, xb.data(), M, alone.data() + r0, 136, two, bias.data() + r0);
    gemm_bf16_rounded(S.views[i], xb.data(), M, viewed.data() + r0, 136, two, bias.data() + r0);
    r0 += part.w.rows;
  }
  EXPECT_EQ(std::memcmp(all.data(), alone.data(), all.size() * 4), 0);
  EXPECT_EQ(std::memcmp(all.data(), viewed.data(), all.size() * 4), 0);
  // a middle part with a partial row group, or parts of different widths or types, are errors
  const test::RandomMatrix D = make_matrix(DType::F16, 40, K, 36), E = make_matrix(DType::F16, 32, K + 1, 37),
                           F = make_matrix(DType::F32, 32, K, 38);
  EXPECT_THROW(stack_bf16_tiles({&D.w, &A.w}), Error);
  EXPECT_THROW(stack_bf16_tiles({&A.w, &E.w}), Error);
  EXPECT_THROW(stack_bf16_tiles({&A.w, &F.w}), Error);
  EXPECT_THROW(stack_bf16_tiles({}), Error);
}

// The GELU epilogue (fc1 into fc2's activations): the same bytes as the GEMM's y, then gelu_tanh
// over each token's row and round_row_bf16, on the tile kernel at 1 and 2 threads and on the twin,
// with a partial last row group (70 rows: the line's padding past row 70 stays zero).
TEST(Bf16Gemm, GeluEpilogueGivesTheSameBits) {
  const int64_t M = 37, K = 83, N = 70;
  const test::RandomMatrix W = make_matrix(DType::F16, N, K, 41);
  const PackedWeights P = pack_bf16_tiles(W.w);
  const std::vector<float> x = random_x(M, K, 42), bias = random_x(1, N, 43);
  std::vector<uint16_t> xb(static_cast<size_t>(bf16_act_elems(M, K)));
  zero_pad_tokens_bf16(xb.data(), M, K);
  for (int64_t t = 0; t < M; ++t) round_row_bf16(x.data() + t * K, t, K, xb.data());
  const size_t out_elems = static_cast<size_t>(bf16_act_elems(M, N));
  ThreadPool one(1), two(2);
  // the unfused reference: y, GELU per row, rounding
  std::vector<float> y(static_cast<size_t>(M * N));
  gemm_bf16_rounded(P.matrix, xb.data(), M, y.data(), N, one, bias.data());
  std::vector<uint16_t> want(out_elems, 0);
  for (int64_t t = 0; t < M; ++t) {
    gelu_tanh(y.data() + t * N, N);
    round_row_bf16(y.data() + t * N, t, N, want.data());
  }
  for (ThreadPool* pool : {&one, &two}) {
    std::vector<uint16_t> got(out_elems, 0);
    std::vector<float> untouched(static_cast<size_t>(M * N), -7.0f);
    gemm_bf16_rounded(P.matrix, xb.data(), M, untouched.data(), N, *pool, bias.data(), got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), out_elems * 2), 0) << pool->size() << " threads";
    EXPECT_EQ(untouched[0], -7.0f);  // y is not written
  }
  // the twin's epilogue against the twin's y (the same numerics wherever it runs)
  std::vector<float> yt(static_cast<size_t>(M * N));
  ref::gemm_bf16_rows(P.matrix, 0, N, xb.data(), M, bf16_padded_k(K), yt.data(), N, bias.data());
  std::vector<uint16_t> want_t(out_elems, 0), got_t(out_elems, 0);
  for (int64_t t = 0; t < M; ++t) {
    gelu_tanh(yt.data() + t * N, N);
    round_rows_bf16(yt.data() + t * N, t, t + 1, 0, N, want_t.data(), bf16_padded_k(N));
  }
  ref::gemm_bf16_rows(P.matrix, 0, 32, xb.data(), M, bf16_padded_k(K), nullptr, 0, bias.data(), got_t.data());
  ref::gemm_bf16_rows(P.matrix, 32, N, xb.data(), M, bf16_padded_k(K), nullptr, 0, bias.data(), got_t.data());
  EXPECT_EQ(std::memcmp(got_t.data(), want_t.data(), out_elems * 2), 0);
}

// A bias starts the sums (the accumulator tiles are loaded with it): within the bound of a float64
// bias + sum over the same rounded inputs, the twin too, the same bits at 1, 2 and 3 threads, and
// the last, partial row group (70 rows) reads no bias past the matrix.
TEST(Bf16Gemm, BiasStartsTheSums) {
  const int64_t M = 45, K = 200, N = 70, kp = bf16_padded_k(K);
  const test::RandomMatrix W = make_matrix(DType::F32, N, K, 21);
  const PackedWeights P = pack_bf16_tiles(W.w);
  const std::vector<float> x = random_x(M, K, 22);
  std::vector<float> bias(static_cast<size_t>(N));
  for (int64_t r = 0; r < N; ++r) bias[static_cast<size_t>(r)] = 0.25f * static_cast<float>(r % 9) - 1.0f;
  std::vector<uint16_t> xb(static_cast<size_t>(bf16_act_elems(M, K)), 0);
  round_rows_bf16(x.data(), 0, M, K, K, xb.data(), kp);
  std::vector<float> twin(static_cast<size_t>(M * N)), y1(twin.size(), -1.0f);
  ref::gemm_bf16_rows(P.matrix, 0, N, xb.data(), M, kp, twin.data(), N, bias.data());
  ThreadPool one(1), two(2), three(3);
  gemm_bf16(P.matrix, x.data(), M, K, y1.data(), N, one, bias.data());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t r = 0; r < N; ++r) {
      double want = bias[static_cast<size_t>(r)], mag = std::fabs(want);
      for (int64_t k = 0; k < K; ++k) {
        const double p = bf16_to_float(float_to_bf16(static_cast<float>(W.exact[static_cast<size_t>(r * K + k)]))) *
                         static_cast<double>(bf16_to_float(xb[static_cast<size_t>(bf16_act_index(i, k, kp))]));
        want += p;
        mag += std::fabs(p);
      }
      const double bound = static_cast<double>(K + 1) * 0x1p-24 * mag;
      ASSERT_NEAR(twin[static_cast<size_t>(i * N + r)], want, bound) << i << " " << r;
      ASSERT_NEAR(y1[static_cast<size_t>(i * N + r)], want, bound) << i << " " << r;
    }
  if (!bf16_gemm_available() || vdp_is_the_twin()) {
    EXPECT_EQ(std::memcmp(y1.data(), twin.data(), y1.size() * 4), 0);
  }
  for (ThreadPool* pool : {&two, &three}) {
    std::vector<float> y(y1.size(), -1.0f);
    gemm_bf16_rounded(P.matrix, xb.data(), M, y.data(), N, *pool, bias.data());
    EXPECT_EQ(std::memcmp(y.data(), y1.data(), y.size() * 4), 0) << pool->size();
  }
}

// Activations rounded by their producer, one token at a time (round_row_bf16, padding tokens
// zeroed): the same bytes as round_rows_bf16 (both dispatch levels), and gemm_bf16_rounded on them
// the same bits as gemm_bf16 on the floats, at an odd token count and K off the tile size.
TEST(Bf16Gemm, PreRoundedActivationsGiveTheSameBits) {
  const int64_t M = 37, K = 83, N = 70, kp = bf16_padded_k(K);
  const test::RandomMatrix W = make_matrix(DType::F32, N, K, 12);
  const PackedWeights P = pack_bf16_tiles(W.w);
  const std::vector<float> x = random_x(M, K, 13);
  ASSERT_EQ(bf16_act_elems(M, K), 64 * kp);
  std::vector<uint16_t> want(static_cast<size_t>(bf16_act_elems(M, K)), 0), got(want.size(), 7);
  round_rows_bf16(x.data(), 0, M, K, K, want.data(), kp);
  for (int64_t t = M - 1; t >= 0; --t) round_row_bf16(x.data() + t * K, t, K, got.data());
  zero_pad_tokens_bf16(got.data(), M, K);
  EXPECT_EQ(want, got);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<float> a(static_cast<size_t>(M * N)), b(a.size(), -1.0f);
    gemm_bf16(P.matrix, x.data(), M, K, a.data(), N, pool);
    gemm_bf16_rounded(P.matrix, got.data(), M, b.data(), N, pool);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << threads;
  }
}

}  // namespace
}  // namespace tessera
