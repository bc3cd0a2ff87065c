// Peak loops for the probe on AArch64 (Apple Silicon's CPU, other ARMv8 cores): fp32 FMA and
// reads in plain NEON; the int8 dot products (SDOT, SMMLA) in probe_neon_dot.cpp, built with
// the extensions and called only where the CPU reports them.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

namespace tessera::probe_neon {

// 16 independent FMA chains (four FMA pipes × latency 3-4 on current cores); returns FLOPs.
double fma_loop(int64_t iters) {
  float32x4_t a[16];
  for (int i = 0; i < 16; ++i) a[i] = vdupq_n_f32(1.0f + i * 1e-7f);
  const float32x4_t b = vdupq_n_f32(0.999999f), c = vdupq_n_f32(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) a[i] = vfmaq_f32(c, a[i], b);
  float32x4_t s = a[0];
  for (int i = 1; i < 16; ++i) s = vaddq_f32(s, a[i]);
  volatile float sink = vaddvq_f32(s);
  (void)sink;
  return static_cast<double>(iters) * 16 * 4 * 2;
}

// 8 independent streams of 128-bit loads, four per 64-byte line; returns bytes read.
double read_loop(const float* p, size_t n_floats, int passes) {
  float32x4_t acc[8];
  for (auto& a : acc) a = vdupq_n_f32(0);
  const size_t per = n_floats / 8 / 16 * 16;
  for (int r = 0; r < passes; ++r)
    for (size_t i = 0; i < per; i += 16)
      for (int s = 0; s < 8; ++s)
        for (int k = 0; k < 16; k += 4) acc[s] = vaddq_f32(acc[s], vld1q_f32(p + s * per + i + k));
  float32x4_t t = acc[0];
  for (int s = 1; s < 8; ++s) t = vaddq_f32(t, acc[s]);
  volatile float sink = vaddvq_f32(t);
  (void)sink;
  return static_cast<double>(per) * 8 * 4 * passes;
}

}  // namespace tessera::probe_neon
