// Qwen3-VL: preprocessing against transformers' processor (hashes from
// bench/reference/make_qwen3vl_preprocess_golden.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "image/image.h"
#include "models/qwen3vl/preprocess.h"
#include "sha256.h"
#include "test_util.h"

using namespace tessera;

namespace {
ImageRGB crop(const ImageRGB& in, int x0, int y0, int x1, int y1) {
  ImageRGB out;
  out.width = x1 - x0;
  out.height = y1 - y0;
  out.pixels.resize(static_cast<size_t>(out.width) * out.height * 3);
  for (int y = 0; y < out.height; ++y) std::copy_n(in.row(y0 + y) + 3 * x0, 3 * out.width, out.row(y));
  return out;
}
}  // namespace

// Every test screen at four max_pixels settings (and a crop small enough to be scaled up):
// the grid, the token count and pixel_values bit for bit as transformers' default processor.
TEST(Qwen3VL, PreprocessingIsPixelExactWithTransformers) {
  const auto g = nlohmann::json::parse(test::read_file(test::source_path("tests/fixtures/qwen3vl/preprocess_golden.json")));
  ASSERT_GE(g["cases"].size(), 30u);
  ThreadPool two(2);
  for (const auto& c : g["cases"]) {
    std::string name = c["image"];
    const bool cropped = name.size() > 5 && name.substr(name.size() - 5) == "#crop";
    if (cropped) name = name.substr(0, name.size() - 5);
    ImageRGB img = load_image(test::source_path("tests/fixtures/vision/screens/" + name));
    if (cropped) img = crop(img, g["crop"][0], g["crop"][1], g["crop"][2], g["crop"][3]);
    Qwen3VLPreprocessConfig cfg;
    cfg.max_pixels = c["max_pixels"];
    const Qwen3VLPatches p = preprocess_qwen3vl(img, cfg, &two);
    const std::string what = c["image"].get<std::string>() + " max_pixels " + std::to_string(cfg.max_pixels);
    EXPECT_EQ((std::vector<int>{p.grid_t, p.grid_h, p.grid_w}), c["grid_thw"].get<std::vector<int>>()) << what;
    EXPECT_EQ(p.n_tokens(cfg), c["n_tokens"].get<int>()) << what;
    ASSERT_EQ(p.pixels.size(), c["pixel_values_shape"][0].get<size_t>() * c["pixel_values_shape"][1].get<size_t>()) << what;
    EXPECT_EQ(test::sha256_hex(reinterpret_cast<const uint8_t*>(p.pixels.data()), p.pixels.size() * sizeof(float)),
              c["pixel_values_sha256"].get<std::string>())
        << what;
  }
}

// transformers' smart_resize on edge cases: Python's round-half-to-even, the floor after
// scaling down, the ceil after scaling up, and the refusals.
TEST(Qwen3VL, SmartResizeEdges) {
  int h = 0, w = 0;
  qwen3vl_smart_resize(48, 80, 32, 1, 1 << 30, h, w);  // 1.5 -> 2, 2.5 -> 2
  EXPECT_EQ(h, 64);
  EXPECT_EQ(w, 64);
  qwen3vl_smart_resize(1080, 1920, 32, 65536, 16777216, h, w);
  EXPECT_EQ(h, 1088);
  EXPECT_EQ(w, 1920);
  qwen3vl_smart_resize(1080, 1920, 32, 65536, 262144, h, w);
  EXPECT_EQ(h, 384);  // floor(1080 / beta / 32) * 32 with beta = sqrt(1080 * 1920 / 262144) = 2.8125
  EXPECT_EQ(w, 672);
  qwen3vl_smart_resize(10, 10, 32, 65536, 16777216, h, w);
  EXPECT_EQ(h, 256);
  EXPECT_EQ(w, 256);
  EXPECT_THROW(qwen3vl_smart_resize(1, 201, 32, 1, 1 << 30, h, w), Error);
  EXPECT_THROW(qwen3vl_smart_resize(0, 10, 32, 1, 1 << 30, h, w), Error);
}
