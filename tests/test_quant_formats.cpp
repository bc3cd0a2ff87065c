// Weight formats beyond the foundation's: Q4_K and MLX's affine 4-bit (group 32 -> Q4_1,
// group 64 -> A4G64), their quantizers, and loading mlx-lm checkpoints against MLX's own logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "kernels/exact_repack.h"
#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quantize.h"
#include "models/gguf_source.h"
#include "models/hf_loader.h"
#include "runtime/session.h"
#include "npy.h"
#include "test_util.h"

using namespace tessera;

namespace {

std::vector<float> random_row(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng);
  return x;
}

}  // namespace

// Round trip of each quantizer: the error of every element is at most half a quantization step
// of its block (plus the fp16 rounding of the block's scale and offset); ggml's Q4_0 clips the
// side opposite its largest value to 7 steps, and MLX's affine rule snaps the scale to keep zero
// exact, so the far end may clip: an error of up to one step there.
TEST(QuantFormats, QuantizersRoundTripWithinHalfAStep) {
  const int64_t n = 1024;
  const std::vector<float> x = random_row(n, 1, 0.05f);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::A4G64, DType::Q5_0, DType::Q5_1,
                  DType::Q5_K, DType::Q6_K, DType::Q3_K}) {
    std::vector<uint8_t> q(row_bytes(t, n));
    std::vector<float> y(static_cast<size_t>(n));
    quantize_row(t, x.data(), n, q.data());
    dequantize_row(t, q.data(), y.data(), n);
    const int64_t group = t == DType::A4G64 ? 64 : 32;
    for (int64_t b = 0; b < n / group; ++b) {
      const float* xb = &x[static_cast<size_t>(b * group)];
      float mn = xb[0], mx = xb[0], amax = 0;
      for (int64_t i = 0; i < group; ++i) {
        mn = std::min(mn, xb[i]);
        mx = std::max(mx, xb[i]);
        amax = std::max(amax, std::fabs(xb[i]));
      }
      double step = (mx - mn) / 15.0;                                  // Q4_1
      if (t == DType::Q8_0) step = amax / 127.0;
      if (t == DType::Q4_0) step = 2 * amax / 8.0;  // d = max / -8; +amax clips at q = 15: a whole step
      if (t == DType::A4G64) step *= 2.0;  // MLX snaps the scale so 0 is exact: the far end may clip a step
      if (t == DType::Q4_K) step = (std::max(mx, 0.0f) - std::min(mn, 0.0f)) / 15.0 * 1.6;  // 6-bit scales
      if (t == DType::Q5_1) step = (mx - mn) / 31.0;
      if (t == DType::Q5_0) step = 2 * amax / 16.0;  // as Q4_0: d = max / -16, the other side may clip a step
      if (t == DType::Q5_K) step = (std::max(mx, 0.0f) - std::min(mn, 0.0f)) / 31.0 * 1.6;
      if (t == DType::Q6_K) step = 2 * amax / 32.0;  // int8 sub-block scales: a rounded-down one may clip a step
      // 8 levels, the searched scale may clip the extreme by a step (it maps it to as many as 5),
      // and a 6-bit scale far below the super-block's largest is coarse
      if (t == DType::Q3_K) step = 2 * amax / 4.0;
      step += 1e-6;
      for (int64_t i = 0; i < group; ++i) {
        const size_t k = static_cast<size_t>(b * group + i);
        ASSERT_LE(std::fabs(y[k] - x[k]), 0.5 * step * 1.02 + 2e-4 * std::fabs(x[k])) << dtype_name(t) << " element " << k;
      }
    }
  }
}

// MLX's affine rule: the larger-magnitude extreme is the bias and zero stays exact. The values
// 0..15 give scale -1 and bias 15 (mlx.core.quantize writes the first word as 0x89abcdef).
TEST(QuantFormats, AffineGroup64FollowsMlx) {
  std::vector<float> x(64, 0.0f);
  for (int i = 0; i < 16; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  std::vector<uint8_t> q(kA4G64Bytes);
  quantize_row(DType::A4G64, x.data(), 64, q.data());
  uint16_t s, b;
  std::memcpy(&s, q.data(), 2);
  std::memcpy(&b, q.data() + 2, 2);
  EXPECT_EQ(fp16_to_float(s), -1.0f);
  EXPECT_EQ(fp16_to_float(b), 15.0f);
  std::vector<float> y(64);
  dequantize_row(DType::A4G64, q.data(), y.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)]) << i;
}

// A Q4_K block written by hand (ggml's layout) decodes to d*sc*q - dmin*m per sub-block.
TEST(QuantFormats, Q4KLayout) {
  std::vector<uint8_t> blk(kQ4KBytes, 0);
  const uint16_t d = float_to_fp16(0.5f), dm = float_to_fp16(0.25f);
  std::memcpy(blk.data(), &d, 2);
  std::memcpy(blk.data() + 2, &dm, 2);
  for (int j = 0; j < 8; ++j) q4k_set_scale_min(blk.data() + 4, j, 10 + 6 * j, 63 - 7 * j);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    q4k_scale_min(blk.data() + 4, j, sc, m);
    EXPECT_EQ(sc, 10 + 6 * j);
    EXPECT_EQ(m, 63 - 7 * j);
  }
  for (int i = 0; i < 128; ++i) blk[static_cast<size_t>(16 + i)] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  std::vector<float> y(256);
  dequantize_row(DType::Q4_K, blk.data(), y.data(), 256);
  for (int k = 0; k < 256; ++k) {
    const int j = k / 32, l = k % 32, q = j % 2 ? 15 - l % 16 : l % 16;
    EXPECT_FLOAT_EQ(y[static_cast<size_t>(k)], 0.5f * (10 + 6 * j) * q - 0.25f * (63 - 7 * j)) << k;
  }
}

// mlx-lm checkpoints of a small random Llama (tests/fixtures/mlx/tiny-g*, made with MLX itself:
// bench/reference/make_mlx_tiny.py): the engine's logits equal MLX's (run in float32) to the
// precision the golden file keeps. MLX multiplies quantized weights by float activations, so the
// engine runs them on its fp32-activation path here (--f32-activations).
TEST(QuantFormats, MlxCheckpointsMatchMlxLogits) {
  for (const char* dir : {"tests/fixtures/mlx/tiny-g64", "tests/fixtures/mlx/tiny-g32"}) {
    const HfModel h = load_hf_dir(test::source_path(dir));
    std::ifstream f(test::source_path(std::string(dir) + "/golden.json"));
    const nlohmann::json g = nlohmann::json::parse(f);
    const std::vector<int32_t> toks = g["tokens"].get<std::vector<int32_t>>();
    const int V = h.text->config().n_vocab;
    SessionOptions o;
    o.n_ctx = 64;
    o.kv_type = DType::F32;
    o.n_threads = 2;
    o.q8_activations = false;
    Session s(*h.text, o);
    double worst = 0;
    s.eval_all(toks, [&](size_t i, const float* l) {
      const std::vector<double> want = g["logits"][i].get<std::vector<double>>();
      ASSERT_EQ(static_cast<int>(want.size()), V);
      for (int v = 0; v < V; ++v) worst = std::max(worst, std::fabs(l[v] - want[static_cast<size_t>(v)]));
    });
    EXPECT_LT(worst, 1e-4) << dir;
  }
}

// The same on the real SmolLM2-135M converted by mlx-lm, when present (.peers/, made by
// bench/reference/make_mlx_reference.py): top-1 agrees with MLX at every position.
TEST(QuantFormats, RealMlxSmolLM2MatchesMlxWhenPresent) {
  const std::string dir = test::source_path(".peers/smollm2-mlx4-g64");
  if (!std::filesystem::exists(dir + "/config.json")) GTEST_SKIP() << "no " << dir;
  const HfModel h = load_hf_dir(dir);
  std::ifstream f(test::source_path("tests/fixtures/mlx/mlx4_g64_f32act_logits.json"));
  const nlohmann::json g = nlohmann::json::parse(f);
  const std::vector<int32_t> toks = g["tokens"].get<std::vector<int32_t>>();
  SessionOptions o;
  o.n_ctx = 64;
  o.kv_type = DType::F32;
  Session s(*h.text, o);
  int agree = 0;
  s.eval_all(toks, [&](size_t i, const float* l) {
    const int V = h.text->config().n_vocab;
    const int best = static_cast<int>(std::max_element(l, l + V) - l);
    if (best == g["positions"][i]["top"][0][0].get<int>()) ++agree;
  });
  EXPECT_EQ(agree, static_cast<int>(toks.size()));
}

// Real blocks written by llama.cpp's llama-quantize (the Q4_K_M and Q5_K_M mixtures of the default
// model: bench/peers/make_kquants.sh) against their values as llama.cpp's gguf-py dequantizes them
// (bench/peers/gen_kquant_fixture.py). Q5_0 and Q6_K are single products there as here, so equal
// bit for bit, and so are Q3_K and IQ4_NL, which the engine holds as Q6_K and Q8_0
// (kernels/exact_repack.h; the Q3_K_S and IQ4_NL mixtures); Q5_1, Q4_K and Q5_K multiply then add where the engine fuses the two (one rounding
// fewer), so within 1e-6 of the row's largest value. The float64 test reader must agree too.
TEST(QuantFormats, RealKQuantBlocksMatchLlamaCppDequantization) {
  for (DType t : {DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS, DType::Q2_K}) {
    const std::string base = test::source_path("tests/fixtures/kquants/") + dtype_name(t);
    const test::Npy bytes = test::load_npy(base + ".bytes.npy");
    const std::vector<float> want = test::load_npy(base + ".values.npy").f32();
    ASSERT_EQ(bytes.shape.size(), 2u);
    const size_t rows = bytes.shape[0], rb = bytes.shape[1], cols = want.size() / rows;
    ASSERT_EQ(rb, row_bytes(t, cols)) << dtype_name(t);
    const bool exact = t == DType::Q5_0 || t == DType::Q6_K || t == DType::Q3_K || t == DType::IQ4_NL || t == DType::IQ4_XS ||
                       t == DType::Q2_K;
    for (size_t r = 0; r < rows; ++r) {
      std::vector<float> got(cols);
      std::vector<double> f64(cols);
      dequantize_row(t, bytes.bytes.data() + r * rb, got.data(), static_cast<int64_t>(cols));
      test::dequantize_row_f64(t, bytes.bytes.data() + r * rb, f64.data(), static_cast<int64_t>(cols));
      float mx = 0.0f;
      for (size_t k = 0; k < cols; ++k) mx = std::max(mx, std::fabs(want[r * cols + k]));
      ASSERT_GT(mx, 0.0f);
      for (size_t k = 0; k < cols; ++k) {
        const float w = want[r * cols + k];
        if (exact) ASSERT_EQ(got[k], w) << dtype_name(t) << " row " << r << " element " << k;
        else ASSERT_NEAR(got[k], w, 1e-6 * mx) << dtype_name(t) << " row " << r << " element " << k;
        ASSERT_NEAR(f64[k], w, 1e-6 * mx) << dtype_name(t) << " (float64 reader) row " << r << " element " << k;
      }
    }
  }
}

// Q3_K and IQ4_NL, which the engine holds as Q6_K and Q8_0, keep every weight's value: on random
// bytes (every byte pattern is a valid block; NaN and infinite scales included) the repacked
// rows give, element for element, the value the float64 reader takes straight from ggml's layout
// (exact in fp32 too: an fp16 scale times a 6-bit scale times a 3-bit quant needs 20 bits). A
// GGUF's tensors of those types come out of the loader in the held type, with the same values; a
// type the engine has no kernels for and cannot hold (IQ2_XXS) is refused by name.
TEST(QuantFormats, Q3KAndIq4nlAreHeldExactly) {
  std::mt19937 rng(11);
  for (DType t : {DType::Q3_K, DType::IQ4_NL}) {
    ASSERT_TRUE(needs_exact_repack(t));
    const DType held = exact_repack_type(t);
    EXPECT_EQ(held, t == DType::Q3_K ? DType::Q6_K : DType::Q8_0);
    for (int64_t n : {256, 512, 1536}) {
      std::vector<uint8_t> src(row_bytes(t, static_cast<uint64_t>(n))), dst(row_bytes(held, static_cast<uint64_t>(n)));
      for (int trial = 0; trial < 50; ++trial) {
        for (auto& b : src) b = static_cast<uint8_t>(rng());
        if (trial == 0) std::fill(src.begin(), src.end(), 0xff);  // NaN scales
        exact_repack_row(t, src.data(), dst.data(), n);
        std::vector<float> got(static_cast<size_t>(n)), via(static_cast<size_t>(n));
        std::vector<double> want(static_cast<size_t>(n));
        dequantize_row(held, dst.data(), got.data(), n);
        dequantize_row(t, src.data(), via.data(), n);
        test::dequantize_row_f64(t, src.data(), want.data(), n);
        for (int64_t k = 0; k < n; ++k) {
          const float w = static_cast<float>(want[static_cast<size_t>(k)]);
          if (std::isnan(w)) {
            ASSERT_TRUE(std::isnan(got[static_cast<size_t>(k)])) << dtype_name(t) << " element " << k;
          } else {
            ASSERT_EQ(got[static_cast<size_t>(k)], want[static_cast<size_t>(k)]) << dtype_name(t) << " trial " << trial << " element " << k;
          }
          ASSERT_EQ(std::memcmp(&got[static_cast<size_t>(k)], &via[static_cast<size_t>(k)], 4), 0);
        }
      }
    }
  }
  constexpr DType kIq2xxs = static_cast<DType>(16);  // ggml's IQ2_XXS: named, no kernels
  // through a file: 2 x 512 Q3_K, 3 x 64 IQ4_NL, 2 x 256 IQ4_XS, 1 x 256 IQ2_XXS
  GgufWriter w;
  w.set("general.architecture", GgufValue::make_string("llama"));
  std::vector<uint8_t> q3(2 * row_bytes(DType::Q3_K, 512)), nl(3 * row_bytes(DType::IQ4_NL, 64)),
      xs(2 * row_bytes(DType::IQ4_XS, 256)), q2(row_bytes(kIq2xxs, 256));
  for (auto* v : {&q3, &nl, &xs, &q2})
    for (auto& b : *v) b = static_cast<uint8_t>(rng() & 0x3f);  // small scales: finite values
  w.add_tensor("q3", DType::Q3_K, {512, 2}, q3);
  w.add_tensor("nl", DType::IQ4_NL, {64, 3}, nl);
  w.add_tensor("xs", DType::IQ4_XS, {256, 2}, xs);
  w.add_tensor("q2", kIq2xxs, {256, 1}, q2);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const auto f = GgufFile::parse(bytes.data(), bytes.size());
  GgufTensorSource s(*f);
  for (auto [name, rows, cols, type] : {std::tuple{"q3", 2, 512, DType::Q3_K}, std::tuple{"nl", 3, 64, DType::IQ4_NL}}) {
    const WeightMatrix m = s.matrix(name, rows, cols);
    EXPECT_EQ(m.type, exact_repack_type(type)) << name;
    EXPECT_EQ(m.row_stride, row_bytes(m.type, static_cast<uint64_t>(cols)));
    EXPECT_EQ(s.matrix(name, rows, cols).data, m.data) << "repacked once";
    const uint8_t* raw = s.find(name)->data;
    for (int r = 0; r < rows; ++r) {
      std::vector<float> got(static_cast<size_t>(cols));
      std::vector<double> want(static_cast<size_t>(cols));
      dequantize_row(m.type, m.data + r * m.row_stride, got.data(), cols);
      test::dequantize_row_f64(type, raw + r * row_bytes(type, static_cast<uint64_t>(cols)), want.data(), cols);
      for (int k = 0; k < cols; ++k) ASSERT_EQ(got[static_cast<size_t>(k)], want[static_cast<size_t>(k)]) << name << " " << r << " " << k;
    }
  }
  // as stored where the 8-bit kernels take the type (the text model's matrices): Q3_K, IQ4_NL
  // and IQ4_XS as in the file
  constexpr auto kStored = TensorSource::Form::Stored;
  EXPECT_EQ(s.matrix("nl", 3, 64, kStored).type, DType::IQ4_NL);
  EXPECT_EQ(s.matrix("nl", 3, 64, kStored).data, s.find("nl")->data);
  EXPECT_EQ(s.matrix("q3", 2, 512, kStored).type, DType::Q3_K);
  EXPECT_EQ(s.matrix("q3", 2, 512, kStored).data, s.find("q3")->data);
  for (auto form : {TensorSource::Form::Held, kStored}) {
    const WeightMatrix m = s.matrix("xs", 2, 256, form);  // no held type: as stored either way
    EXPECT_EQ(m.type, DType::IQ4_XS);
    for (int r = 0; r < 2; ++r) {
      std::vector<float> got(256);
      std::vector<double> want(256);
      dequantize_row(m.type, m.data + r * m.row_stride, got.data(), 256);
      test::dequantize_row_f64(DType::IQ4_XS, m.data + r * m.row_stride, want.data(), 256);
      for (int k = 0; k < 256; ++k) ASSERT_EQ(got[static_cast<size_t>(k)], want[static_cast<size_t>(k)]) << "xs " << r << " " << k;
    }
  }
  try {
    s.matrix("q2", 1, 256);
    FAIL() << "IQ2_XXS loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("type IQ2_XXS, which this engine cannot compute with yet"), std::string::npos) << e.what();
  }
}

// Q4_K / Q5_K's sub-block search never does worse than the plain min/max range on the weighted
// squared error it minimises, and does better on average (over 2000 random sub-blocks with
// outliers, as trained weights have).
TEST(QuantFormats, KQuantSearchBeatsThePlainRange) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int levels : {15, 31}) {
    double plain_total = 0, searched_total = 0;
    for (int b = 0; b < 2000; ++b) {
      float x[32], w[32];
      for (int i = 0; i < 32; ++i) x[i] = nd(rng) * (i == b % 32 ? 4.0f : 1.0f) + (b % 3 == 0 ? 0.5f : 0.0f);
      for (int i = 0; i < 32; ++i) w[i] = 1.0f + std::fabs(x[i]);
      const auto err = [&](float s, float minv) {
        double e = 0;
        for (int i = 0; i < 32; ++i) {
          const float q = s > 0 ? std::clamp(std::nearbyint((x[i] + minv) / s), 0.0f, static_cast<float>(levels)) : 0.0f;
          e += w[i] * std::pow(static_cast<double>(s) * q - minv - x[i], 2);
        }
        return e;
      };
      float mn = 0, mx = x[0];
      for (float v : x) mn = std::min(mn, v), mx = std::max(mx, v);
      const double plain = err((mx - mn) / static_cast<float>(levels), -mn);
      float s = 0, minv = 0;
      k_subblock_search(x, w, levels, s, minv);
      EXPECT_GE(minv, 0.0f);
      const double searched = err(s, minv);
      ASSERT_LE(searched, plain * (1 + 1e-6)) << "levels " << levels << " block " << b;
      plain_total += plain, searched_total += searched;
    }
    std::printf("levels %d: weighted squared error %.4g searched, %.4g plain range (%.1f%% lower)\n", levels, searched_total, plain_total,
                100 * (1 - searched_total / plain_total));
    EXPECT_LT(searched_total, 0.9 * plain_total) << levels;
  }
}
