// Qwen3-VL: preprocessing against transformers' processor (hashes from
// bench/reference/make_qwen3vl_preprocess_golden.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf_writer.h"
#include "image/image.h"
#include "kernels/bf16_tiles.h"
#include "kernels/f16_tiles.h"
#include "models/hf_loader.h"
#include "models/qwen3vl/preprocess.h"
#include "models/qwen3vl/qwen3vl.h"
#include "watch/qwen_watcher.h"
#include "npy.h"
#include "runtime/generate.h"
#include "runtime/session.h"
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

// --- the tiny seeded-random Qwen3-VL (bench/reference/make_qwen3vl_reference.py --config tiny),
// converted by llama.cpp's converter; goldens from transformers in float32 ---
namespace {
const std::string kTiny = "tests/fixtures/qwen3vl/tiny/";
std::string golden(const std::string& dir, const std::string& file) { return test::source_path(kTiny + "golden/" + dir + "/" + file); }

struct TinyQwen {
  std::unique_ptr<LlamaModel> text;
  std::unique_ptr<Qwen3VLVision> vision;
};
const TinyQwen& tiny() {
  static TinyQwen m{LlamaModel::load(test::source_path(kTiny + "text.gguf")), Qwen3VLVision::load_mmproj(test::source_path(kTiny + "mmproj.gguf"))};
  return m;
}

// max |got - want| / max |want|
double rel_err(const float* got, const float* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(static_cast<double>(got[i]) - want[i]));
    den = std::max(den, std::fabs(static_cast<double>(want[i])));
  }
  return num / den;
}

// KL(softmax(want) || softmax(got)) of one row of logits
double kl(const float* want, const float* got, size_t n) {
  double mw = -1e300, mg = -1e300, sw = 0, sg = 0, d = 0;
  for (size_t i = 0; i < n; ++i) mw = std::max(mw, static_cast<double>(want[i])), mg = std::max(mg, static_cast<double>(got[i]));
  for (size_t i = 0; i < n; ++i) sw += std::exp(want[i] - mw), sg += std::exp(got[i] - mg);
  for (size_t i = 0; i < n; ++i) {
    const double lp = want[i] - mw - std::log(sw), lq = got[i] - mg - std::log(sg);
    d += std::exp(lp) * (lp - lq);
  }
  return d;
}

SessionOptions f32_session() {
  SessionOptions o;
  o.kv_type = DType::F32;  // the reference keeps K/V in float32
  o.n_threads = 2;
  return o;
}
}  // namespace

// The decoder (QK-norm, GQA, head size 32 on a 64-wide model, NeoX rotation, tied head) on
// teacher-forced chat prompts: every position's logits.
TEST(Qwen3VL, TextLogitsMatchTransformers) {
  const LlamaModel& m = *tiny().text;
  EXPECT_TRUE(m.config().qk_norm);
  EXPECT_EQ(m.config().head_dim, 32);
  EXPECT_EQ(m.config().deepstack_layers, 3);
  for (const char* dir : {"text_0", "text_1", "text_2"}) {
    const std::vector<int64_t> ids64 = test::load_npy(golden(dir, "input_ids.npy")).i64();
    const test::Npy want = test::load_npy(golden(dir, "logits.npy"));
    const std::vector<float> wl = want.f32();
    const size_t V = want.shape[1];
    ASSERT_EQ(V, static_cast<size_t>(m.config().n_vocab));
    std::vector<int32_t> ids(ids64.begin(), ids64.end());
    Session s(m, f32_session());
    std::vector<float> got(ids.size() * V);
    s.eval_all(ids, [&](size_t i, const float* l) { std::copy_n(l, V, &got[i * V]); });
    double worst_kl = 0;
    for (size_t i = 0; i < ids.size(); ++i) worst_kl = std::max(worst_kl, kl(&wl[i * V], &got[i * V], V));
    EXPECT_LT(rel_err(got.data(), wl.data(), got.size()), 1e-4) << dir;
    EXPECT_LT(worst_kl, 1e-6) << dir;
  }
}

// The vision tower on a real screenshot: patch embedding + resampled positions, the first
// block, the merger and every DeepStack level.
TEST(Qwen3VL, VisionMatchesTransformers) {
  const Qwen3VLVision& v = *tiny().vision;
  const ImageRGB img = load_image(test::source_path("tests/fixtures/vision/screens/xterm_700x450.png"));
  ThreadPool two(2);
  const Qwen3VLPatches p = preprocess_qwen3vl(img, v.preprocess_config(), &two);
  const int n = p.n_tokens(v.preprocess_config()), W = v.out_row(), D = v.config().out_hidden;
  std::vector<float> out(static_cast<size_t>(n) * W), embeds, block0;
  v.encode(p, out.data(), two, &embeds, &block0);
  EXPECT_LT(rel_err(embeds.data(), test::load_npy(golden("xterm_700x450", "vision_block0_in.npy")).f32().data(), embeds.size()), 1e-5);
  EXPECT_LT(rel_err(block0.data(), test::load_npy(golden("xterm_700x450", "vision_block0_out.npy")).f32().data(), block0.size()), 1e-4);
  const auto level = [&](int k) {  // column block k of the output rows
    std::vector<float> col(static_cast<size_t>(n) * D);
    for (int i = 0; i < n; ++i) std::copy_n(&out[static_cast<size_t>(i) * W + static_cast<size_t>(k) * D], D, &col[static_cast<size_t>(i) * D]);
    return col;
  };
  const std::vector<float> merged = level(0);
  const test::Npy want = test::load_npy(golden("xterm_700x450", "merger_out.npy"));
  ASSERT_EQ(want.count(), merged.size());
  EXPECT_LT(rel_err(merged.data(), want.f32().data(), merged.size()), 1e-4);
  for (int k = 0; k < 3; ++k) {
    const std::vector<float> ds = level(1 + k);
    EXPECT_LT(rel_err(ds.data(), test::load_npy(golden("xterm_700x450", "deepstack_" + std::to_string(k) + ".npy")).f32().data(), ds.size()), 1e-4)
        << "DeepStack level " << k;
  }
}

// The whole image question: the processor's token ids (image pads as slots), get_rope_index's
// positions, and the next-token logits after DeepStack injection.
TEST(Qwen3VL, ImageQuestionMatchesTransformers) {
  const TinyQwen& m = tiny();
  Qwen3VL vlm(*m.text, *m.vision);
  ThreadPool two(2);
  for (const char* stem : {"xterm_700x450", "xterm_1280x720"}) {
    const ImageRGB img = load_image(test::source_path(std::string("tests/fixtures/vision/screens/") + stem + ".png"));
    const Qwen3VLPrompt ip = vlm.build(img, "What is the user doing?", two);
    const std::vector<int64_t> want_ids = test::load_npy(golden(stem, "input_ids.npy")).i64();
    const int32_t pad = m.text->tokenizer().find("<|image_pad|>");
    ASSERT_EQ(ip.tokens.size(), want_ids.size()) << stem;
    for (size_t i = 0; i < want_ids.size(); ++i)
      EXPECT_EQ(ip.tokens[i] == kEmbeddingSlot ? pad : ip.tokens[i], want_ids[i]) << stem << " token " << i;
    const std::vector<int64_t> pos = test::load_npy(golden(stem, "position_ids.npy")).i64();  // 3 x seq
    ASSERT_EQ(pos.size(), 3 * ip.positions.size());
    const size_t S = ip.positions.size();
    for (size_t i = 0; i < S; ++i) {
      EXPECT_EQ(ip.positions[i].t, pos[i]) << stem << " " << i;
      EXPECT_EQ(ip.positions[i].h, pos[S + i]) << stem << " " << i;
      EXPECT_EQ(ip.positions[i].w, pos[2 * S + i]) << stem << " " << i;
    }
    Session s(*m.text, f32_session());
    const size_t E = static_cast<size_t>(m.text->config().n_embd_inp());
    s.eval(ip.tokens, ip.embeddings.data(), ip.embeddings.size() / E, &ip.positions);
    const std::vector<float> want = test::load_npy(golden(stem, "logits_last.npy")).f32();
    const size_t V = static_cast<size_t>(m.text->config().n_vocab);
    ASSERT_EQ(want.size(), V);
    EXPECT_LT(rel_err(s.logits(), want.data(), V), 1e-4) << stem;
    EXPECT_LT(kl(want.data(), s.logits(), V), 1e-6) << stem;
  }
}

// The same model from its Hugging Face directory (safetensors, f16 weights that are exact in
// f16, the tokenizer.json with the Qwen2 split pattern): the same logits as the GGUF.
TEST(Qwen3VL, HfDirectoryMatchesGguf) {
  const HfModel hf = load_hf_dir(test::source_path(kTiny + "hf"));
  ASSERT_TRUE(hf.qwen_vision);
  EXPECT_EQ(hf.text->tokenizer().pre(), "qwen2");
  EXPECT_EQ(hf.text->config().mrope[1], 5);
  Qwen3VL vlm(*hf.text, *hf.qwen_vision);
  ThreadPool two(2);
  const ImageRGB img = load_image(test::source_path("tests/fixtures/vision/screens/xterm_700x450.png"));
  const Qwen3VLPrompt ip = vlm.build(img, "What is the user doing?", two);
  Session s(*hf.text, f32_session());
  s.eval(ip.tokens, ip.embeddings.data(), ip.embeddings.size() / static_cast<size_t>(hf.text->config().n_embd_inp()), &ip.positions);
  const std::vector<float> want = test::load_npy(golden("xterm_700x450", "logits_last.npy")).f32();
  EXPECT_LT(rel_err(s.logits(), want.data(), want.size()), 1e-4);
  EXPECT_EQ(hf.text->tokenizer().encode("Hello 2026 world's", false), tiny().text->tokenizer().encode("Hello 2026 world's", false));
}

// Hostile metadata in a Qwen3-VL pair: each number the loaders read is checked (an error, never a
// crash or a wrong-sized read).
TEST(Qwen3VL, HostileMetadataIsRefused) {
  const auto rewrite = [](const std::string& src, const std::string& key, const GgufValue* value, const std::string& out) {
    auto f = GgufFile::open(test::source_path(kTiny + src));
    GgufWriter w;
    for (const auto& [k, v] : f->metadata())
      if (k != key) w.set(k, v);
    if (value) w.set(key, *value);
    for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    w.write(out);
  };
  const std::string dir = ::testing::TempDir();
  struct Case {
    const char* file;
    const char* key;
    GgufValue value;
    bool remove;
  };
  const std::vector<Case> cases = {
      {"mmproj.gguf", "clip.vision.is_deepstack_layers", GgufValue::make_i32_array({1, 0}), false},   // not one per layer
      {"mmproj.gguf", "clip.vision.spatial_merge_size", GgufValue::make_u32(0), false},
      {"mmproj.gguf", "clip.vision.spatial_merge_size", GgufValue::make_u32(3), false},               // 2x2 tensors' shapes
      {"mmproj.gguf", "clip.vision.image_size", GgufValue::make_u32(100), false},                     // not a multiple of 16
      {"mmproj.gguf", "clip.vision.attention.head_count", GgufValue::make_u32(5), false},             // does not divide 32
      {"mmproj.gguf", "clip.vision.embedding_length", GgufValue::make_u32(1u << 31), false},
      {"mmproj.gguf", "clip.projector_type", GgufValue::make_string("idefics3"), false},
      {"text.gguf", "qwen3vl.rope.dimension_sections", GgufValue::make_i32_array({16, 16, 16, 0}), false},  // > head_dim / 2
      {"text.gguf", "qwen3vl.rope.dimension_sections", GgufValue::make_i32_array({-1, 5, 5, 0}), false},
      {"text.gguf", "qwen3vl.attention.key_length", GgufValue::make_u32(33), false},
      {"text.gguf", "qwen3vl.attention.key_length", GgufValue::make_u32(64), false},  // tensors are 32 per head
      {"text.gguf", "qwen3vl.n_deepstack_layers", GgufValue::make_u32(100), false},
      {"text.gguf", "qwen3vl.attention.head_count_kv", GgufValue::make_u32(3), false},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string out = dir + "/hostile_qwen_" + std::to_string(i++) + ".gguf";
    rewrite(c.file, c.key, c.remove ? nullptr : &c.value, out);
    const bool mmproj = std::string(c.file) == "mmproj.gguf";
    EXPECT_THROW(mmproj ? static_cast<void>(Qwen3VLVision::load_mmproj(out)) : static_cast<void>(LlamaModel::load(out)), Error)
        << c.file << " " << c.key;
  }
  // a text model whose DeepStack depth differs from the tower's cannot be paired with it
  const GgufValue two = GgufValue::make_u32(2);
  rewrite("text.gguf", "qwen3vl.n_deepstack_layers", &two, dir + "/qwen_ds2.gguf");
  const auto text = LlamaModel::load(dir + "/qwen_ds2.gguf");
  EXPECT_THROW(Qwen3VL(*text, *tiny().vision), Error);
  // positions that do not fit the prompt
  Session s(*tiny().text, f32_session());
  std::vector<MropePos> short_pos(2);
  EXPECT_THROW(s.eval({1, 2, 3}, nullptr, 0, &short_pos), Error);
}

// The published 2B configuration with seeded random weights, f16 GGUF, when
// bench/reference/make_qwen3vl_reference.py --config 2b has made it in .peers/qwen3vl-2b
// (4 GB; skipped elsewhere, e.g. in CI): the last 8 positions of three chat prompts, and a
// screenshot question's merger, DeepStack levels and next-token logits.
TEST(Qwen3VL, Full2BMatchesTransformers) {
  const std::string base = test::source_path(".peers/qwen3vl-2b/");
  if (!std::ifstream(base + "golden/xterm_700x450/logits_last.npy")) GTEST_SKIP() << "no " << base << " (make it with make_qwen3vl_reference.py --config 2b)";
  const auto text = LlamaModel::load(base + "text.gguf");
  const auto vision = Qwen3VLVision::load_mmproj(base + "mmproj.gguf");
  const size_t V = static_cast<size_t>(text->config().n_vocab);
  for (const char* dir : {"text_0", "text_1", "text_2"}) {
    const std::vector<int64_t> ids64 = test::load_npy(base + "golden/" + dir + "/input_ids.npy").i64();
    const std::vector<float> want = test::load_npy(base + "golden/" + dir + "/logits_last8.npy").f32();
    std::vector<int32_t> ids(ids64.begin(), ids64.end());
    Session s(*text, f32_session());
    std::vector<float> got(ids.size() * V);
    s.eval_all(ids, [&](size_t i, const float* l) { std::copy_n(l, V, &got[i * V]); });
    const float* last8 = &got[(ids.size() - 8) * V];
    double worst_kl = 0;
    for (size_t i = 0; i < 8; ++i) worst_kl = std::max(worst_kl, kl(&want[i * V], last8 + i * V, V));
    const double e = rel_err(last8, want.data(), 8 * V);
    std::printf("2B %s: logits rel err %.2e, worst KL %.2e\n", dir, e, worst_kl);
    EXPECT_LT(e, 1e-4) << dir;
    EXPECT_LT(worst_kl, 1e-4) << dir;
  }
  Qwen3VL vlm(*text, *vision);
  ThreadPool two(2);
  const std::string stem = "xterm_700x450";
  const Qwen3VLPrompt ip = vlm.build(load_image(test::source_path("tests/fixtures/vision/screens/" + stem + ".png")), "What is the user doing?", two);
  const int n = ip.grid_h * ip.grid_w / 4, D = vision->config().out_hidden, W = vision->out_row();
  for (int k = 0; k < 4; ++k) {
    std::vector<float> col(static_cast<size_t>(n) * D);
    for (int i = 0; i < n; ++i) std::copy_n(&ip.embeddings[static_cast<size_t>(i) * W + static_cast<size_t>(k) * D], D, &col[static_cast<size_t>(i) * D]);
    const std::string file = k == 0 ? "merger_out.npy" : "deepstack_" + std::to_string(k - 1) + ".npy";
    const double e = rel_err(col.data(), test::load_npy(base + "golden/" + stem + "/" + file).f32().data(), col.size());
    std::printf("2B %s %s: rel err %.2e\n", stem.c_str(), file.c_str(), e);
    EXPECT_LT(e, 1e-4) << file;
  }
  Session s(*text, f32_session());
  s.eval(ip.tokens, ip.embeddings.data(), ip.embeddings.size() / static_cast<size_t>(text->config().n_embd_inp()), &ip.positions);
  const std::vector<float> want = test::load_npy(base + "golden/" + stem + "/logits_last.npy").f32();
  const double e = rel_err(s.logits(), want.data(), V), k = kl(want.data(), s.logits(), V);
  std::printf("2B %s next-token logits: rel err %.2e, KL %.2e\n", stem.c_str(), e, k);
  EXPECT_LT(e, 1e-4);
  EXPECT_LT(k, 1e-4);
}

// The tiny tower switched to a 16-bit path by `use` (which must switch more than 20 matrices): its
// merger output's relative error against transformers' fp32 on a real screenshot.
double tiny_merger_err(int (Qwen3VLVision::*use)()) {
  auto v = Qwen3VLVision::load_mmproj(test::source_path(kTiny + "mmproj.gguf"));
  EXPECT_GT(((*v).*use)(), 20);
  ThreadPool two(2);
  const Qwen3VLPatches p = preprocess_qwen3vl(load_image(test::source_path("tests/fixtures/vision/screens/xterm_700x450.png")), v->preprocess_config(), &two);
  const int n = p.n_tokens(v->preprocess_config()), W = v->out_row(), D = v->config().out_hidden;
  std::vector<float> out(static_cast<size_t>(n) * W), merged(static_cast<size_t>(n) * D);
  v->encode(p, out.data(), two);
  for (int i = 0; i < n; ++i) std::copy_n(&out[static_cast<size_t>(i) * W], D, &merged[static_cast<size_t>(i) * D]);
  return rel_err(merged.data(), test::load_npy(golden("xterm_700x450", "merger_out.npy")).f32().data(), merged.size());
}

// The bf16 path (the CLI's default where bf16_gemm_fast()): every GEMM and the attention with
// inputs rounded to bf16; its distance from transformers' fp32 outputs on the tiny tower.
TEST(Qwen3VL, Bf16VisionStaysCloseToTransformers) {
  if (!bf16_gemm_available()) GTEST_SKIP() << "no AMX or AVX512-BF16 here";
  const double e = tiny_merger_err(&Qwen3VLVision::use_bf16_gemm);
  std::printf("bf16 vision: merger output rel err %.2e against transformers' fp32\n", e);
  EXPECT_LT(e, 3e-2);
  EXPECT_GT(e, 1e-6);  // it did run in bf16
}

// The fp16 path (the default where f16_gemm_fast(): Intel without AMX): fp16 inputs, fp16 chunk
// sums, closer than bf16.
TEST(Qwen3VL, F16VisionStaysCloseToTransformers) {
  if (!f16_gemm_available()) GTEST_SKIP() << "no AVX512-FP16 here";
  const double e = tiny_merger_err(&Qwen3VLVision::use_f16_gemm);
  std::printf("fp16 vision: merger output rel err %.2e against transformers' fp32\n", e);
  EXPECT_LT(e, 1e-2);
  EXPECT_GT(e, 1e-6);  // it did run in fp16
}

// A plain Qwen3 text GGUF (general.architecture "qwen3": the same decoder without multimodal
// sections or DeepStack): the tiny pair's text model relabelled gives the same logits on text.
TEST(Qwen3VL, Qwen3TextArchitectureLoads) {
  auto f = GgufFile::open(test::source_path(kTiny + "text.gguf"));
  GgufWriter w;
  for (const auto& [k, v] : f->metadata()) {
    if (k == "qwen3vl.rope.dimension_sections" || k == "qwen3vl.n_deepstack_layers") continue;
    const std::string key = k.rfind("qwen3vl.", 0) == 0 ? "qwen3." + k.substr(8) : k;
    w.set(key, k == "general.architecture" ? GgufValue::make_string("qwen3") : v);
  }
  for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  const std::string out = ::testing::TempDir() + "/qwen3_text.gguf";
  w.write(out);
  const auto m = LlamaModel::load(out);
  EXPECT_TRUE(m->config().qk_norm);
  EXPECT_EQ(m->config().deepstack_layers, 0);
  EXPECT_EQ(m->config().mrope[0] + m->config().mrope[1] + m->config().mrope[2], 0);
  const std::vector<int64_t> ids64 = test::load_npy(golden("text_0", "input_ids.npy")).i64();
  const std::vector<int32_t> ids(ids64.begin(), ids64.end());
  Session a(*m, f32_session()), b(*tiny().text, f32_session());
  a.eval(ids);
  b.eval(ids);
  const size_t V = static_cast<size_t>(m->config().n_vocab);
  EXPECT_TRUE(std::equal(a.logits(), a.logits() + V, b.logits()));  // text positions: the same rotation, bit for bit
  EXPECT_THROW(Qwen3VL(*m, *tiny().vision), Error);                  // no multimodal positions: not a Qwen3-VL text model
}

// Earlier turns before the image turn, as transformers' chat template renders a system prompt,
// a user turn and an assistant reply (the string below is its apply_chat_template output).
TEST(Qwen3VL, HistoryRendersAsTheChatTemplate) {
  const TinyQwen& m = tiny();
  Qwen3VL vlm(*m.text, *m.vision);
  ThreadPool two(2);
  const std::string history = apply_chat_template(*m.text, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}}, false);
  const ImageRGB img = load_image(test::source_path("tests/fixtures/vision/screens/xterm_700x450.png"));
  const Qwen3VLPrompt ip = vlm.build(img, "Q", two, 65536, 0, 0, history);
  std::string text;
  bool in_image = false;
  for (int32_t t : ip.tokens) {
    if (t == kEmbeddingSlot) {
      if (!in_image) text += "<|image_pad|>";
      in_image = true;
      continue;
    }
    in_image = false;
    text += m.text->tokenizer().token_to_piece(t, true);
  }
  EXPECT_EQ(text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Q<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ip.positions.front().t, 0);  // the history's text counts from 0; the image after it
}

// --- screen reuse (watch/qwen_watcher.h) ---
namespace {
// A copy of `img` with a w x h rectangle at (x, y) painted in `v` (a few typed characters).
ImageRGB painted(const ImageRGB& img, int x, int y, int w, int h, uint8_t v) {
  ImageRGB out = img;
  for (int r = y; r < y + h; ++r)
    for (int c = x; c < x + w; ++c)
      for (int ch = 0; ch < 3; ++ch) out.row(r)[3 * c + ch] = static_cast<uint8_t>(v + ch);
  return out;
}

std::vector<int> changed_blocks(const Qwen3VLPatches& a, const Qwen3VLPatches& b, int mm) {
  std::vector<int> out;
  const size_t span = static_cast<size_t>(mm) * a.row_size;
  for (size_t k = 0; k * span < a.pixels.size(); ++k)
    if (std::memcmp(&a.pixels[k * span], &b.pixels[k * span], span * sizeof(float))) out.push_back(static_cast<int>(k));
  return out;
}
}  // namespace

// Recording the gating state leaves the output bits alone; a gated pass over no block hands
// back the recorded output; over every block it is the full encoding up to the fp16 keys and
// values; over the blocks a small edit touched, close to the full encoding of the edited image.
TEST(Qwen3VL, GatedEncodingTracksTheFullEncoding) {
  const Qwen3VLVision& v = *tiny().vision;
  ThreadPool two(2);
  const ImageRGB a = load_image(test::source_path("tests/fixtures/vision/screens/xterm_700x450.png"));
  const ImageRGB b = painted(a, 200, 150, 40, 12, 30);
  const Qwen3VLPreprocessConfig pc = v.preprocess_config();
  const Qwen3VLPatches pa = preprocess_qwen3vl(a, pc, &two), pb = preprocess_qwen3vl(b, pc, &two);
  const size_t n = static_cast<size_t>(pa.n_tokens(pc)) * v.out_row();
  std::vector<float> plain(n), recorded(n), out(n), full_b(n);
  v.encode(pa, plain.data(), two);
  Qwen3VLVision::GateState st;
  v.encode(pa, recorded.data(), two, nullptr, nullptr, &st);
  ASSERT_EQ(std::memcmp(plain.data(), recorded.data(), n * 4), 0);
  EXPECT_GT(st.bytes(), 0u);
  v.encode_gated(pa, {}, st, out.data(), two);
  EXPECT_EQ(std::memcmp(plain.data(), out.data(), n * 4), 0);

  v.encode(pb, full_b.data(), two);
  const int mm = v.config().merge * v.config().merge;
  const std::vector<int> changed = changed_blocks(pa, pb, mm);
  const int blocks = pa.n_tokens(pc);
  ASSERT_GT(changed.size(), 0u);
  EXPECT_LT(changed.size() * 10, static_cast<size_t>(blocks)) << "a 40x12 edit touches few 32x32 blocks";
  Qwen3VLVision::GateState st2 = st;
  v.encode_gated(pb, changed, st2, out.data(), two);
  const double gated_err = rel_err(out.data(), full_b.data(), n), stale_err = rel_err(plain.data(), full_b.data(), n);
  EXPECT_LT(gated_err, 0.5 * stale_err) << "gating must recover most of the change";
  EXPECT_LT(gated_err, 0.05);
  std::vector<int> all(static_cast<size_t>(blocks));
  for (int i = 0; i < blocks; ++i) all[static_cast<size_t>(i)] = i;
  Qwen3VLVision::GateState st3 = st;
  v.encode_gated(pb, all, st3, out.data(), two);
  EXPECT_LT(rel_err(out.data(), full_b.data(), n), 1e-2) << "every block gated: only the fp16 K/V differ";
  // the state belongs to one grid; block lists must be increasing and in range
  const Qwen3VLPatches pc2 = preprocess_qwen3vl(crop(a, 0, 0, 640, 320), pc, &two);
  EXPECT_THROW(v.encode_gated(pc2, {}, st, out.data(), two), Error);
  EXPECT_THROW(v.encode_gated(pb, {3, 2}, st, out.data(), two), Error);
  EXPECT_THROW(v.encode_gated(pb, {blocks}, st, out.data(), two), Error);
}

// Exact reuse: frame after frame (a small edit, the same frame again, another size, back), the
// watcher's features, next-token logits and answer are bitwise a full recompute's, while it
// reuses the KV prefix and verifies the previous answer as a draft.
TEST(Qwen3VL, WatchExactReuseIsBitwiseTheFullRecompute) {
  const TinyQwen& m = tiny();
  const ImageRGB a = load_image(test::source_path("tests/fixtures/vision/screens/xterm_700x450.png"));
  const std::vector<ImageRGB> frames = {a, painted(a, 200, 150, 40, 12, 30), painted(a, 200, 150, 40, 12, 30),
                                        painted(a, 240, 150, 40, 12, 60), crop(a, 0, 0, 640, 320), a};
  WatchOptions o;
  o.n_predict = 8;
  WatchOptions fo = o;
  fo.reuse = false;
  Session s(*m.text, f32_session()), fs(*m.text, f32_session());
  Qwen3VLWatcher w(*m.text, *m.vision, s, o), full(*m.text, *m.vision, fs, fo);
  for (size_t i = 0; i < frames.size(); ++i) {
    const FrameResult r = w.process(frames[i]), f = full.process(frames[i]);
    const Divergence dv = Watcher::compare(r, f);
    EXPECT_TRUE(dv.bitwise_equal) << "frame " << i << " KL " << dv.next_token_kl;
    EXPECT_EQ(r.answer, f.answer) << i;
    EXPECT_EQ(r.frame_unchanged, i == 2) << i;
    if (i == 1 || i == 3) {
      EXPECT_GT(r.tokens_reused, 0) << i;  // the text before the image
      EXPECT_EQ(r.answer_drafted, o.n_predict) << i;  // the same answer: every token from the prompt's pass
    }
  }
}

// Approximate reuse: gated encoding and stale K/V for unchanged image tokens, measured against
// the full recompute on the tiny model (the 2B figures are in docs/qwen3vl.md).
TEST(Qwen3VL, WatchApproximateReuseStaysClose) {
  const TinyQwen& m = tiny();
  const ImageRGB a = load_image(test::source_path("tests/fixtures/vision/screens/xterm_700x450.png"));
  WatchOptions o;
  o.n_predict = 8;
  o.approx_gate = true;
  o.approx_kv = 0;
  WatchOptions fo;
  fo.n_predict = 8;
  fo.reuse = false;
  Session s(*m.text, f32_session()), fs(*m.text, f32_session());
  Qwen3VLWatcher w(*m.text, *m.vision, s, o), full(*m.text, *m.vision, fs, fo);
  for (int i = 0; i < 4; ++i) {
    const ImageRGB f = painted(a, 180 + 20 * i, 150, 20, 12, static_cast<uint8_t>(40 * i));
    const FrameResult r = w.process(f), fr = full.process(f);
    const Divergence dv = Watcher::compare(r, fr);
    if (i > 0) {
      EXPECT_EQ(r.tiles_gated, 1) << i;
      EXPECT_LT(r.encoder_work, 0.1) << i;
      EXPECT_GT(r.tokens_kept_stale, 0) << i;
    }
    EXPECT_LT(dv.next_token_kl, 1e-2) << i;
    EXPECT_LT(dv.emb_max_rel, 0.05) << i;
  }
  // past gate_max_fraction of the image gated since the last full encoding, a full one resets
  // the drift (here after about 5 merge blocks)
  WatchOptions tight = o;
  tight.gate_max_fraction = 5.5 / static_cast<double>(Qwen3VL(*m.text, *m.vision).image_tokens(a));
  Session s2(*m.text, f32_session());
  Qwen3VLWatcher w2(*m.text, *m.vision, s2, tight);
  int gated = 0, full_again = 0;
  for (int i = 0; i < 6; ++i) {
    const FrameResult r = w2.process(painted(a, 180 + 20 * i, 150, 20, 12, static_cast<uint8_t>(40 * i)));
    if (i > 0) (r.tiles_gated ? gated : full_again) += 1;
  }
  EXPECT_GT(gated, 0);
  EXPECT_GT(full_again, 0);
  WatchOptions bad = o;
  bad.approx_global = 2;
  EXPECT_THROW(Qwen3VLWatcher(*m.text, *m.vision, s, bad), Error);
}

// A draft answer verified in the prompt's pass: the same tokens, the same cache and the same
// rotary positions after it as decoding token by token, whether the draft is right, wrong
// from some token on, longer than the answer, or wrong from the start; for a text prompt and
// for an image prompt with multimodal positions.
TEST(Qwen3VL, DraftedDecodingIsBitwiseTokenByToken) {
  const TinyQwen& m = tiny();
  const LlamaModel& text = *m.text;
  ThreadPool two(2);
  const ImageRGB img = crop(load_image(test::source_path("tests/fixtures/vision/screens/xterm_700x450.png")), 0, 0, 256, 192);
  const Qwen3VLPrompt ip = Qwen3VL(text, *m.vision).build(img, "What is on the screen?", two);
  const std::vector<int32_t> chat = text.tokenizer().encode("<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n", true);
  const int n = 10;
  SamplerOptions greedy;
  greedy.temperature = 0;
  for (const bool image : {false, true}) {
    const std::vector<int32_t>& prompt = image ? ip.tokens : chat;
    const auto run = [&](const std::vector<int32_t>* draft, GenerateStats* st, std::vector<float>* after) {
      Session s(text, f32_session());
      Sampler sampler(greedy);
      std::vector<int32_t> toks;
      *st = generate(s, prompt, n, sampler, [](const std::string&) {}, &toks, image ? &ip.embeddings : nullptr, nullptr, nullptr,
                     image ? &ip.positions : nullptr, draft);
      EXPECT_EQ(s.n_past(), static_cast<int>(prompt.size()) + n);
      s.eval({chat[1]});  // the cache and the rotary position after the answer: one more token's logits
      after->assign(s.logits(), s.logits() + text.config().n_vocab);
      return toks;
    };
    GenerateStats st;
    std::vector<float> want_after, after;
    const std::vector<int32_t> want = run(nullptr, &st, &want_after);
    ASSERT_EQ(want.size(), static_cast<size_t>(n));
    EXPECT_EQ(st.draft_accepted, 0);
    std::vector<int32_t> wrong = want;
    wrong[5] = wrong[5] == 7 ? 8 : 7;
    std::vector<int32_t> longer = want;
    longer.insert(longer.end(), {1, 2, 3});
    const std::vector<int32_t> off = {want[0] == 7 ? 8 : 7};
    using Case = std::pair<const std::vector<int32_t>*, int>;
    for (const auto& [draft, accepted] : {Case{&want, n}, Case{&wrong, 5}, Case{&longer, n}, Case{&off, 0}}) {
      EXPECT_EQ(run(draft, &st, &after), want) << "image " << image;
      EXPECT_EQ(st.draft_accepted, accepted) << "image " << image;
      EXPECT_EQ(std::memcmp(after.data(), want_after.data(), after.size() * 4), 0) << "image " << image << " accepted " << accepted;
    }
  }
}
