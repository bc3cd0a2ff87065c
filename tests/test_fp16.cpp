#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <random>

#include "core/cpu.h"
#include "core/fp16.h"

using namespace tessera;

// The scalar conversions must agree bit for bit with the F16C hardware the kernels use.
__attribute__((target("f16c"))) static uint16_t hw_to_half(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) static float hw_to_float(uint16_t h) { return _cvtsh_ss(h); }

TEST(Fp16, HalfToFloatMatchesF16cForAllHalves) {
  if (!cpu_features().f16c) GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = fp16_to_float(static_cast<uint16_t>(h)), b = hw_to_float(static_cast<uint16_t>(h));
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(a)) << h;
    } else {
      EXPECT_EQ(float_to_bits(a), float_to_bits(b)) << h;
    }
  }
}

TEST(Fp16, FloatToHalfMatchesF16c) {
  if (!cpu_features().f16c) GTEST_SKIP() << "no F16C on this CPU";
  std::mt19937 rng(1);
  for (int i = 0; i < 2000000; ++i) {
    const float f = bits_to_float(rng());
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_fp16(f), hw_to_half(f)) << f;
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 5.96e-8f, 6.1e-5f, INFINITY, -INFINITY})
    EXPECT_EQ(float_to_fp16(f), hw_to_half(f)) << f;
  // every half-way point between adjacent halves (ties to even)
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const float mid = (fp16_to_float(static_cast<uint16_t>(h)) + fp16_to_float(static_cast<uint16_t>(h + 1))) / 2;
    ASSERT_EQ(float_to_fp16(mid), hw_to_half(mid)) << h;
  }
}

TEST(Bf16, RoundTrip) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(float_to_bf16(1.00390625f), float_to_bf16(1.0f));  // tie rounds to even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}
