// MLX's affine 4-bit rule (kernels/quantize.h: quantize_row_mlx_affine; group 64 as A4G64, group
// 32 as Q4_1 blocks) against a float64 statement of the rule, and the requantizing TensorSource
// behind `tessera eval --requantize` (models/requantized_source.h) against files `tessera convert`
// writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <unistd.h>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "formats/gguf.h"
#include "kernels/kernels.h"
#include "kernels/quantize.h"
#include "models/gguf_convert.h"
#include "models/requantized_source.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace tessera;

namespace {

double f16(double v) { return fp16_to_float(float_to_fp16(static_cast<float>(v))); }

// The rule in float64, written from MLX's Metal kernel (mlx/backend/metal/kernels/quantized.h,
// affine_quantize): max starts at 0, the larger-magnitude extreme is the bias, the scale snapped
// so q0 = round(edge / scale) steps reach 0, round() halves away from zero, quants at most 15,
// scale and bias stored as fp16. Returns the dequantized group.
std::vector<double> mlx_rule_f64(const float* x, int group) {
  double mn = std::numeric_limits<float>::max(), mx = 0;
  for (int i = 0; i < group; ++i) mn = std::min(mn, static_cast<double>(x[i])), mx = std::max(mx, static_cast<double>(x[i]));
  double s = std::max((mx - mn) / 15.0, 1e-7);
  const bool side = std::fabs(mn) > std::fabs(mx);
  if (!side) s = -s;
  const double edge = side ? mn : mx, q0 = std::round(edge / s);
  double bias = 0;
  if (q0 != 0) s = edge / q0, bias = edge;
  std::vector<double> y(static_cast<size_t>(group));
  for (int i = 0; i < group; ++i) {
    const double q = std::clamp(std::round((x[i] - bias) / s), 0.0, 15.0);
    y[static_cast<size_t>(i)] = f16(s) * q + f16(bias);
  }
  return y;
}

std::vector<std::vector<float>> logits_of(const LlamaModel& m, const std::vector<int32_t>& toks) {
  SessionOptions o;
  o.n_ctx = 256;
  o.n_threads = 2;
  Session s(m, o);
  std::vector<std::vector<float>> out(toks.size());
  const int V = m.config().n_vocab;
  s.eval_all(toks, [&](size_t i, const float* l) { out[i].assign(l, l + V); });
  return out;
}

std::unique_ptr<LlamaModel> load_requantized(const std::string& path, const std::string& target, int64_t* size_change = nullptr) {
  return LlamaModel::load(path, [&](const GgufFile& f) {
    auto src = std::make_shared<RequantizedSource>(f, requantize_target_from_name(target), 2);
    if (size_change) *size_change = src->size_change();
    return src;
  });
}

// Mean KL(reference || model) over positions, and the share of positions with the same top token.
void divergence(const std::vector<std::vector<float>>& ref, const std::vector<std::vector<float>>& m, double& kl, double& same) {
  kl = 0, same = 0;
  for (size_t p = 0; p < ref.size(); ++p) {
    const auto lse = [](const std::vector<float>& l) {
      const double mx = *std::max_element(l.begin(), l.end());
      double s = 0;
      for (float v : l) s += std::exp(v - mx);
      return mx + std::log(s);
    };
    const double a = lse(ref[p]), b = lse(m[p]);
    for (size_t i = 0; i < ref[p].size(); ++i) {
      const double lp = ref[p][i] - a, lq = m[p][i] - b;
      kl += std::exp(lp) * (lp - lq);
    }
    same += std::max_element(ref[p].begin(), ref[p].end()) - ref[p].begin() == std::max_element(m[p].begin(), m[p].end()) - m[p].begin();
  }
  kl /= static_cast<double>(ref.size());
  same /= static_cast<double>(ref.size());
}

std::string tiny_model() { return test::source_path("tests/fixtures/qwen3vl/tiny/text.gguf"); }

// The first n tokens of an English text (tests/fixtures/english_text_2390.txt).
std::vector<int32_t> some_tokens(const LlamaModel& m, size_t n) {
  std::vector<int32_t> t = m.tokenizer().encode(test::read_file(test::source_path("tests/fixtures/english_text_2390.txt")), true);
  t.resize(std::min(t.size(), n));
  return t;
}

}  // namespace

// quantize→dequantize by MLX's rule, group 32 read back as Q4_1 blocks (by the kernels and by the
// test's own reading of ggml's Q4_1 layout: the nibble order) and group 64 as A4G64, equals the
// float64 statement of the rule element by element (up to the rare quant that fp32 and float64
// round to different sides of a half), for odd row counts and several groups per row; groups of
// only negative or only positive weights included (the rule's corners).
TEST(Requantize, MlxAffineRuleMatchesFloat64Reference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (int group : {32, 64})
    for (int64_t rows : {1, 3, 7})
      for (int64_t groups : {1, 2, 5}) {
        const int64_t n = groups * group;
        std::vector<float> x(static_cast<size_t>(rows * n));
        for (auto& v : x) v = nd(rng);
        // a group of negatives and one of positives in each row that has more than one group
        for (int64_t r = 0; r < rows && groups > 1; ++r)
          for (int i = 0; i < group; ++i) {
            float& a = x[static_cast<size_t>(r * n + i)];
            float& b = x[static_cast<size_t>(r * n + group + i)];
            a = -std::fabs(a) - 0.01f;
            b = std::fabs(b) + 0.02f;
          }
        const DType t = group == 64 ? DType::A4G64 : DType::Q4_1;
        const size_t rb = row_bytes(t, static_cast<uint64_t>(n));
        std::vector<uint8_t> q(rb * static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) quantize_row_mlx_affine(group, &x[static_cast<size_t>(r * n)], n, &q[static_cast<size_t>(r) * rb]);
        if (group == 64) {  // quantize_row(A4G64) is the same rule
          std::vector<uint8_t> q2(q.size());
          for (int64_t r = 0; r < rows; ++r) quantize_row(DType::A4G64, &x[static_cast<size_t>(r * n)], n, &q2[static_cast<size_t>(r) * rb]);
          ASSERT_EQ(q, q2);
        }
        int64_t off = 0;
        double err = 0, err_ref = 0;
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<float> y(static_cast<size_t>(n));
          std::vector<double> y64(static_cast<size_t>(n));
          dequantize_row(t, &q[static_cast<size_t>(r) * rb], y.data(), n);
          if (t == DType::Q4_1) test::dequantize_row_f64(t, &q[static_cast<size_t>(r) * rb], y64.data(), n);
          for (int64_t g = 0; g < groups; ++g) {
            const float* xg = &x[static_cast<size_t>(r * n + g * group)];
            const std::vector<double> ref = mlx_rule_f64(xg, group);
            for (int i = 0; i < group; ++i) {
              const size_t k = static_cast<size_t>(g * group + i);
              if (std::fabs(y[k] - ref[static_cast<size_t>(i)]) > 1e-6 * (1 + std::fabs(ref[static_cast<size_t>(i)]))) ++off;
              if (t == DType::Q4_1) { EXPECT_NEAR(y64[k], y[k], 1e-6 * (1 + std::fabs(y[k]))) << "nibble order, element " << k; }
              err += (y[k] - xg[i]) * static_cast<double>(y[k] - xg[i]);
              err_ref += (ref[static_cast<size_t>(i)] - xg[i]) * (ref[static_cast<size_t>(i)] - xg[i]);
            }
          }
        }
        EXPECT_LE(off, rows * n / 500) << "group " << group << ", " << rows << " rows of " << groups << " groups";
        EXPECT_NEAR(err, err_ref, 1e-3 * err_ref + 1e-12) << "group " << group << ", " << rows << " rows of " << groups << " groups";
      }
}

// The rule's corners, by hand: a group of only negative weights spans [min, 0] (MLX's GPU
// kernels start the max at 0), the larger-magnitude extreme is the bias, zero is exact.
TEST(Requantize, MlxAffineRuleCorners) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = -1.0f + 0.5f * static_cast<float>(i) / 31.0f;  // -1 .. -0.5
  float s, b;
  mlx_affine_scale_bias(x.data(), 32, s, b);
  EXPECT_FLOAT_EQ(b, -1.0f);
  EXPECT_FLOAT_EQ(s, 1.0f / 15.0f);  // (0 - (-1)) / 15, q0 = -15
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = -0.25f + static_cast<float>(i) / 31.0f;  // -0.25 .. 0.75
  mlx_affine_scale_bias(x.data(), 32, s, b);
  EXPECT_FLOAT_EQ(b, 0.75f);
  EXPECT_FLOAT_EQ(s, 0.75f / -11.0f);  // round(0.75 / -(1/15)) = -11
  std::vector<uint8_t> q(20);
  quantize_row_mlx_affine(32, x.data(), 32, q.data());
  std::vector<float> y(32);
  std::vector<float> zero(32, 0.0f);
  EXPECT_NO_THROW(quantize_row_mlx_affine(32, zero.data(), 32, q.data()));
  dequantize_row(DType::Q4_1, q.data(), y.data(), 32);
  for (float v : y) EXPECT_EQ(v, 0.0f);
  EXPECT_THROW(quantize_row_mlx_affine(48, x.data(), 32, q.data()), Error);
}

// Requantizing at load by ggml's Q4_1 rule gives the model `tessera convert --type q4_1` writes,
// bit for bit: the same tensors change (the token embedding too; norms and rows that are not
// whole blocks stay), with the same bytes, and the logits are identical; the size it reports is
// the converted file's up to the tensors' alignment.
TEST(Requantize, GgmlRuleEqualsConvertedFile) {
  for (const std::string& path : {tiny_model(), test::model_path()}) {
    if (!std::filesystem::exists(path)) continue;  // the default model: scripts/fetch_model.sh
    const auto f = GgufFile::open(path);
    for (DType to : {DType::Q4_1, DType::Q4_0}) {
      const std::string out =
          (std::filesystem::temp_directory_path() / ("tessera_requant_" + std::to_string(::getpid()) + ".gguf")).string();
      convert_gguf(*f, to, out);
      const auto converted = LlamaModel::load(out);
      const auto conv_file = GgufFile::open(out);
      int64_t change = 0;
      const auto requant = load_requantized(path, convert_type_name(to), &change);
      const int64_t conv_size = static_cast<int64_t>(std::filesystem::file_size(out));
      const int64_t est = static_cast<int64_t>(std::filesystem::file_size(path)) + change;
      EXPECT_LE(std::llabs(est - conv_size), static_cast<long long>(32 * f->tensors().size())) << path;
      RequantizedSource src(*f, requantize_target_from_name(convert_type_name(to)), 2);
      for (const GgufTensor& t : conv_file->tensors()) {
        const TensorView* v = src.find(t.name);
        ASSERT_NE(v, nullptr) << t.name;
        ASSERT_EQ(v->type, t.type) << t.name;
        ASSERT_EQ(std::memcmp(v->data, t.data, t.n_bytes), 0) << t.name;
      }
      const auto toks = some_tokens(*converted, 24);
      const auto a = logits_of(*converted, toks), b = logits_of(*requant, toks);
      for (size_t p = 0; p < toks.size(); ++p) ASSERT_EQ(std::memcmp(a[p].data(), b[p].data(), a[p].size() * 4), 0) << path << " position " << p;
      std::filesystem::remove(out);
    }
  }
}

// MLX's layouts at load: the matrices become A4G64 (rows of 64k) or Q4_1 blocks by MLX's rule
// (a4g32: not the bytes ggml's Q4_1 rule writes), norms and rows that are not whole groups stay;
// the logits are finite and close to the reference's: mean KL within twice ggml's Q4_0's (4.5
// bits per weight against 4.5 and 5) and under a bound about three times what these models show
// (64 tokens of English; tiny fixture: Q4_0 0.09, A4G64 0.11, A4G32 0.06; SmolLM2, requantized
// from its Q4_1 file: 0.40, 0.48, 0.37), a same-top rate well above chance, and not identical to
// the reference's (the weights did change).
TEST(Requantize, MlxLayoutsAreCloseToReference) {
  struct Case {
    std::string path;
    double max_kl, min_same;
  };
  for (const Case& c : {Case{tiny_model(), 0.3, 0.2}, Case{test::model_path(), 1.5, 0.3}}) {
    if (!std::filesystem::exists(c.path)) continue;
    const auto ref = LlamaModel::load(c.path);
    const auto toks = some_tokens(*ref, 64);
    const auto lr = logits_of(*ref, toks);
    const auto ggml_q41 = load_requantized(c.path, "q4_1");
    double kl_q40, same_q40;
    divergence(lr, logits_of(*load_requantized(c.path, "q4_0"), toks), kl_q40, same_q40);
    std::printf("%s q4_0 (ggml): mean KL %.5f, same top %.3f\n", c.path.c_str(), kl_q40, same_q40);
    for (const std::string target : {"a4g64", "a4g32"}) {
      const auto m = load_requantized(c.path, target);
      const DType want = target == "a4g64" ? DType::A4G64 : DType::Q4_1;
      const LlamaLayer& L = m->layers()[0];
      EXPECT_EQ(L.wq.type, want) << c.path;
      EXPECT_EQ(L.w_gate.type, want) << c.path;
      EXPECT_EQ(m->token_embd().type, want) << c.path;
      if (want == DType::A4G64 && L.w_down.cols % 64 != 0) { EXPECT_EQ(L.w_down.type, ref->layers()[0].w_down.type) << "rows not whole groups stay"; }
      EXPECT_EQ(L.attn_norm, ref->layers()[0].attn_norm);
      if (target == "a4g32") {
        EXPECT_NE(std::memcmp(L.wq.data, ggml_q41->layers()[0].wq.data, row_bytes(DType::Q4_1, L.wq.cols) * L.wq.rows), 0)
            << "MLX's rule, not ggml's";
      }
      const auto lm = logits_of(*m, toks);
      for (const auto& l : lm)
        for (float v : l) ASSERT_TRUE(std::isfinite(v));
      double kl, same;
      divergence(lr, lm, kl, same);
      std::printf("%s %s: mean KL %.5f, same top %.3f over %zu positions\n", c.path.c_str(), target.c_str(), kl, same, toks.size());
      EXPECT_GT(kl, 0.0);
      EXPECT_LT(kl, c.max_kl) << c.path << " " << target;
      EXPECT_LT(kl, 2 * kl_q40) << c.path << " " << target << ": against ggml's Q4_0 at fewer bits per weight";
      EXPECT_GE(same, c.min_same) << c.path << " " << target;
    }
  }
}

// Names: MLX's two and the convert types; another is an error naming the choices.
TEST(Requantize, TargetNames) {
  EXPECT_EQ(requantize_target_from_name("a4g64").type, DType::A4G64);
  EXPECT_TRUE(requantize_target_from_name("a4g32").mlx);
  EXPECT_EQ(requantize_target_from_name("a4g32").type, DType::Q4_1);
  EXPECT_FALSE(requantize_target_from_name("q4_1").mlx);
  EXPECT_THROW(requantize_target_from_name("a4g128"), Error);
  EXPECT_THROW(requantize_target_from_name(""), Error);
}
