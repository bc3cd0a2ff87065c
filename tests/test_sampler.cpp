#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "runtime/sampler.h"

using namespace tessera;

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s(SamplerOptions{});
  std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.sample(l.data(), 4), 1);
}

// The two-pass greedy argmax against the plain `>` scan it replaced: ties (the first wins), NaNs
// anywhere (never chosen; a NaN first logit keeps token 0), signed zeros, lengths around the
// 8-wide unroll.
TEST(Sampler, GreedyMatchesAScanWithTiesNansAndTails) {
  std::mt19937 rng(5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<float> l(static_cast<size_t>(n));
    for (float& v : l) {
      const uint32_t r = rng() % 10;
      v = r == 0 ? nan : r == 1 ? 0.0f : r == 2 ? -0.0f : static_cast<float>(static_cast<int>(rng() % 7) - 3);
    }
    int32_t want = 0;
    float best = l[0];
    for (int i = 1; i < n; ++i)
      if (l[static_cast<size_t>(i)] > best) best = l[static_cast<size_t>(i)], want = i;
    Sampler s(SamplerOptions{});
    ASSERT_EQ(s.sample(l.data(), n), want) << "trial " << trial;
  }
}

TEST(Sampler, SeededSamplingIsReproducibleAndSeedsDiffer) {
  std::vector<float> l(100);
  for (int i = 0; i < 100; ++i) l[static_cast<size_t>(i)] = static_cast<float>(i % 7) * 0.3f;
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  auto draw = [&](uint64_t seed) {
    o.seed = seed;
    Sampler s(o);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(l.data(), 100));
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
}

TEST(Sampler, TopKOneIsGreedy) {
  std::vector<float> l = {0.0f, 1.0f, 5.0f, 2.0f};
  SamplerOptions o;
  o.temperature = 2.0f;
  o.top_k = 1;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    o.seed = seed;
    Sampler s(o);
    EXPECT_EQ(s.sample(l.data(), 4), 2);
  }
}

TEST(Sampler, MinPAndTopPFilterUnlikelyTokens) {
  // token 0 has p ~ 0.999; min-p 0.05 must never let the others through
  std::vector<float> l = {10.0f, 0.0f, 0.0f, 0.0f};
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.05f;
  Sampler s(o);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(s.sample(l.data(), 4), 0);
  o.min_p = 0.0f;
  o.top_p = 0.5f;
  Sampler s2(o);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(s2.sample(l.data(), 4), 0);
}

TEST(Sampler, RepetitionPenaltyDemotesRecentTokens) {
  SamplerOptions o;
  o.repeat_penalty = 2.0f;
  Sampler s(o);
  std::vector<float> l = {1.0f, 0.9f};
  s.accept(0);
  EXPECT_EQ(s.sample(l.data(), 2), 1);  // 1.0 / 2 < 0.9
}

TEST(Sampler, RejectsBadOptions) {
  SamplerOptions o;
  o.top_p = 0.0f;
  EXPECT_THROW(Sampler{o}, Error);
  o = SamplerOptions{};
  o.temperature = -1.0f;
  EXPECT_THROW(Sampler{o}, Error);
}
