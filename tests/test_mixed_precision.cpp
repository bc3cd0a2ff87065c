// Automatic mixed precision (runtime/mixed_precision.h, `tessera quantize`): the search meets its
// budget and finds the optimum of the additive model, sensitivities round-trip through JSON, and
// a measured plan written by convert_gguf has the planned types and the predicted divergence.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/gguf_convert.h"
#include "runtime/eval.h"
#include "runtime/mixed_precision.h"
#include "test_util.h"

using namespace tessera;

namespace {

const char* kText = "/usr/share/common-licenses/GPL-3";  // Debian's base-files

std::string tiny_model() { return std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/qwen3vl/tiny/text.gguf"; }

// A table of G groups with C candidates each: bytes increasing, cost decreasing, with noise.
Sensitivity synthetic(int G, int C, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> step(1, 40);
  std::uniform_real_distribution<double> gain(0.0, 0.02);
  Sensitivity s;
  s.fixed_bytes = 100;
  s.base_kld = 0.001;
  for (int g = 0; g < G; ++g) {
    MixGroup grp;
    grp.name = 'g' + std::to_string(g);  // (a char: GCC 12's -Wrestrict false alarm on "g" + temporary)
    uint64_t bytes = 50 + static_cast<uint64_t>(step(rng));
    double cost = 0.05 + gain(rng);
    for (int c = 0; c < C; ++c) {
      grp.candidates.push_back(MixCandidate{false, DType::Q4_0, bytes, cost});
      bytes += static_cast<uint64_t>(step(rng));
      cost = std::max(0.0, cost - gain(rng));
    }
    s.groups.push_back(grp);
  }
  return s;
}

// Every combination: the least cost within max_bytes, and the fewest bytes within max_kld.
void brute_force(const Sensitivity& s, uint64_t max_bytes, double max_kld, double& least_cost, uint64_t& fewest_bytes) {
  least_cost = 1e9;
  fewest_bytes = ~uint64_t{0};
  std::vector<size_t> pick(s.groups.size(), 0);
  for (;;) {
    uint64_t bytes = s.fixed_bytes;
    double cost = s.base_kld;
    for (size_t g = 0; g < pick.size(); ++g) bytes += s.groups[g].candidates[pick[g]].bytes, cost += s.groups[g].candidates[pick[g]].dkl;
    if (bytes <= max_bytes) least_cost = std::min(least_cost, cost);
    if (cost <= max_kld) fewest_bytes = std::min(fewest_bytes, bytes);
    size_t g = 0;
    while (g < pick.size() && ++pick[g] == s.groups[g].candidates.size()) pick[g++] = 0;
    if (g == pick.size()) return;
  }
}

}  // namespace

// The search is exact for the additive model: it matches an exhaustive search on small tables
// (bytes below 2^18 are counted exactly), for both kinds of budget, and never exceeds one.
TEST(MixedPrecision, SearchMeetsBudgetsAndMatchesExhaustiveSearch) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const Sensitivity s = synthetic(5, 4, seed);
    uint64_t all_small = s.fixed_bytes, all_large = s.fixed_bytes;
    for (const MixGroup& g : s.groups) all_small += g.candidates.front().bytes, all_large += g.candidates.back().bytes;
    const uint64_t max_bytes = (all_small + all_large) / 2;
    const double max_kld = 0.12 + 0.01 * (seed % 5);
    double least_cost;
    uint64_t fewest_bytes;
    brute_force(s, max_bytes, max_kld, least_cost, fewest_bytes);
    MixBudget by_size;
    by_size.max_bytes = max_bytes;
    const MixPlan p = search_mix(s, by_size);
    EXPECT_LE(p.bytes, max_bytes);
    EXPECT_NEAR(p.predicted_kld, least_cost, 1e-12) << "seed " << seed;
    MixBudget by_kld;
    by_kld.max_kld = max_kld;
    if (fewest_bytes == ~uint64_t{0}) {
      EXPECT_THROW(search_mix(s, by_kld), Error);
      continue;
    }
    const MixPlan q = search_mix(s, by_kld);
    EXPECT_LE(q.predicted_kld, max_kld);
    EXPECT_EQ(q.bytes, fewest_bytes) << "seed " << seed;
  }
  // an impossible budget is an error, not a plan over it
  const Sensitivity s = synthetic(3, 3, 7);
  MixBudget tiny;
  tiny.max_bytes = 10;
  EXPECT_THROW(search_mix(s, tiny), Error);
  MixBudget zero;
  zero.max_kld = 0;
  EXPECT_THROW(search_mix(s, zero), Error);
}

// Groups: one per tensor (0 bands) or per kind and band; the K types' fallbacks on 576-wide rows
// that give the same types as another candidate are one candidate; sensitivities round-trip
// through JSON and refuse a file measured another way.
TEST(MixedPrecision, GroupsAndSensitivityJsonRoundTrip) {
  auto f = GgufFile::open(test::model_path());  // SmolLM2: 30 layers, rows of 576 (ffn_down: 1536)
  const std::vector<DType> types = {DType::Q4_K, DType::Q6_K, DType::Q8_0};
  const Sensitivity per_tensor = mix_groups(*f, types, 0);
  EXPECT_EQ(per_tensor.groups.size(), 30u * 7 + 1);
  Sensitivity s = mix_groups(*f, types, 3);
  ASSERT_EQ(s.groups.size(), 3u * 7 + 1);  // token_embd, then (kind, band of 10 layers)
  EXPECT_EQ(s.groups[0].name, "token_embd");
  bool banded = false;
  for (const MixGroup& g : s.groups) {
    banded |= g.name == "attn_q@10-19";
    if (g.name == "token_embd") {
      // Q8_0 already: q6_k falls back to q8_0 and q8_0 is the same bytes, so keep and q4_k (q5_0) remain
      ASSERT_EQ(g.candidates.size(), 2u);
      EXPECT_TRUE(g.candidates[0].keep);
      EXPECT_EQ(g.candidates[1].name(), "q4_k");
    }
  }
  EXPECT_TRUE(banded);
  uint64_t elements = 0;
  for (const GgufTensor& t : f->tensors()) elements += t.n_elements;
  EXPECT_EQ(s.total_elements, elements);
  s.cache_type = "f16";
  s.base_kld = 0.00125;
  double x = 0.001;
  for (MixGroup& g : s.groups)
    for (MixCandidate& c : g.candidates) c.dkl = c.keep ? 0 : (x += 0.001);
  const nlohmann::json j = nlohmann::json::parse(sensitivity_to_json(s).dump());
  Sensitivity back = mix_groups(*f, types, 3);
  back.cache_type = "f16";
  sensitivity_from_json(j, back, "sens.json");
  EXPECT_EQ(back.base_kld, s.base_kld);
  for (size_t g = 0; g < s.groups.size(); ++g)
    for (size_t c = 0; c < s.groups[g].candidates.size(); ++c) EXPECT_EQ(back.groups[g].candidates[c].dkl, s.groups[g].candidates[c].dkl);
  // measured another way: other bands, another KV cache, a candidate type not measured, not a sensitivity file
  Sensitivity other = mix_groups(*f, types, 2);
  other.cache_type = "f16";
  EXPECT_THROW(sensitivity_from_json(j, other, "sens.json"), Error);
  Sensitivity q8 = mix_groups(*f, types, 3);
  q8.cache_type = "q8";
  EXPECT_THROW(sensitivity_from_json(j, q8, "sens.json"), Error);
  Sensitivity more = mix_groups(*f, {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q4_0}, 3);
  more.cache_type = "f16";
  EXPECT_THROW(sensitivity_from_json(j, more, "sens.json"), Error);
  EXPECT_THROW(sensitivity_from_json(nlohmann::json::parse("{\"groups\": 3}"), back, "x.json"), Error);
  EXPECT_THROW(mix_groups(*f, {DType::F16}, 0), Error);  // a float type is no quantization
}

// End to end on the tiny Qwen3-VL text model: each tensor measured alone in memory, the model
// restored afterwards, a plan under a KL budget written by convert_gguf with exactly the
// planned types, and its measured divergence near the additive prediction.
TEST(MixedPrecision, MeasuredPlanIsWrittenWithItsTypes) {
  auto model = LlamaModel::load(tiny_model());
  auto f = GgufFile::open(tiny_model());
  const std::vector<int32_t> tokens = model->tokenizer().encode(test::read_file(kText), true);
  SessionOptions so;
  so.n_ctx = 128;
  so.n_threads = 2;
  Session s(*model, so);
  EvalOptions eo;
  eo.n_ctx = 128;
  eo.chunks = 1;
  const ReferenceLogprobs ref = reference_logprobs(s, tokens, eo);
  Sensitivity sens = mix_groups(*f, {DType::Q4_0, DType::Q8_0}, 0);
  ASSERT_EQ(sens.groups.size(), 4u * 7 + 1);
  measure_sensitivity(sens, *f, *model, s, ref, tokens);
  EXPECT_LT(std::abs(sens.base_kld), 1e-7);  // the reference against itself
  double all_q4 = 0;
  for (const MixGroup& g : sens.groups) {
    ASSERT_EQ(g.candidates.size(), 3u);
    EXPECT_GT(g.candidates[1].dkl, g.candidates[2].dkl) << g.name;  // q4_0 loses more than q8_0
    all_q4 += g.candidates[1].dkl;
  }
  EXPECT_LT(evaluate(s, ref, tokens).kld_mean, 1e-7);  // every matrix restored
  MixBudget b;
  b.max_kld = all_q4 / 4;
  const MixPlan plan = search_mix(sens, b);
  EXPECT_LE(plan.predicted_kld, b.max_kld);
  const std::string out = ::testing::TempDir() + "tessera_mix_test.gguf";
  convert_gguf(*f, plan_main_type(sens, plan, *f), out, plan_overrides(sens, plan, *f));
  {
    auto written = GgufFile::open(out);
    uint64_t bytes = 0;
    for (const GgufTensor& t : written->tensors()) bytes += t.n_bytes;
    EXPECT_EQ(bytes, plan.bytes);
    for (size_t g = 0; g < sens.groups.size(); ++g) {
      const MixCandidate& c = sens.groups[g].candidates[plan.choice[g]];
      for (const std::string& n : sens.groups[g].tensors)
        for (const GgufTensor& t : written->tensors()) {
          if (t.name == n) { EXPECT_EQ(t.type, c.keep ? DType::F32 : c.type) << n; }
        }
    }
    auto mixed = LlamaModel::load(out);
    Session ms(*mixed, so);
    const double measured = evaluate(ms, ref, tokens).kld_mean;
    EXPECT_GT(measured, 0.25 * plan.predicted_kld);
    EXPECT_LT(measured, 4 * plan.predicted_kld);
  }
  std::filesystem::remove(out);
}
