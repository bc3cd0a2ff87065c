// 8-bit-activation matmul (ggml's W4A8/W8A8 numerics) with AVX-512VL/BW: weights of 4 rows are
// unpacked once into int8 blocks, then each token's blocks are dotted with maddubs/madd into 8
// int32 lanes per block and scaled into 8 float lanes, exactly as ref/matmul_q8_ref.cpp does.
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/x86/x86_common.h"

namespace tessera::avx512 {

namespace {

inline float hsum8(__m256 x) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// Unpacked weights of one row: 32 int8 per block plus the block scale and min.
struct RowBuf {
  std::vector<int8_t> q;
  std::vector<float> d, m;
  void resize(int64_t nb) {
    q.resize(static_cast<size_t>(nb) * 32);
    d.resize(static_cast<size_t>(nb));
    m.resize(static_cast<size_t>(nb));
  }
};

template <DType T>
void unpack_row(const uint8_t* row, int64_t nb, RowBuf& rb) {
  for (int64_t b = 0; b < nb; ++b) {
    int8_t* dst = rb.q.data() + 32 * b;
    if constexpr (T == DType::Q8_0) {
      const uint8_t* p = row + 34 * b;
      rb.d[b] = half_at(p);
      rb.m[b] = 0;
      std::memcpy(dst, p + 2, 32);
    } else {
      constexpr bool q41 = T == DType::Q4_1;
      const uint8_t* p = row + (q41 ? 20 : 18) * b;
      rb.d[b] = half_at(p);
      rb.m[b] = q41 ? half_at(p + 2) : 0.0f;
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + (q41 ? 4 : 2)));
      const __m128i lo_mask = _mm_set1_epi8(0x0f);
      __m128i lo = _mm_and_si128(packed, lo_mask);
      __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), lo_mask);
      if constexpr (!q41) {
        lo = _mm_sub_epi8(lo, _mm_set1_epi8(8));
        hi = _mm_sub_epi8(hi, _mm_set1_epi8(8));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), lo);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16), hi);
    }
  }
}

// 8 int32 lanes, lane j = sum of products of bytes 4j..4j+3.
template <DType T>
inline __m256i block_dot(__m256i w, __m256i x) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (T == DType::Q4_1) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones);  // w in 0..15: unsigned
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)), ones);
  }
}

template <DType T, int R>
void rows_dot(const RowBuf* rb, int64_t nb, const BlockQ8_1* xb, float* y, int64_t row_step) {
  __m256 acc[R];
  float summs[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = _mm256_setzero_ps();
    summs[i] = 0;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].q));
    const float dx = _cvtsh_ss(xb[b].d);
    const float sx = T == DType::Q4_1 ? _cvtsh_ss(xb[b].s) : 0.0f;
    for (int i = 0; i < R; ++i) {
      if constexpr (T == DType::Q4_1) summs[i] += rb[i].m[b] * sx;
      const __m256 dd = _mm256_set1_ps(rb[i].d[b] * dx);
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb[i].q.data() + 32 * b));
      acc[i] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(block_dot<T>(wv, xv)), acc[i]);
    }
  }
  for (int i = 0; i < R; ++i) y[i * row_step] = hsum8(acc[i]) + summs[i];
}

template <DType T>
void q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
             int64_t xq_stride, float* y, int64_t ys) {
  const int64_t nb = w.cols / 32;
  thread_local RowBuf rb[4];
  for (auto& b : rb) b.resize(nb);
  for (int64_t r = r0; r < r1; r += 4) {
    const int nr = static_cast<int>(std::min<int64_t>(4, r1 - r));
    for (int i = 0; i < nr; ++i) unpack_row<T>(w.data + (r + i) * w.row_stride, nb, rb[i]);
    for (int64_t t = 0; t < m; ++t) {
      float* yt = y + t * ys + r;
      const BlockQ8_1* xb = xq + t * xq_stride;
      if (nr == 4) {
        rows_dot<T, 4>(rb, nb, xb, yt, 1);
      } else {
        for (int i = 0; i < nr; ++i) rows_dot<T, 1>(rb + i, nb, xb, yt + i, 1);
      }
    }
  }
}

}  // namespace

// ref::quantize_row_q8_1 sixteen lanes at a time: the same max, the same divisions, products
// rounded half to even by vcvtps2dq (MXCSR's default mode, as nearbyint), exact integer sums.
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
    // max(|x|, acc) keeps acc where |x| is NaN, as std::fmax does
    const __m512 am = _mm512_max_ps(_mm512_abs_ps(v1), _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps()));
    const float amax = _mm512_reduce_max_ps(am);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m512 idv = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, idv)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, idv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].q), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].q + 16), _mm512_cvtepi32_epi8(q1));
    const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    y[b].s = _cvtss_sh(d * static_cast<float>(sum), _MM_FROUND_TO_NEAREST_INT);
  }
}

void matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                    int64_t xq_stride, float* y, int64_t ys) {
  if (active_isa() >= Isa::Avx512Vnni && matmul_q8_rows_vnni(w, r0, r1, xq, m, xq_stride, y, ys)) return;
  switch (w.type) {
    case DType::Q4_0: return q8_rows<DType::Q4_0>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::Q4_1: return q8_rows<DType::Q4_1>(w, r0, r1, xq, m, xq_stride, y, ys);
    case DType::Q8_0: return q8_rows<DType::Q8_0>(w, r0, r1, xq, m, xq_stride, y, ys);
    default: return ref::matmul_q8_rows(w, r0, r1, xq, m, xq_stride, y, ys);
  }
}

}  // namespace tessera::avx512
