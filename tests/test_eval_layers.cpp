// `tessera eval --per-layer` (runtime/eval_layers.h): per-layer divergence of hidden states.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "models/gguf_convert.h"
#include "runtime/eval.h"
#include "runtime/eval_layers.h"
#include "test_util.h"

using namespace tessera;

// Against itself every layer is exactly zero; against a requantized copy the divergence is
// positive, grows from the first layer to the last, and watching changes no logit (the same KL).
TEST(EvalLayers, ZeroAgainstItselfGrowingWhenQuantized) {
  const std::string q40 = (std::filesystem::temp_directory_path() / ("tessera_layers_q4_0_" + std::to_string(::getpid()) + ".gguf")).string();
  {
    auto in = GgufFile::open(test::model_path());
    convert_gguf(*in, DType::Q4_0, q40);
  }
  auto ref = LlamaModel::load(test::model_path());
  auto model = LlamaModel::load(q40);
  std::filesystem::remove(q40);  // mapped: readable until unmapped
  const std::vector<int32_t> toks = ref->tokenizer().encode(test::read_file("/usr/share/common-licenses/GPL-3"), true);
  SessionOptions so;
  so.n_ctx = 128;
  so.n_batch = 48;  // batches that straddle the scored range
  so.n_threads = 2;
  EvalOptions o;
  o.n_ctx = 128;
  o.chunks = 2;
  {
    Session a(*ref, so), b(*ref, so);
    LayerDivergenceProbe probe(a, b, 128);
    evaluate(a, &b, toks, o);
    const std::vector<LayerDivergence> l = probe.results();
    ASSERT_EQ(l.size(), static_cast<size_t>(ref->config().n_layer));
    for (const LayerDivergence& d : l) EXPECT_EQ(d.max, 0);
  }
  Session a(*model, so), b(*ref, so);
  const EvalStats plain = evaluate(a, &b, toks, o);
  LayerDivergenceProbe probe(a, b, 128);
  const EvalStats watched = evaluate(a, &b, toks, o);
  EXPECT_EQ(plain.kld_mean, watched.kld_mean);
  const std::vector<LayerDivergence> l = probe.results();
  EXPECT_GT(l.front().mean, 0);
  EXPECT_GT(l.back().mean, l.front().mean);
  for (const LayerDivergence& d : l) EXPECT_LE(d.mean, d.max);
}
