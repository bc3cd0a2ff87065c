// `tessera eval --image` (runtime/eval_vision.h): a vision tower against a reference on screenshots.
#include <gtest/gtest.h>

#include "core/error.h"
#include "image/image.h"
#include "kernels/bf16_tiles.h"
#include "models/open_model.h"
#include "runtime/eval_vision.h"
#include "test_util.h"

using namespace tessera;

namespace {

std::vector<std::pair<std::string, ImageRGB>> screens() {
  return {{"xterm", load_image(test::source_path("tests/fixtures/vision/screens/xterm_700x450.png"))}};
}

SessionOptions options() {
  SessionOptions o;
  o.n_ctx = 2048;
  o.n_threads = 2;
  return o;
}

}  // namespace

// A model against itself measures nothing; the same weights with bf16 GEMMs against fp32 measure
// the bf16 path's error, small but not zero (docs/numerics.md bounds it).
TEST(EvalVision, SmolVlmAgainstItselfAndAgainstFp32) {
  const std::string dir = test::source_path("tests/fixtures/vision/tiny/");
  HfModel a = open_model(dir + "text.gguf", dir + "mmproj.gguf");
  const VlmParts p{a.text.get(), a.vision.get(), nullptr};
  const VisionEvalStats same = evaluate_vision(p, p, screens(), "What is on the screen?", options());
  ASSERT_EQ(same.images.size(), 1u);
  EXPECT_EQ(same.images[0].tiles, 13);
  EXPECT_EQ(same.encoder_err_max, 0);
  EXPECT_EQ(same.connector_err_max, 0);
  EXPECT_EQ(same.kld_max, 0);
  EXPECT_EQ(same.same_top, 1);
  if (!bf16_gemm_available()) GTEST_SKIP() << "no bf16 GEMM on this CPU";
  HfModel b = open_model(dir + "text.gguf", dir + "mmproj.gguf");
  b.vision->use_bf16_gemm();
  const VlmParts q{b.text.get(), b.vision.get(), nullptr};
  const VisionEvalStats bf = evaluate_vision(q, p, screens(), "What is on the screen?", options());
  EXPECT_GT(bf.encoder_err_max, 0);
  EXPECT_LT(bf.encoder_err_max, 0.05);
  EXPECT_GT(bf.connector_err_max, 0);
  EXPECT_LT(bf.connector_err_max, 0.05);
  EXPECT_LT(bf.kld_max, 0.01);
  // another family, or another vocabulary, is refused
  const std::string qd = test::source_path("tests/fixtures/qwen3vl/tiny/");
  HfModel c = open_model(qd + "text.gguf", qd + "mmproj.gguf");
  const VlmParts r{c.text.get(), nullptr, c.qwen_vision.get()};
  EXPECT_THROW(evaluate_vision(r, p, screens(), "hi", options()), Error);
}

TEST(EvalVision, Qwen3VlAgainstItself) {
  const std::string dir = test::source_path("tests/fixtures/qwen3vl/tiny/");
  HfModel a = open_model(dir + "text.gguf", dir + "mmproj.gguf");
  const VlmParts p{a.text.get(), nullptr, a.qwen_vision.get()};
  const VisionEvalStats same = evaluate_vision(p, p, screens(), "What is on the screen?", options(), 65536);
  ASSERT_EQ(same.images.size(), 1u);
  EXPECT_EQ(same.encoder_err_max, -1);  // the merger's input is not exposed: only its output is compared
  EXPECT_EQ(same.connector_err_max, 0);
  EXPECT_EQ(same.kld_max, 0);
  EXPECT_GT(same.images[0].image_tokens, 0);
}
