// The fp16 GEMM (kernels/f16_tiles.h): its one-lane twin (ref::fma_f16) against the hardware
// instruction's rules on hand-picked cases, the scalar twin within the bound of fp16 chunk sums
// of a float64 sum, the AVX512-FP16 kernel the twin bit for bit, the same bits whatever the batch,
// row range or thread count, and its error against the unrounded inputs below the bf16 GEMM's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernel_cases.h"
#include "kernels/bf16_tiles.h"
#include "kernels/f16_tiles.h"
#include "kernels/kernel_table.h"

namespace tessera {
namespace {

using test::make_matrix;
using test::random_x;

uint16_t h(float f) { return float_to_fp16(f); }

TEST(F16Gemm, FusedMultiplyAddRoundsOnceToNearestEven) {
  EXPECT_EQ(ref::fma_f16(h(1.0f), h(2.0f), h(3.0f)), h(7.0f));
  // 2048 + 1 is a tie between 2048 and 2050: to even (2048); 2048 + 3 = 2051 ties to 2052
  EXPECT_EQ(ref::fma_f16(h(2048.0f), h(1.0f), h(1.0f)), h(2048.0f));
  EXPECT_EQ(ref::fma_f16(h(2048.0f), h(3.0f), h(1.0f)), h(2052.0f));
  // one rounding: (1 + 2^-10) + (1 + 2^-7)(2^-11 - 2^-18) = 1 + 2^-10 + 2^-11 - 2^-25, just below
  // the tie at 1 + 2^-10 + 2^-11; the product rounded first (to 2^-11) would land on the tie and
  // round up to the even 1 + 2^-9
  EXPECT_EQ(ref::fma_f16(h(1.0f + 0x1p-10f), h(1.0f + 0x1p-7f), h(0x1p-11f - 0x1p-18f)), h(1.0f + 0x1p-10f));
  // subnormals are kept (no flush): 2^-24 + 2^-24 · 1
  EXPECT_EQ(ref::fma_f16(h(0x1p-24f), h(0x1p-24f * 1024), h(0x1p-10f)), h(0x1p-23f));
  // overflow: past 65504 (at the midpoint 65520 and beyond) to inf, with the sign
  EXPECT_EQ(ref::fma_f16(h(65504.0f), h(16.0f), h(1.0f)), 0x7c00);  // 65520: the tie rounds to inf
  EXPECT_EQ(ref::fma_f16(h(-65504.0f), h(-16.0f), h(1.0f)), 0xfc00);
  EXPECT_EQ(ref::fma_f16(h(65504.0f), h(8.0f), h(1.0f)), h(65504.0f));  // 65512 rounds down
  // zeros: exact cancellation is +0, -0 + -0 is -0
  EXPECT_EQ(ref::fma_f16(h(-1.0f), h(1.0f), h(1.0f)), 0);
  EXPECT_EQ(ref::fma_f16(0x8000, 0x8000, h(1.0f)), 0x8000);
}

// The weights, as pack_f16_tiles rounds them, and the activations of token i.
double w16(const test::RandomMatrix& W, int64_t r, int64_t k, int64_t K) {
  return fp16_to_float(float_to_fp16(static_cast<float>(W.exact[static_cast<size_t>(r * K + k)])));
}

TEST(F16Gemm, TwinWithinChunkBoundsKernelIsTheTwinAndInvariant) {
  ThreadPool one(1), two(2), three(3);
  if (!f16_gemm_available()) std::printf("note: no AVX512-FP16 here: the scalar twin only\n");
  for (DType t : {DType::F32, DType::F16}) {
    for (int64_t K : {16, 37, 64, 96, 200, 576}) {
      for (int64_t N : {1, 16, 17, 33, 64}) {
        const test::RandomMatrix W = make_matrix(t, N, K, static_cast<uint32_t>(K * 7 + N));
        const PackedWeights P = pack_f16_tiles(W.w);
        ASSERT_NE(P.matrix.f16_tiles, nullptr);
        ASSERT_EQ(P.matrix.bf16_tiles, nullptr);
        const std::vector<float> bias = random_x(1, N, static_cast<uint32_t>(N));
        for (int64_t M : {1, 5, 31, 33, 70}) {
          const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M * 5 + K));
          const int64_t kp = bf16_padded_k(K);
          std::vector<uint16_t> xh(static_cast<size_t>(bf16_act_elems(M, K)), 0);
          round_rows_f16(x.data(), 0, M, K, K, xh.data(), kp);
          for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
            std::vector<float> y_ref(static_cast<size_t>(M * N));
            ref::gemm_f16_rows(P.matrix, 0, N, xh.data(), M, kp, y_ref.data(), N, b);
            for (int64_t i = 0; i < M; ++i)
              for (int64_t r = 0; r < N; ++r) {
                double rounded = b ? b[r] : 0.0, mag = b ? std::fabs(b[r]) : 0.0;
                for (int64_t k = 0; k < K; ++k) {
                  const double p = w16(W, r, k, K) * fp16_to_float(xh[static_cast<size_t>(bf16_act_index(i, k, kp))]);
                  rounded += p;
                  mag += std::fabs(p);
                }
                // each fp16 add rounds by at most 2^-11 of its chunk's magnitude (kF16ChunkK / 2 of
                // them per chunk), each fp32 add by 2^-24 of the whole
                const double bound = (kF16ChunkK / 2) * 0x1p-11 * mag + (static_cast<double>(K) / 16 + 2) * 0x1p-24 * mag;
                ASSERT_NEAR(y_ref[static_cast<size_t>(i * N + r)], rounded, bound + 1e-30) << "K=" << K << " N=" << N;
              }
            // the dispatcher: the twin bit for bit (AVX512-FP16 or the twin itself), and the same
            // bits at 1, 2, 3 threads and for the last token alone
            std::vector<float> y1(y_ref.size(), -1.0f);
            gemm_f16(P.matrix, x.data(), M, K, y1.data(), N, one, b);
            ASSERT_EQ(std::memcmp(y1.data(), y_ref.data(), y1.size() * 4), 0)
                << isa_name(active_isa()) << " " << dtype_name(t) << " K=" << K << " N=" << N << " M=" << M;
            for (ThreadPool* pool : {&two, &three}) {
              std::vector<float> y(y_ref.size(), -1.0f);
              gemm_f16(P.matrix, x.data(), M, K, y.data(), N, *pool, b);
              ASSERT_EQ(std::memcmp(y.data(), y1.data(), y.size() * 4), 0) << "threads=" << pool->size();
            }
            std::vector<float> single(static_cast<size_t>(N));
            gemm_f16(P.matrix, x.data() + (M - 1) * K, 1, K, single.data(), N, one, b);
            ASSERT_EQ(std::memcmp(single.data(), y1.data() + (M - 1) * N, static_cast<size_t>(N) * 4), 0);
          }
        }
      }
    }
  }
}

// Large sums (an encoder's widest k), tiny values (subnormal products) and every lane pattern:
// the kernel is still the twin, and both scalar and SIMD tables of this CPU agree.
TEST(F16Gemm, KernelIsTheTwinOnWideAndTinyInputs) {
  ThreadPool two(2);
  const int64_t N = 96, K = 3072, M = 37;
  for (float scale : {1.0f, 1e-3f, 30.0f}) {
    const test::RandomMatrix W = make_matrix(DType::F16, N, K, 11);
    const PackedWeights P = pack_f16_tiles(W.w);
    std::vector<float> x = random_x(M, K, 12);
    for (float& v : x) v *= scale;
    std::vector<uint16_t> xh(static_cast<size_t>(bf16_act_elems(M, K)), 0);
    const int64_t kp = bf16_padded_k(K);
    round_rows_f16(x.data(), 0, M, K, K, xh.data(), kp);
    std::vector<float> y_ref(static_cast<size_t>(M * N)), y(y_ref.size());
    ref::gemm_f16_rows(P.matrix, 0, N, xh.data(), M, kp, y_ref.data(), N, nullptr);
    gemm_f16(P.matrix, x.data(), M, K, y.data(), N, two);
    ASSERT_EQ(std::memcmp(y.data(), y_ref.data(), y.size() * 4), 0) << "scale " << scale;
  }
}

// The point of the chunks: against float64 of the unrounded inputs, the fp16 GEMM's error is
// below the bf16 GEMM's (whose inputs lose 3 more bits), on an encoder-sized sum.
TEST(F16Gemm, ErrorBelowTheBf16Gemm) {
  ThreadPool two(2);
  const int64_t N = 64, K = 768, M = 32;
  const test::RandomMatrix W = make_matrix(DType::F32, N, K, 21);
  const std::vector<float> x = random_x(M, K, 22);
  const PackedWeights F = pack_f16_tiles(W.w), B = pack_bf16_tiles(W.w);
  std::vector<float> yf(static_cast<size_t>(M * N)), yb(yf.size());
  gemm_f16(F.matrix, x.data(), M, K, yf.data(), N, two);
  gemm_bf16(B.matrix, x.data(), M, K, yb.data(), N, two);
  double ef = 0, eb = 0, ss = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t r = 0; r < N; ++r) {
      double exact = 0;
      for (int64_t k = 0; k < K; ++k) exact += W.exact[static_cast<size_t>(r * K + k)] * x[static_cast<size_t>(i * K + k)];
      ef += std::pow(yf[static_cast<size_t>(i * N + r)] - exact, 2);
      eb += std::pow(yb[static_cast<size_t>(i * N + r)] - exact, 2);
      ss += exact * exact;
    }
  const double rel_f = std::sqrt(ef / ss), rel_b = std::sqrt(eb / ss);
  std::printf("relative rms error over %lldx%lldx%lld: fp16 %.2e, bf16 %.2e\n", static_cast<long long>(M),
              static_cast<long long>(N), static_cast<long long>(K), rel_f, rel_b);
  EXPECT_LT(rel_f, 0.75 * rel_b);  // measured: 1.22e-3 against 2.18e-3
}

}  // namespace
}  // namespace tessera
