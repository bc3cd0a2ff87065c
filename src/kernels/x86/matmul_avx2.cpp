// AVX2+FMA kernels (machines without AVX-512, and the `--isa avx2` cap). Written over V16
// (two ymm registers per 16-lane vector), so each output follows ref/'s evaluation order and
// the results are bitwise those of the AVX-512 and scalar kernels. Smaller register blocks
// than the AVX-512 versions: 16 ymm registers instead of 32 zmm.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/x86/deq_x86.h"

namespace tessera::avx2 {

namespace {

using namespace tessera::x86;

// Dequantizes a whole row into fp32 (zero-padded to a multiple of 16).
template <DType T>
void deq_row(const uint8_t* row, int64_t K, float* out) {
  if constexpr (is_block32(T)) {
    for (int64_t b = 0; b < K / 32; ++b) {
      V16 w0, w1;
      deq32<T>(row, b, w0, w1);
      store16(out + 32 * b, w0);
      store16(out + 32 * b + 16, w1);
    }
  } else {
    for (int64_t c = 0; c < K / 16; ++c) store16(out + 16 * c, deq16<T>(row, c));
    if (K % 16) store16(out + K / 16 * 16, deq_tail(T, row, K / 16, static_cast<int>(K % 16)));
  }
}

// Decode: R rows against one token, weights dequantized on the fly (R weight streams).
template <DType T, int R>
void rows_x1(const WeightMatrix& w, int64_t r, const float* x, float* y) {
  const int64_t K = w.cols, full = K / 16;
  const int rem = static_cast<int>(K % 16);
  V16 acc[R];
  const uint8_t* rows[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = zero16();
    rows[i] = w.data + (r + i) * w.row_stride;
  }
  if constexpr (is_block32(T)) {
    for (int64_t b = 0; b < K / 32; ++b) {
      const V16 x0 = load16(x + 32 * b), x1 = load16(x + 32 * b + 16);
      for (int i = 0; i < R; ++i) {
        V16 w0, w1;
        deq32<T>(rows[i], b, w0, w1);
        acc[i] = fma16(w0, x0, acc[i]);
        acc[i] = fma16(w1, x1, acc[i]);
      }
    }
  } else {
    for (int64_t c = 0; c < full; ++c) {
      const V16 xv = load16(x + 16 * c);
      for (int i = 0; i < R; ++i) acc[i] = fma16(deq16<T>(rows[i], c), xv, acc[i]);
    }
    if (rem) {  // lanes >= rem keep their accumulator, as the masked AVX-512 FMA
      const V16 xv = load16_n(x + 16 * full, rem);
      for (int i = 0; i < R; ++i) acc[i] = blend16(fma16(deq_tail(w.type, rows[i], full, rem), xv, acc[i]), acc[i], rem);
    }
  }
  for (int i = 0; i < R; ++i) y[r + i] = reduce16(acc[i]);
}

template <DType T>
void matmul_rows_t(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
                   int64_t ys) {
  if (m == 1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) rows_x1<T, 4>(w, r, x, y);
    for (; r < r1; ++r) rows_x1<T, 1>(w, r, x, y);
    return;
  }
  // Prefill: one dequantized row against 4 tokens at a time.
  const int64_t K = w.cols, full = K / 16;
  const int rem = static_cast<int>(K % 16);
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>((K + 15) / 16 * 16));
  for (int64_t r = r0; r < r1; ++r) {
    deq_row<T>(w.data + r * w.row_stride, K, row.data());
    for (int64_t t0 = 0; t0 < m; t0 += 4) {
      const int nt = static_cast<int>(std::min<int64_t>(4, m - t0));
      V16 acc[4] = {zero16(), zero16(), zero16(), zero16()};
      for (int64_t c = 0; c < full; ++c) {
        const V16 wv = load16(row.data() + 16 * c);
        for (int j = 0; j < nt; ++j) acc[j] = fma16(wv, load16(x + (t0 + j) * xs + 16 * c), acc[j]);
      }
      if (rem) {
        const V16 wv = load16(row.data() + 16 * full);
        for (int j = 0; j < nt; ++j)  // lanes >= rem keep their accumulator
          acc[j] = blend16(fma16(wv, load16_n(x + (t0 + j) * xs + 16 * full, rem), acc[j]), acc[j], rem);
      }
      for (int j = 0; j < nt; ++j) y[(t0 + j) * ys + r] = reduce16(acc[j]);
    }
  }
}

// GEMM: a panel of 16 rows packed k-major against MT tokens; each output is one FMA chain
// over k, as ref::gemm_rows.
template <int MT>
void gemm_kernel(const float* wp, const float* x, int64_t xs, int64_t K, float* y, int64_t ys, int np) {
  V16 acc[MT];
  for (int i = 0; i < MT; ++i) acc[i] = zero16();
  for (int64_t k = 0; k < K; ++k) {
    const V16 wv = load16(wp + 16 * k);
    for (int i = 0; i < MT; ++i) acc[i] = fma16(set16(x[i * xs + k]), wv, acc[i]);
  }
  for (int i = 0; i < MT; ++i) store16_n(y + i * ys, acc[i], np);
}

template <DType T>
void gemm_rows_t(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
                 int64_t ys) {
  const int64_t K = w.cols;
  thread_local std::vector<float> row, wp;
  row.resize(static_cast<size_t>((K + 15) / 16 * 16));
  wp.resize(static_cast<size_t>(16 * K));
  constexpr int64_t kTokens = 6;
  for (int64_t p0 = r0; p0 < r1; p0 += 16) {
    const int np = static_cast<int>(std::min<int64_t>(16, r1 - p0));
    for (int i = 0; i < 16; ++i) {
      if (i < np) deq_row<T>(w.data + (p0 + i) * w.row_stride, K, row.data());
      for (int64_t k = 0; k < K; ++k) wp[static_cast<size_t>(k * 16 + i)] = i < np ? row[static_cast<size_t>(k)] : 0.0f;
    }
    for (int64_t t0 = 0; t0 < m; t0 += kTokens) {
      const float* xt = x + t0 * xs;
      float* yt = y + t0 * ys + p0;
      switch (std::min<int64_t>(kTokens, m - t0)) {
        case 6: gemm_kernel<6>(wp.data(), xt, xs, K, yt, ys, np); break;
        case 5: gemm_kernel<5>(wp.data(), xt, xs, K, yt, ys, np); break;
        case 4: gemm_kernel<4>(wp.data(), xt, xs, K, yt, ys, np); break;
        case 3: gemm_kernel<3>(wp.data(), xt, xs, K, yt, ys, np); break;
        case 2: gemm_kernel<2>(wp.data(), xt, xs, K, yt, ys, np); break;
        default: gemm_kernel<1>(wp.data(), xt, xs, K, yt, ys, np); break;
      }
    }
  }
}

}  // namespace

void matmul_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
                 int64_t ys) {
  if (!with_weight_type(w.type, [&](auto T) { matmul_rows_t<decltype(T)::value>(w, r0, r1, x, m, xs, y, ys); }))
    ref::matmul_rows(w, r0, r1, x, m, xs, y, ys);
}

void gemm_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
               int64_t ys) {
  if (!with_weight_type(w.type, [&](auto T) { gemm_rows_t<decltype(T)::value>(w, r0, r1, x, m, xs, y, ys); }))
    ref::gemm_rows(w, r0, r1, x, m, xs, y, ys);
}

// The 8-bit-activation matmul has no AVX2 version yet: the scalar twin (bitwise the same).
void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m, int64_t xq_stride,
                    float* y, int64_t ys) {
  ref::matmul_q8_rows(w, r0, r1, xq, m, xq_stride, y, ys);
}

void softmax_row(float* x, int64_t n, float scale) { ref::softmax_row(x, n, scale); }
void gelu_tanh(float* x, int64_t n) { ref::gelu_tanh(x, n); }

}  // namespace tessera::avx2
