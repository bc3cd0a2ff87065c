// Peak loops for the probe on AVX2 + FMA (every x86 level this project runs on; the only vector
// level of AMD Zen 3 and most laptops): compiled with -mavx2 -mfma, called only when the CPU has them.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace tessera::probe_avx2 {

// 12 independent FMA chains (two FMA pipes × latency 4-5 cycles needs at least 10); returns FLOPs.
double fma_loop(int64_t iters) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(1.0f + i * 1e-7f);
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  volatile float sink = out[0];
  (void)sink;
  return static_cast<double>(iters) * 12 * 8 * 2;
}

// The int8 dot product as AVX2 has it (what the 8-bit-activation kernels run): vpmaddubsw (32
// u8×s8 products summed in pairs), vpmaddwd by ones (pairs to int32), vpaddd into 12 independent
// accumulators. An operand passes through an empty asm before each multiply so the compiler can
// neither hoist the loop-invariant multiplies nor share one between chains (it did both: the loop
// then timed the adds alone). Returns int8 ops (32
// multiplies + 32 adds per vpmaddubsw).
double int8_dot_loop(int64_t iters) {
  __m256i a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_epi32(i);
  __m256i b = _mm256_set1_epi8(3);
  const __m256i c = _mm256_set1_epi8(-2);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) {
      asm volatile("" : "+x"(b));  // a "new" b each time: no hoisting, no sharing between chains
      a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(_mm256_maddubs_epi16(b, c), ones));
    }
  __m256i s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_epi32(s, a[i]);
  volatile int sink = _mm256_extract_epi32(s, 0);
  (void)sink;
  return static_cast<double>(iters) * 12 * 32 * 2;
}

// Sums a buffer with 8 independent streams of 256-bit loads (two per 64-byte line); returns bytes read.
double read_loop(const float* p, size_t n_floats, int passes) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  const size_t per = n_floats / 8 / 16 * 16;
  for (int r = 0; r < passes; ++r)
    for (size_t i = 0; i < per; i += 16)
      for (int s = 0; s < 8; ++s) {
        acc[s] = _mm256_add_ps(acc[s], _mm256_load_ps(p + s * per + i));
        acc[s] = _mm256_add_ps(acc[s], _mm256_load_ps(p + s * per + i + 8));
      }
  __m256 t = acc[0];
  for (int s = 1; s < 8; ++s) t = _mm256_add_ps(t, acc[s]);
  alignas(32) float out[8];
  _mm256_store_ps(out, t);
  volatile float sink = out[0];
  (void)sink;
  return static_cast<double>(per) * 8 * 4 * passes;
}

}  // namespace tessera::probe_avx2
