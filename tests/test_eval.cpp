// `tessera eval` (runtime/eval.h): perplexity and KL divergence as llama-perplexity computes
// them, checked against its figures on the same files (tests/fixtures/eval, bench/eval/llama_kld.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/gguf_convert.h"
#include "runtime/eval.h"
#include "sha256.h"
#include "test_util.h"

using namespace tessera;

namespace {
const char* kText = "/usr/share/common-licenses/GPL-3";  // Debian's base-files

std::vector<int32_t> text_tokens(const LlamaModel& m) { return m.tokenizer().encode(test::read_file(kText), true); }

SessionOptions session(bool q8) {
  SessionOptions o;
  o.n_ctx = 512;
  o.n_threads = 2;
  o.q8_activations = q8;
  return o;
}
}  // namespace

// A model against itself: no divergence (but float rounding), every top token the same, the same perplexity; and the
// perplexity is exp of the mean negative log-likelihood computed here by hand for one chunk.
TEST(Eval, ModelAgainstItselfAndByHand) {
  auto m = LlamaModel::load(test::model_path());
  const std::vector<int32_t> toks = text_tokens(*m);
  Session a(*m, session(false)), b(*m, session(false));
  EvalOptions o;
  o.n_ctx = 128;
  o.chunks = 2;
  const EvalStats st = evaluate(a, &b, toks, o);
  EXPECT_EQ(st.chunks, 2);
  EXPECT_EQ(st.scored, 2 * 63);
  EXPECT_LT(st.kld_max, 1e-6);  // the reference's log-probabilities are kept as float: their rounding only
  EXPECT_LT(st.kld_mean, 1e-7);
  EXPECT_EQ(st.same_top, 1.0);
  EXPECT_EQ(st.ppl, st.ref_ppl);
  // by hand: chunk 0, rows 64..126 predicting tokens 65..127
  o.chunks = 1;
  const EvalStats one = evaluate(a, nullptr, toks, o);
  Session s(*m, session(false));
  double nll = 0;
  const std::vector<int32_t> chunk(toks.begin(), toks.begin() + 128);
  s.eval_all(chunk, [&](size_t i, const float* l) {
    if (i < 64 || i >= 127) return;
    const size_t V = static_cast<size_t>(m->config().n_vocab);
    double mx = l[0], sum = 0;
    for (size_t j = 1; j < V; ++j) mx = std::max(mx, static_cast<double>(l[j]));
    for (size_t j = 0; j < V; ++j) sum += std::exp(l[j] - mx);
    nll += -(l[static_cast<size_t>(chunk[i + 1])] - mx - std::log(sum));
  });
  EXPECT_NEAR(one.ppl, std::exp(nll / 63), 1e-9 * one.ppl);
  EXPECT_FALSE(one.has_reference);
  // too short a text, too small a chunk, a chunk over the context
  EXPECT_THROW(evaluate(a, nullptr, std::vector<int32_t>(toks.begin(), toks.begin() + 100), o), Error);
  o.n_ctx = 2;
  EXPECT_THROW(evaluate(a, nullptr, toks, o), Error);
  o.n_ctx = 1024;
  EXPECT_THROW(evaluate(a, nullptr, toks, o), Error);
}

// Q4_0 (tessera convert) against the Q4_1 it came from, over the first two chunks of 512 of
// GPL-3: with 8-bit activations (llama.cpp's numerics) perplexities within 1% and the mean KL
// divergence within 5% of llama-perplexity's on the same files; with the default fp32
// activations, within 3% and 5%.
TEST(Eval, AgreesWithLlamaPerplexity) {
  const auto fx = nlohmann::json::parse(test::read_file(test::source_path("tests/fixtures/eval/llama_kld_gpl3_q4_0_vs_q4_1.json")));
  const std::string text = test::read_file(kText);
  if (test::sha256_hex(reinterpret_cast<const uint8_t*>(text.data()), text.size()) != fx["text_sha256"].get<std::string>())
    GTEST_SKIP() << kText << " is not the text the fixture was made from (another base-files version)";
  const std::string q40 = (std::filesystem::temp_directory_path() / ("tessera_eval_q4_0_" + std::to_string(::getpid()) + ".gguf")).string();
  {
    auto in = GgufFile::open(test::model_path());
    convert_gguf(*in, DType::Q4_0, q40);
  }
  auto ref = LlamaModel::load(test::model_path());
  auto model = LlamaModel::load(q40);
  std::filesystem::remove(q40);  // mapped: readable until unmapped
  const auto& want = fx["chunks_2"];
  EvalOptions o;
  o.n_ctx = 512;
  o.chunks = 2;
  for (const bool q8 : {true, false}) {
    Session s(*model, session(q8)), r(*ref, session(q8));
    const EvalStats st = evaluate(s, &r, text_tokens(*model), o);
    const double ppl_tol = q8 ? 0.01 : 0.03;
    EXPECT_NEAR(st.ppl, want["ppl_q"].get<double>(), ppl_tol * want["ppl_q"].get<double>()) << "q8 " << q8;
    EXPECT_NEAR(st.ref_ppl, want["ppl_base"].get<double>(), ppl_tol * want["ppl_base"].get<double>()) << "q8 " << q8;
    EXPECT_NEAR(st.kld_mean, want["kld_mean"].get<double>(), 0.05 * want["kld_mean"].get<double>()) << "q8 " << q8;
    EXPECT_NEAR(st.same_top, want["same_top"].get<double>(), 0.03) << "q8 " << q8;
    std::printf("q8 %d: PPL %.4f (llama %.4f), base %.4f (%.4f), mean KLD %.6f (%.6f), same top %.4f (%.4f)\n", q8, st.ppl,
                want["ppl_q"].get<double>(), st.ref_ppl, want["ppl_base"].get<double>(), st.kld_mean, want["kld_mean"].get<double>(),
                st.same_top, want["same_top"].get<double>());
  }
}
