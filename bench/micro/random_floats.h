// Seeded uniform [-1, 1) floats for the microbenchmarks' weights and activations.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}
