// The probe's int8 loops on AArch64: SDOT (ARMv8.2 dotprod: 4 int8 products summed into each of
// 4 int32 lanes) and SMMLA (ARMv8.6 i8mm: a 2×8 by 8×2 int8 block into a 2×2 int32 block), 16
// independent chains each. Built with +dotprod+i8mm; each is called only where the CPU reports it.
#include <arm_neon.h>

#include <cstdint>

namespace tessera::probe_neon {

double sdot_loop(int64_t iters) {
  int32x4_t a[16];
  for (int i = 0; i < 16; ++i) a[i] = vdupq_n_s32(i);
  const int8x16_t b = vdupq_n_s8(3), c = vdupq_n_s8(-2);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) a[i] = vdotq_s32(a[i], b, c);
  int32x4_t s = a[0];
  for (int i = 1; i < 16; ++i) s = vaddq_s32(s, a[i]);
  volatile int sink = vaddvq_s32(s);
  (void)sink;
  return static_cast<double>(iters) * 16 * 16 * 2;
}

double smmla_loop(int64_t iters) {
  int32x4_t a[16];
  for (int i = 0; i < 16; ++i) a[i] = vdupq_n_s32(i);
  const int8x16_t b = vdupq_n_s8(3), c = vdupq_n_s8(-2);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) a[i] = vmmlaq_s32(a[i], b, c);
  int32x4_t s = a[0];
  for (int i = 1; i < 16; ++i) s = vaddq_s32(s, a[i]);
  volatile int sink = vaddvq_s32(s);
  (void)sink;
  return static_cast<double>(iters) * 16 * 32 * 2;  // 2×2 outputs × 8 products, multiply + add
}

}  // namespace tessera::probe_neon
