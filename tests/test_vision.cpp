// The SmolVLM path against Hugging Face transformers (fixtures from
// bench/reference/make_smolvlm_reference.py on a tiny Idefics3 with seeded random weights):
// decoding and preprocessing pixel for pixel, encoder and connector outputs, prompt layout,
// final logits; plus bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/scratch_buffer.h"
#include "formats/gguf_writer.h"
#include "image/image.h"
#include "image/resize.h"
#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/f16_tiles.h"
#include "models/gguf_convert.h"
#include "models/hf_loader.h"
#include "models/smolvlm/idefics3.h"
#include "models/llama/llama.h"
#include "models/smolvlm/siglip.h"
#include "npy.h"
#include "runtime/session.h"
#include "sha256.h"
#include "test_util.h"
#include "models/smolvlm/preprocess.h"

using namespace tessera;

namespace {

// The committed tiny model, or (on demand) another reference output directory, such as the
// full-size one: TESSERA_VISION_FIXTURE=.peers/smolvlm-full (see bench/reference/README.md).
const std::string kTiny = [] {
  const char* e = std::getenv("TESSERA_VISION_FIXTURE");
  return e ? std::string(e) + "/" : std::string("tests/fixtures/vision/tiny/");
}();
bool has_golden(const std::string& stem) {
  return std::filesystem::exists(test::source_path(kTiny + "golden/" + stem + "/info.json"));
}
const std::string kScreens = "tests/fixtures/vision/screens/";

struct Case {
  std::string stem, file;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {{"xterm_1280x720", "xterm_1280x720.png"},
                                      {"xterm_700x450", "xterm_700x450.png"},
                                      {"xterm_700x450_rgba", "xterm_700x450_rgba.png"},
                                      {"xterm_1280x720_jpg", "xterm_1280x720.jpg"},
                                      {"desktop_1920x1080", "desktop_1920x1080.png"},
                                      {"chromium_1280x800", "chromium_1280x800.png"},
                                      {"xedit_1024x640", "xedit_1024x640.png"}};
  return c;
}

nlohmann::json info(const std::string& stem) {
  return nlohmann::json::parse(test::read_file(test::source_path(kTiny + "golden/" + stem + "/info.json")));
}
std::string golden(const std::string& stem, const std::string& file) { return test::source_path(kTiny + "golden/" + stem + "/" + file); }

std::vector<int> saved_tiles(const std::string& stem) {
  const auto rc = nlohmann::json::parse(test::read_file(golden(stem, "rows_cols.json")));
  if (rc.contains("tiles_saved")) return rc["tiles_saved"].get<std::vector<int>>();
  std::vector<int> all(rc["n_tiles"].get<size_t>());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return all;
}

std::vector<std::string> tile_hashes(const PreprocessedImage& pre) {
  std::vector<std::string> out;
  for (const ImageRGB& t : pre.tiles) {
    const size_t plane = static_cast<size_t>(t.width) * t.height;
    std::vector<uint8_t> chw(plane * 3);
    for (size_t i = 0; i < plane; ++i)
      for (int c = 0; c < 3; ++c) chw[c * plane + i] = t.pixels[3 * i + static_cast<size_t>(c)];
    out.push_back(test::sha256_hex(chw.data(), chw.size()));
  }
  return out;
}

struct TinyModels {
  std::unique_ptr<LlamaModel> text;
  std::unique_ptr<Idefics3Vision> vision;
};
const TinyModels& tiny() {
  static TinyModels m{LlamaModel::load(test::source_path(kTiny + "text.gguf")),
                      Idefics3Vision::load_mmproj(test::source_path(kTiny + "mmproj.gguf"))};
  return m;
}

double max_rel_err(const std::vector<float>& got, const float* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(static_cast<double>(got[i]) - want[i]));
    den = std::max(den, std::fabs(static_cast<double>(want[i])));
  }
  return num / den;
}

}  // namespace

// Incremental preprocessing: a frame that changed in rows [a, b) resampled only where those rows
// reach (each resize's vertical support, the tiles they fall in, the global image) gives every
// tile bitwise what the whole frame's preprocessing gives: bands at the top, the bottom, one row,
// across tile borders, one after another on the same state; with and without splitting, both
// arithmetics; a frame of another size or a state left invalid starts over.
TEST(Vision, IncrementalPreprocessingIsBitwiseTheWholeFrame) {
  ImageRGB img = load_image(test::source_path(kScreens + std::string("xterm_700x450.png")));
  std::mt19937 rng(5);
  ThreadPool two(2);
  for (bool split : {true, false})
    for (ResampleArithmetic arith : {ResampleArithmetic::Torch, ResampleArithmetic::Pillow}) {
      Idefics3PreprocessConfig cfg;
      cfg.split = split;
      cfg.arithmetic = arith;
      PreprocessState st;
      ImageRGB frame = img;
      EXPECT_EQ(tile_hashes(preprocess_idefics3_rows(frame, cfg, 0, frame.height, st, &two)), tile_hashes(preprocess_idefics3(frame, cfg)));
      const int H = frame.height;
      for (auto [a, b] : std::vector<std::pair<int, int>>{{0, 3}, {H - 1, H}, {200, 201}, {100, 260}, {37, 38}, {0, H}}) {
        for (int y = a; y < b; ++y)
          for (int x = 0; x < frame.width * 3; ++x) frame.row(y)[x] = static_cast<uint8_t>(rng());
        const PreprocessedImage& inc = preprocess_idefics3_rows(frame, cfg, a, b, st, &two);
        EXPECT_EQ(tile_hashes(inc), tile_hashes(preprocess_idefics3(frame, cfg)))
            << "rows " << a << ".." << b << (split ? " split" : " global only") << " " << static_cast<int>(arith);
      }
      st.valid = false;  // as a failed call leaves it: the next call computes everything
      EXPECT_EQ(tile_hashes(preprocess_idefics3_rows(img, cfg, 5, 6, st)), tile_hashes(preprocess_idefics3(img, cfg)));
    }
}

// Every tile of every test screen is bit-identical to transformers' default (torchvision)
// Idefics3ImageProcessor, and to the Pillow one with Pillow arithmetic.
TEST(Vision, PreprocessingIsPixelExactWithTransformers) {
  for (const Case& c : cases()) {
    if (!has_golden(c.stem)) continue;
    const ImageRGB img = load_image(test::source_path(kScreens + c.file));
    const nlohmann::json inf = info(c.stem);
    Idefics3PreprocessConfig cfg;
    const PreprocessedImage pre = preprocess_idefics3(img, cfg);
    const auto rc = nlohmann::json::parse(test::read_file(golden(c.stem, "rows_cols.json")));
    EXPECT_EQ(pre.rows, rc["rows"].get<int>()) << c.stem;
    EXPECT_EQ(pre.cols, rc["cols"].get<int>()) << c.stem;
    EXPECT_EQ(tile_hashes(pre), inf["tile_u8_sha256"].get<std::vector<std::string>>()) << c.stem << " (torchvision)";
    // the resampler's integer sums are the same bytes spread over threads and at every ISA level
    // (its row combination is built for AVX2 and AVX-512 besides the portable loop)
    ThreadPool two(2);
    const Isa before = active_isa();
    for (Isa isa : {Isa::Scalar, Isa::Avx2, before}) {
      set_isa_cap(isa);
      EXPECT_EQ(tile_hashes(preprocess_idefics3(img, cfg, &two)), inf["tile_u8_sha256"].get<std::vector<std::string>>())
          << c.stem << " (torchvision, 2 threads, " << isa_name(active_isa()) << ")";
    }
    set_isa_cap(before);
    // three threads: the horizontal pass's strips (image/resize.h) dealt to three slots in turn
    ThreadPool three(3);
    EXPECT_EQ(tile_hashes(preprocess_idefics3(img, cfg, &three)), inf["tile_u8_sha256"].get<std::vector<std::string>>())
        << c.stem << " (torchvision, 3 threads)";
    cfg.arithmetic = ResampleArithmetic::Pillow;
    EXPECT_EQ(tile_hashes(preprocess_idefics3(img, cfg)), inf["alt_tile_u8_sha256"].get<std::vector<std::string>>())
        << c.stem << " (Pillow)";
  }
}

// The resampler keeps its intermediate images across calls (core/scratch_buffer.h): after a
// larger resize of random pixels has left them full of other bytes, and after they were given
// back, every golden screen still gives the processor's tiles bit for bit.
TEST(Vision, ResamplerScratchLeavesNoTrace) {
  std::mt19937 rng(11);
  ImageRGB noise;
  noise.width = 2500, noise.height = 1700;
  noise.pixels.resize(static_cast<size_t>(noise.width) * noise.height * 3);
  for (uint8_t& v : noise.pixels) v = static_cast<uint8_t>(rng());
  ThreadPool two(2);
  for (const Case& c : cases()) {
    if (!has_golden(c.stem)) continue;
    const ImageRGB img = load_image(test::source_path(kScreens + c.file));
    const auto want = info(c.stem)["tile_u8_sha256"].get<std::vector<std::string>>();
    for (bool released : {false, true}) {
      (void)resize_like_pil(noise, 3000, 2100, ResampleFilter::Bicubic, ResampleArithmetic::Torch, &two);
      (void)resize_like_pil(noise, 1100, 900, ResampleFilter::Lanczos, ResampleArithmetic::Pillow);
      if (released) release_resize_scratch();
      EXPECT_EQ(tile_hashes(preprocess_idefics3(img, Idefics3PreprocessConfig{}, &two)), want)
          << c.stem << (released ? " (scratch given back)" : " (scratch reused)");
    }
  }
}

// The resampler against Pillow's and torchvision's own resizes (bench/reference/make_resize_golden.py)
// over sizes the screens do not reach: heights around the horizontal pass's 64-row strips and
// their tails, 1- and 2-pixel sides, up- and downscales, every filter and both arithmetics; the
// same bytes with no pool and with pools of 1, 2 and 3 threads (strips dealt to 1-3 slots), and
// when the output rows are made in three bands.
TEST(Vision, ResizeMatchesPillowAndTorchOverSizes) {
  const auto g = nlohmann::json::parse(test::read_file(test::source_path("tests/fixtures/vision/resize/golden.json")));
  ThreadPool one(1), two(2), three(3);
  int checked = 0;
  for (const auto& c : g["cases"]) {
    const int w = c["in"][0], h = c["in"][1], ow = c["out"][0], oh = c["out"][1];
    const uint32_t seed = c["seed"].get<uint32_t>();
    ImageRGB in;
    in.width = w, in.height = h;
    in.pixels.resize(static_cast<size_t>(w) * h * 3);
    for (size_t i = 0; i < in.pixels.size(); ++i) {  // the generator's hash of each byte index
      uint32_t x = (static_cast<uint32_t>(i) + seed * 0x01000193u) * 0x9E3779B1u;
      x ^= x >> 15, x *= 0x85EBCA77u, x ^= x >> 13;
      in.pixels[i] = static_cast<uint8_t>(x >> 24);
    }
    const std::string f = c["filter"];
    const ResampleFilter filter = f == "lanczos" ? ResampleFilter::Lanczos : f == "bicubic" ? ResampleFilter::Bicubic : ResampleFilter::Bilinear;
    const ResampleArithmetic arith = c["arithmetic"] == "torch" ? ResampleArithmetic::Torch : ResampleArithmetic::Pillow;
    const std::string want = c["sha256"], what = c.dump();
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &one, &two, &three}) {
      const ImageRGB out = resize_like_pil(in, ow, oh, filter, arith, pool);
      EXPECT_EQ(test::sha256_hex(out.pixels.data(), out.pixels.size()), want) << what << " threads " << (pool ? pool->size() : 0);
    }
    ImageRGB bands;
    bands.width = ow, bands.height = oh;
    bands.pixels.assign(static_cast<size_t>(ow) * oh * 3, 0);
    const int b1 = oh / 3, b2 = oh - oh / 4;
    for (auto [a, b] : {std::pair{0, b1}, std::pair{b1, b2}, std::pair{b2, oh}}) resize_rows_like_pil(in, bands, a, b, filter, arith, &two);
    EXPECT_EQ(test::sha256_hex(bands.pixels.data(), bands.pixels.size()), want) << what << " in bands";
    ++checked;
  }
  EXPECT_EQ(checked, 75);
}

// A scratch buffer grows, keeps its block while requests fit, gives it back, and turns an
// impossible size into a one-line error.
TEST(Vision, ScratchBufferGrowsAndFailsCleanly) {
  ScratchBuffer b;
  EXPECT_EQ(b.capacity(), 0u);
  uint8_t* p = b.get(100, "test");
  ASSERT_NE(p, nullptr);
  EXPECT_GE(b.capacity(), 100u);
  p[0] = 7, p[99] = 9;
  EXPECT_EQ(b.get(50, "test"), p);  // fits: the same block, contents kept
  EXPECT_EQ(p[99], 9);
  uint8_t* q = b.get(b.capacity() + 1, "test");
  ASSERT_NE(q, nullptr);
  q[b.capacity() - 1] = 1;  // the whole capacity is writable
  b.release();
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_THROW(b.get(SIZE_MAX - 10, "test"), Error);
  EXPECT_THROW(b.get(size_t{1} << 41, "test"), Error);
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_NE(b.get(10, "test"), nullptr);  // usable after a failure
}

TEST(Vision, NormalisedPixelsMatchTheProcessorFormula) {
  const ImageRGB img = load_image(test::source_path(kScreens + "xterm_1280x720.png"));
  const PreprocessedImage pre = preprocess_idefics3(img, {});
  std::vector<float> chw(3 * 512 * 512);
  const std::string full = golden("xterm_1280x720", "pixel_values.npy");
  if (std::filesystem::exists(full)) {  // every tile as float32 [n][3][512][512]
    const std::vector<float> want = test::load_npy(full).f32();
    ASSERT_EQ(want.size(), pre.tiles.size() * chw.size());
    double maxd = 0;
    for (size_t t = 0; t < pre.tiles.size(); ++t) {
      tile_to_chw(pre.tiles[t], {}, chw.data());
      for (size_t i = 0; i < chw.size(); ++i) maxd = std::max(maxd, std::fabs(static_cast<double>(chw[i]) - want[t * chw.size() + i]));
    }
    std::printf("pixel_values: max |diff| over %zu tiles = %g\n", pre.tiles.size(), maxd);
    EXPECT_EQ(maxd, 0.0);
    return;
  }
  const test::Npy u8 = test::load_npy(golden("xterm_1280x720", "pixel_values_u8.npy"));  // global tile, CHW
  tile_to_chw(pre.tiles.back(), {}, chw.data());
  for (size_t i = 0; i < chw.size(); ++i) {
    const float want = (static_cast<float>(u8.bytes[i]) - 127.5f) / 127.5f;  // the processor's float32 result
    ASSERT_EQ(chw[i], want) << i;
  }
}

// Encoder (post-layernorm) and connector outputs within relative error 1e-4 of transformers'.
TEST(Vision, EncoderAndConnectorMatchTransformers) {
  const TinyModels& m = tiny();
  ThreadPool pool(2);
  const ImageRGB img = load_image(test::source_path(kScreens + "xterm_1280x720.png"));
  const PreprocessedImage pre = preprocess_idefics3(img, m.vision->preprocess_config());
  const SiglipConfig& c = m.vision->config();
  const test::Npy enc = test::load_npy(golden("xterm_1280x720", "encoder_out.npy"));
  const test::Npy con = test::load_npy(golden("xterm_1280x720", "connector_out.npy"));
  const std::vector<float> enc_want = enc.f32(), con_want = con.f32();
  const std::vector<int> saved = saved_tiles("xterm_1280x720");  // compact fixtures keep tiles 0 and 12
  const size_t ne = static_cast<size_t>(c.n_patches()) * c.hidden, nc = static_cast<size_t>(c.tokens_per_tile()) * c.text_hidden;
  for (size_t s = 0; s < saved.size(); ++s) {
    std::vector<float> chw(3 * static_cast<size_t>(c.image_size) * c.image_size), e(ne), o(nc);
    tile_to_chw(pre.tiles[static_cast<size_t>(saved[s])], m.vision->preprocess_config(), chw.data());
    m.vision->encode_tile(chw.data(), e.data(), pool);
    m.vision->connector(e.data(), o.data(), pool);
    const double re = max_rel_err(e, enc_want.data() + s * ne, ne), rc = max_rel_err(o, con_want.data() + s * nc, nc);
    std::printf("tile %d: encoder max rel err %.2e, connector max rel err %.2e\n", saved[s], re, rc);
    EXPECT_LE(re, 1e-4);
    EXPECT_LE(rc, 1e-4);
  }
}

// The prompt layout (token ids, image positions) equals the Idefics3Processor's, and the final
// next-token distribution is within KL 1e-4 of transformers'.
TEST(Vision, PromptAndLogitsMatchTransformers) {
  const TinyModels& m = tiny();
  Idefics3 vlm(*m.text, *m.vision);
  const int32_t image_id = m.text->tokenizer().find("<image>");
  ASSERT_GE(image_id, 0);
  for (const Case& c : cases()) {
    if (!has_golden(c.stem)) continue;
    SessionOptions so;
    so.n_ctx = 2048;
    so.n_threads = 2;
    Session s(*m.text, so);
    const ImageRGB img = load_image(test::source_path(kScreens + c.file));
    ImagePrompt p = vlm.build(img, "What is the user doing?", s.pool(), nullptr);
    const std::vector<int64_t> want_ids = test::load_npy(golden(c.stem, "input_ids.npy")).i64();
    std::vector<int64_t> ids(p.tokens.begin(), p.tokens.end());
    for (auto& t : ids)
      if (t == kEmbeddingSlot) t = image_id;
    EXPECT_EQ(ids, want_ids) << c.stem;
    s.eval(p.tokens, p.embeddings.data(), p.embeddings.size() / static_cast<size_t>(m.text->config().n_embd));
    const int V = m.text->config().n_vocab;
    std::vector<double> lo(static_cast<size_t>(V));
    double mx = -1e300, sum = 0;
    for (int i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(s.logits()[i]));
    for (int i = 0; i < V; ++i) sum += std::exp(s.logits()[i] - mx);
    for (int i = 0; i < V; ++i) lo[static_cast<size_t>(i)] = s.logits()[i] - mx - std::log(sum);
    const std::string full = golden(c.stem, "logits_last.npy");
    if (std::filesystem::exists(full)) {
      const std::vector<float> ref = test::load_npy(full).f32();
      double rmx = -1e300, rsum = 0, kl = 0;
      for (float v : ref) rmx = std::max(rmx, static_cast<double>(v));
      for (float v : ref) rsum += std::exp(v - rmx);
      for (int i = 0; i < V; ++i) {
        const double lr = ref[static_cast<size_t>(i)] - rmx - std::log(rsum);
        kl += std::exp(lr) * (lr - lo[static_cast<size_t>(i)]);
      }
      std::printf("%s: KL(transformers || tessera) = %.3g\n", c.stem.c_str(), kl);
      EXPECT_LE(kl, 1e-4) << c.stem;
    } else {  // compact fixtures keep the top 64 logits: compare those
      const std::vector<float> top = test::load_npy(golden(c.stem, "logits_last_top64.npy")).f32();
      const std::vector<int64_t> top_ids = test::load_npy(golden(c.stem, "logits_last_top64_ids.npy")).i64();
      double maxd = 0;
      for (size_t i = 0; i < top.size(); ++i)
        maxd = std::max(maxd, std::fabs(static_cast<double>(s.logits()[top_ids[i]]) - top[i]));
      std::printf("%s: max |logit diff| over transformers' top 64 = %.3g\n", c.stem.c_str(), maxd);
      EXPECT_LE(maxd, 1e-3) << c.stem;
      EXPECT_EQ(std::max_element(s.logits(), s.logits() + V) - s.logits(), top_ids[0]) << c.stem;
    }
  }
}

// The Hugging Face directory (config.json, model.safetensors saved by transformers in f16 --
// lossless for these weights --, tokenizer.json) gives the same prompt and the same next-token
// distribution as llama.cpp's GGUF conversion of it.
TEST(Vision, HfDirectoryAndGgufLoadersAgree) {
  const TinyModels& g = tiny();
  const HfModel h = load_hf_dir(test::source_path(kTiny + "hf"));
  ASSERT_TRUE(h.vision);
  EXPECT_EQ(h.text->config().n_vocab, g.text->config().n_vocab);
  EXPECT_EQ(h.vision->preprocess_config().longest_edge, 2048);
  const ImageRGB img = load_image(test::source_path(kScreens + "xterm_700x450.png"));
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<int32_t>> prompts;
  for (const auto* pair : {&g, static_cast<const TinyModels*>(nullptr)}) {
    const LlamaModel& text = pair ? *pair->text : *h.text;
    const Idefics3Vision& vision = pair ? *pair->vision : *h.vision;
    SessionOptions so;
    so.n_ctx = 2048;
    Session s(text, so);
    Idefics3 vlm(text, vision);
    ImagePrompt p = vlm.build(img, "What is the user doing?", s.pool(), nullptr);
    prompts.push_back(p.tokens);
    s.eval(p.tokens, p.embeddings.data(), p.embeddings.size() / static_cast<size_t>(text.config().n_embd));
    logits.emplace_back(s.logits(), s.logits() + text.config().n_vocab);
  }
  EXPECT_EQ(prompts[0], prompts[1]);
  double maxd = 0;
  for (size_t i = 0; i < logits[0].size(); ++i) maxd = std::max(maxd, std::fabs(static_cast<double>(logits[0][i]) - logits[1][i]));
  std::printf("GGUF vs HF directory: max |logit diff| %.3g\n", maxd);
  EXPECT_LE(maxd, 1e-4);
  const std::vector<float> top = test::load_npy(golden("xterm_700x450", "logits_last_top64.npy")).f32();
  const std::vector<int64_t> top_ids = test::load_npy(golden("xterm_700x450", "logits_last_top64_ids.npy")).i64();
  for (size_t i = 0; i < top.size(); ++i) EXPECT_NEAR(logits[1][static_cast<size_t>(top_ids[i])], top[i], 1e-3);
}

// The first tile of the xterm screenshot that the golden fixtures keep, as the encoder's input.
std::vector<float> first_golden_tile(const Idefics3Vision& v) {
  const SiglipConfig& c = v.config();
  const PreprocessedImage pre = preprocess_idefics3(load_image(test::source_path(kScreens + "xterm_1280x720.png")),
                                                    v.preprocess_config());
  std::vector<float> chw(3 * static_cast<size_t>(c.image_size) * c.image_size);
  tile_to_chw(pre.tiles[static_cast<size_t>(saved_tiles("xterm_1280x720")[0])], v.preprocess_config(), chw.data());
  return chw;
}

// The connector output of one tile encoded at 1, 2 and 3 threads (and, if asked, the last run's
// encoder output): every path must give the same bits whatever the thread count.
std::vector<std::vector<float>> connector_at_1_2_3_threads(const Idefics3Vision& v, const std::vector<float>& chw,
                                                           std::vector<float>* encoded = nullptr) {
  const SiglipConfig& c = v.config();
  std::vector<float> e(static_cast<size_t>(c.n_patches()) * c.hidden);
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> o(static_cast<size_t>(c.tokens_per_tile()) * c.text_hidden);
    v.encode_tile(chw.data(), e.data(), pool);
    v.connector(e.data(), o.data(), pool);
    outs.push_back(o);
  }
  if (encoded) *encoded = e;
  return outs;
}

// The tile encoded in full (recording its state), then re-encoded gated with every patch
// "changed": the two must be the same bits. Returns the full encoding.
std::vector<float> gated_all_equals_full(const Idefics3Vision& v, const std::vector<float>& chw) {
  const SiglipConfig& c = v.config();
  const size_t ne = static_cast<size_t>(c.n_patches()) * c.hidden;
  ThreadPool pool(2);
  Idefics3Vision::TileState st;
  std::vector<float> full(ne), gated(ne);
  v.encode_tile(chw.data(), full.data(), pool, &st);
  std::vector<int> all(static_cast<size_t>(c.n_patches()));
  for (int i = 0; i < c.n_patches(); ++i) all[static_cast<size_t>(i)] = i;
  v.encode_tile_gated(chw.data(), all, st, gated.data(), pool);
  EXPECT_EQ(gated, full);
  return full;
}

// A quantized mmproj (Q8_0 matrices, as ggml-org ships SmolVLM's) with --q8-activations: its
// linear layers run on 8-bit activations (matmul_q8), as llama.cpp's CPU backend runs them. The
// result stays close to transformers' (quantization error only), is bitwise the same for any
// thread count, and a float mmproj has nothing to switch.
TEST(Vision, QuantizedMmprojRunsOn8BitActivations) {
  const std::string dir = std::filesystem::temp_directory_path() / "tessera_mmproj_q8_test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/mmproj-q8_0.gguf";
  convert_gguf(*GgufFile::open(test::source_path(kTiny + "mmproj.gguf")), DType::Q8_0, path);  // `tessera convert`
  auto fp = Idefics3Vision::load_mmproj(path);  // Q8_0 weights, fp32 activations (the GEMM)
  auto q8 = Idefics3Vision::load_mmproj(path);
  EXPECT_EQ(q8->use_q8_activations(), 2 * 6 + 1);  // q k v o fc1 fc2 per layer + the projection
  EXPECT_EQ(q8->use_q8_activations(), 0);          // already switched
  EXPECT_EQ(Idefics3Vision::load_mmproj(test::source_path(kTiny + "mmproj.gguf"))->use_q8_activations(), 0);

  const SiglipConfig& c = q8->config();
  const size_t ne = static_cast<size_t>(c.n_patches()) * c.hidden, nc = static_cast<size_t>(c.tokens_per_tile()) * c.text_hidden;
  const std::vector<float> chw = first_golden_tile(*q8);
  const std::vector<float> con_want = test::load_npy(golden("xterm_1280x720", "connector_out.npy")).f32();
  std::vector<float> e_fp(ne), o_fp(nc);
  {
    ThreadPool pool(2);
    fp->encode_tile(chw.data(), e_fp.data(), pool);
    fp->connector(e_fp.data(), o_fp.data(), pool);
  }
  const std::vector<std::vector<float>> outs = connector_at_1_2_3_threads(*q8, chw);
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
  const double r_fp = max_rel_err(o_fp, con_want.data(), nc), r_q8 = max_rel_err(outs[0], con_want.data(), nc);
  const double r_between = max_rel_err(outs[0], o_fp.data(), nc);
  std::printf("connector max rel err vs transformers: Q8_0 weights %.2e, + 8-bit activations %.2e (%.2e between)\n", r_fp,
              r_q8, r_between);
  EXPECT_GT(r_between, 0.0);   // the activations really were quantized
  EXPECT_LE(r_fp, 2e-2);       // Q8_0 weights alone
  EXPECT_LE(r_q8, 4e-2);       // plus 8-bit activations (docs/numerics.md)
  EXPECT_STREQ(q8->precision(), "int8+fp32");
  EXPECT_STREQ(fp->precision(), "fp32");

  // The full tile quantizes the normed rows once for q, k and v together (matmul_q8_group); the
  // gated path runs three separate calls. Re-encoding every patch must give the same bits, on the
  // fp32 attention and, where it exists, with the bf16 attention too (the CLI's default on AMD
  // Zen 4: a Q8_0 mmproj's layers on 8-bit activations, the attention bf16).
  const auto gated_all_is_full = [&](const Idefics3Vision& v) { return gated_all_equals_full(v, chw); };
  const std::vector<float> e_q8 = gated_all_is_full(*q8);
  if (!bf16_gemm_available()) return;
  auto mixed = Idefics3Vision::load_mmproj(path);
  // the Q8_0 matrices' file pages are given back once their q8 panels exist, and counted (a
  // memory plan takes the file less these)
  const size_t released_at_load = mixed->released_file_bytes();
  size_t q8_bytes = 0;
  const std::unique_ptr<GgufFile> file = GgufFile::open(path);  // held: the loop reads its tensors
  for (const GgufTensor& t : file->tensors())
    if (t.type == DType::Q8_0) q8_bytes += t.n_bytes;
  EXPECT_EQ(mixed->use_q8_activations(), 2 * 6 + 1);
  EXPECT_EQ(mixed->released_file_bytes() - released_at_load, q8_bytes);
  EXPECT_EQ(mixed->use_bf16_gemm(), 1);  // only the F16 patch embedding is left for the bf16 GEMM
  EXPECT_STREQ(mixed->precision(), "int8+bf16");
  const std::vector<float> e_mixed = gated_all_is_full(*mixed);
  EXPECT_NE(e_mixed, e_q8);  // the attention really was bf16
  {
    // the recorded state keeps the bf16 attention's packed K/V (half of fp32's bytes), packed by
    // the attention from the 8-bit path's fp32 q/k/v; a scattered subset of patches re-encoded
    // over it gives the full encoding's bits
    ThreadPool pool(2);
    Idefics3Vision::TileState st;
    std::vector<float> full(ne), gated(ne);
    mixed->encode_tile(chw.data(), full.data(), pool, &st);
    EXPECT_EQ(full, e_mixed);
    EXPECT_TRUE(st.k.empty());
    const Bf16AttnDims D = bf16_attn_dims(tile_attention_shape(c), c.n_patches());
    EXPECT_EQ(st.k16.size(), static_cast<size_t>(c.layers * bf16_attn_k_elems(D)));
    EXPECT_EQ(st.v16.size(), static_cast<size_t>(c.layers * bf16_attn_v_elems(D)));
    std::vector<int> some;
    for (int i = c.n_patches() - 1; i >= 0; i -= 5) some.push_back(i);
    mixed->encode_tile_gated(chw.data(), some, st, gated.data(), pool);
    EXPECT_EQ(gated, full);
  }
  const std::vector<std::vector<float>> mo = connector_at_1_2_3_threads(*mixed, chw);
  EXPECT_EQ(mo[0], mo[1]);
  EXPECT_EQ(mo[0], mo[2]);
  const double r_mixed = max_rel_err(mo[0], con_want.data(), nc);
  std::printf("8-bit activations with the bf16 attention: connector max rel err %.2e vs transformers\n", r_mixed);
  EXPECT_LE(r_mixed, 4e-2);
}

// A float mmproj quantized to Q8_0 at load (--q8-vision; the CLI's default on Zen 4) is the file
// `tessera convert --type q8_0` writes, run on 8-bit activations: the same bits at 1/2/3 threads,
// at the scalar level (whose twin reads the blocks back from the panels: no rows are kept), in
// the gated re-encoding, and with the bf16 attention. The patch embedding stays float, as convert
// keeps it; nothing is switched twice; the file's pages are counted as given back only once.
TEST(Vision, FloatMmprojQuantizedAtLoadIsTheConvertedFile) {
  const std::string dir = std::filesystem::temp_directory_path() / "tessera_mmproj_q8_at_load_test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/mmproj-q8_0.gguf";
  const std::string f32 = test::source_path(kTiny + "mmproj.gguf");
  convert_gguf(*GgufFile::open(f32), DType::Q8_0, path);
  auto file = Idefics3Vision::load_mmproj(path);
  ASSERT_EQ(file->use_q8_activations(), 2 * 6 + 1);
  auto at_load = Idefics3Vision::load_mmproj(f32);
  const size_t released = at_load->released_file_bytes();
  {
    ThreadPool pool(2);
    EXPECT_EQ(at_load->quantize_to_q8_0(pool), 2 * 6 + 1);  // q k v o fc1 fc2 per layer + the projection
    EXPECT_EQ(at_load->quantize_to_q8_0(pool), 0);
    EXPECT_EQ(file->quantize_to_q8_0(pool), 0);  // a quantized file has no float layer left but the patch
  }
  EXPECT_EQ(at_load->quantized_at_load(), 2 * 6 + 1);
  EXPECT_EQ(at_load->released_file_bytes(), released);
  EXPECT_STREQ(at_load->precision(), "int8+fp32");
  EXPECT_EQ(at_load->use_q8_activations(), 0);
  // loaded so (the CLI's way): the float layers never get fp32-GEMM panels, the same pages are
  // given back, the same panels result
  auto direct = Idefics3Vision::load_mmproj(f32, true);
  EXPECT_EQ(direct->quantized_at_load(), 2 * 6 + 1);
  EXPECT_EQ(direct->released_file_bytes(), released);
  EXPECT_EQ(direct->packed_bytes(), at_load->packed_bytes());

  const std::vector<float> chw = first_golden_tile(*at_load);
  const std::vector<std::vector<float>> want = connector_at_1_2_3_threads(*file, chw);
  const std::vector<std::vector<float>> got = connector_at_1_2_3_threads(*at_load, chw);
  EXPECT_EQ(connector_at_1_2_3_threads(*direct, chw)[1], want[0]);
  EXPECT_EQ(got[0], want[0]);
  EXPECT_EQ(got[1], want[0]);
  EXPECT_EQ(got[2], want[0]);
  const Isa before = active_isa();
  set_isa_cap(Isa::Scalar);
  const std::vector<std::vector<float>> scalar = connector_at_1_2_3_threads(*at_load, chw);
  set_isa_cap(before);
  EXPECT_EQ(scalar[0], want[0]);

  const auto gated_all = [&](const Idefics3Vision& v) { return gated_all_equals_full(v, chw); };
  EXPECT_EQ(gated_all(*at_load), gated_all(*file));
  if (!bf16_gemm_available()) return;
  EXPECT_EQ(at_load->use_bf16_gemm(), 1);  // the patch embedding
  EXPECT_EQ(file->use_bf16_gemm(), 1);
  EXPECT_STREQ(at_load->precision(), "int8+bf16");
  EXPECT_EQ(gated_all(*at_load), gated_all(*file));
  EXPECT_EQ(connector_at_1_2_3_threads(*at_load, chw)[1], connector_at_1_2_3_threads(*file, chw)[1]);
}

// The tiny tower's first golden tile through v (already switched to a lower-precision path):
// the encoder output, and the encoder's and connector's max relative errors against transformers'
// fp32, after checking the connector's bits at 1, 2 and 3 threads.
struct TinyTileErrors {
  std::vector<float> chw, enc;
  double encoder = 0, connector = 0;
};
// The tiny tower switched by `use` (which must switch every one of its 14 matrices, and none the
// second time), or, where `available` is false, null after checking that `use` is a clear error.
std::unique_ptr<Idefics3Vision> tiny_switched(int (Idefics3Vision::*use)(), bool available) {
  auto v = Idefics3Vision::load_mmproj(test::source_path(kTiny + "mmproj.gguf"));
  if (!available) {
    EXPECT_THROW(((*v).*use)(), Error);
    return nullptr;
  }
  EXPECT_EQ(((*v).*use)(), 1 + 2 * 6 + 1);  // patch embedding, q k v o fc1 fc2 per layer, projection
  EXPECT_EQ(((*v).*use)(), 0);              // already switched
  return v;
}

TinyTileErrors tiny_tile_errors(const Idefics3Vision& v) {
  const SiglipConfig& c = v.config();
  const size_t ne = static_cast<size_t>(c.n_patches()) * c.hidden, nc = static_cast<size_t>(c.tokens_per_tile()) * c.text_hidden;
  TinyTileErrors r;
  r.chw = first_golden_tile(v);
  const std::vector<float> enc_want = test::load_npy(golden("xterm_1280x720", "encoder_out.npy")).f32();
  const std::vector<float> con_want = test::load_npy(golden("xterm_1280x720", "connector_out.npy")).f32();
  const std::vector<std::vector<float>> outs = connector_at_1_2_3_threads(v, r.chw, &r.enc);
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
  r.encoder = max_rel_err(r.enc, enc_want.data(), ne), r.connector = max_rel_err(outs[0], con_want.data(), nc);
  return r;
}

// The opt-in bf16 GEMM and attention on AMX (--bf16-vision): inputs rounded to bf16, so the
// encoder moves by bf16 rounding only; bitwise the same for any thread count; a clear error
// without AMX bf16.
TEST(Vision, Bf16GemmOnAmxStaysCloseToTransformers) {
  auto v = tiny_switched(&Idefics3Vision::use_bf16_gemm, bf16_gemm_available());
  if (!v) GTEST_SKIP() << "no AMX bf16 here";
  const SiglipConfig& c = v->config();
  const size_t ne = static_cast<size_t>(c.n_patches()) * c.hidden;
  const TinyTileErrors te = tiny_tile_errors(*v);
  const std::vector<float>& chw = te.chw;
  const std::vector<float>& e = te.enc;
  const double re = te.encoder, rc = te.connector;
  std::printf("bf16 GEMM + attention: encoder max rel err %.2e, connector max rel err %.2e vs transformers (fp32)\n", re, rc);
  EXPECT_GT(rc, 1e-6);  // the inputs really were rounded
  EXPECT_LE(re, 1e-2);  // 4.2e-3 measured (docs/numerics.md)
  EXPECT_LE(rc, 1e-2);

  // The full-tile encoder hands its GEMMs bf16 activations written by the ops that produce them
  // (LayerNorm, bias+GELU; q/k/v share one rounding). The gated path rounds inside each gemm_bf16
  // call instead: re-encoding every patch through it must give the same bits.
  ThreadPool pool(2);
  Idefics3Vision::TileState st;
  std::vector<float> full(ne), gated(ne);
  v->encode_tile(chw.data(), full.data(), pool, &st);
  EXPECT_EQ(full, e);
  std::vector<int> all(static_cast<size_t>(c.n_patches()));
  for (int i = 0; i < c.n_patches(); ++i) all[static_cast<size_t>(i)] = i;
  v->encode_tile_gated(chw.data(), all, st, gated.data(), pool);
  EXPECT_EQ(gated, full);
  // With head_dim a multiple of 32 every layer's q/k/v GEMM writes the attention's packed K/V,
  // and the state keeps those (bf16, half the bytes of fp32 K/V). A scattered subset of patches
  // re-encoded over them, on the same tile, gives the full encoding's bits again; and so does a
  // new tile with every patch marked changed (the new tile's own full encoding).
  ASSERT_EQ(c.hidden / c.heads % 32, 0) << "the tiny tower is meant to take the fused route";
  EXPECT_TRUE(st.k.empty());
  EXPECT_EQ(st.k16.size(), static_cast<size_t>(c.layers) * ne);  // bf16 elements: half the bytes
  std::vector<int> some;
  for (int i = c.n_patches() - 1; i >= 0; i -= 7) some.push_back(i);
  v->encode_tile_gated(chw.data(), some, st, gated.data(), pool);
  EXPECT_EQ(gated, full);
  std::vector<float> chw2(chw);
  for (size_t i = 0; i < chw2.size(); i += 3) chw2[i] = -chw2[i];
  std::vector<float> full2(ne);
  v->encode_tile(chw2.data(), full2.data(), pool);
  v->encode_tile_gated(chw2.data(), all, st, gated.data(), pool);
  EXPECT_EQ(gated, full2);
  EXPECT_NE(full2, full);
}

// The fp16 GEMMs and attention on AVX512-FP16 (--f16-vision; the default on Intel without AMX):
// inputs rounded to fp16, fp16 sums over chunks, so the encoder moves by less than the bf16
// path's rounding; bitwise the same for any thread count; gated re-encoding over the recorded
// fp32 K/V gives the full encoding's bits; a clear error without AVX512-FP16.
TEST(Vision, F16GemmStaysCloseToTransformers) {
  auto v = tiny_switched(&Idefics3Vision::use_f16_gemm, f16_gemm_available());
  if (!v) GTEST_SKIP() << "no AVX512-FP16 here";
  EXPECT_STREQ(v->precision(), "f16");
  const SiglipConfig& c = v->config();
  const size_t ne = static_cast<size_t>(c.n_patches()) * c.hidden;
  const TinyTileErrors te = tiny_tile_errors(*v);
  const std::vector<float>& chw = te.chw;
  const std::vector<float>& e = te.enc;
  const double re = te.encoder, rc = te.connector;
  std::printf("fp16 GEMM + attention: encoder max rel err %.2e, connector max rel err %.2e vs transformers (fp32)\n", re, rc);
  EXPECT_GT(rc, 1e-6);  // the inputs really were rounded
  EXPECT_LE(re, 4e-3);  // 1.6e-3 measured, against the bf16 path's 4.1e-3 (docs/numerics.md)
  EXPECT_LE(rc, 4e-3);  // 2.3e-3 measured
  ThreadPool pool(2);
  Idefics3Vision::TileState st;
  std::vector<float> full(ne), gated(ne);
  v->encode_tile(chw.data(), full.data(), pool, &st);
  EXPECT_EQ(full, e);
  std::vector<int> some;
  for (int i = c.n_patches() - 1; i >= 0; i -= 7) some.push_back(i);
  v->encode_tile_gated(chw.data(), some, st, gated.data(), pool);
  EXPECT_EQ(gated, full);
  // pixels far past any image's range overflow fp16 in the patch embedding: a one-line error, not
  // NaN embeddings
  std::vector<float> huge(chw);
  for (float& x : huge) x *= 1e6f;
  try {
    v->encode_tile(huge.data(), full.data(), pool);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--fp32-vision"), std::string::npos) << e.what();
  }
}

TEST(Vision, BadImagesAreClearErrors) {
  const std::string dir = std::filesystem::temp_directory_path() / "tessera_vision_test";
  std::filesystem::create_directories(dir);
  const std::string png = test::read_file(test::source_path(kScreens + "xterm_700x450.png"));
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  auto error_of = [](const std::string& path, ImageLimits lim = {}) {
    try {
      load_image(path, lim);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(write("trunc.png", png.substr(0, png.size() / 2))).find("cannot decode PNG"), std::string::npos);
  EXPECT_NE(error_of(write("text.png", "hello, not an image")).find("not a PNG or JPEG"), std::string::npos);
  const std::string jpg = test::read_file(test::source_path(kScreens + "xterm_1280x720.jpg"));
  EXPECT_NE(error_of(write("trunc.jpg", jpg.substr(0, 200))).find("JPEG"), std::string::npos);
  ImageLimits small;
  small.max_pixels = 1000;
  EXPECT_NE(error_of(test::source_path(kScreens + "xterm_700x450.png"), small).find("exceeds the limit"), std::string::npos);
  EXPECT_NE(error_of(dir + "/missing.png").find("cannot open"), std::string::npos);
  EXPECT_THROW(image_from_raw(nullptr, 0, 10, 3, 0), Error);
  std::vector<uint8_t> rgba = {10, 20, 30, 0, 10, 20, 30, 128};
  const ImageRGB r = image_from_raw(rgba.data(), 2, 1, 4, 8);
  EXPECT_EQ(r.pixels[0], 255);  // fully transparent over white
  std::filesystem::remove_all(dir);
}

// An mmproj that does not belong to the text model, and hostile mmproj metadata.
TEST(Vision, MismatchedAndHostileMmprojAreRejected) {
  const TinyModels& m = tiny();
  auto big = LlamaModel::load(test::model_path());
  EXPECT_THROW(Idefics3(*big, *m.vision), Error);  // 576-wide text, 32-wide projector
  const std::string dir = std::filesystem::temp_directory_path() / "tessera_mmproj_test";
  std::filesystem::create_directories(dir);
  auto f = GgufFile::open(test::source_path(kTiny + "mmproj.gguf"));
  auto rewrite = [&](const std::string& key, GgufValue v) {
    GgufWriter w;
    for (const auto& [k, val] : f->metadata()) w.set(k, val);
    w.set(key, std::move(v));
    for (const auto& t : f->tensors()) w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    const std::string p = dir + "/m.gguf";
    w.write(p);
    try {
      Idefics3Vision::load_mmproj(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // a text model without SmolVLM's image tokens
  {
    auto t = GgufFile::open(test::source_path(kTiny + "text.gguf"));
    GgufWriter w;
    for (const auto& [k, val] : t->metadata()) w.set(k, val);
    std::vector<std::string> toks = t->get("tokenizer.ggml.tokens").strs;
    for (auto& tok : toks)
      if (tok == "<fake_token_around_image>") tok = "<renamed_token>";
    w.set("tokenizer.ggml.tokens", GgufValue::make_strings(toks));
    for (const auto& ts : t->tensors()) w.add_tensor(ts.name, ts.type, ts.dims, std::vector<uint8_t>(ts.data, ts.data + ts.n_bytes));
    w.write(dir + "/text.gguf");
    auto text = LlamaModel::load(dir + "/text.gguf");
    try {
      Idefics3 vlm(*text, *m.vision);
      ADD_FAILURE() << "accepted a text model without image tokens";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("<fake_token_around_image>"), std::string::npos) << e.what();
    }
  }
  EXPECT_NE(rewrite("clip.vision.image_mean", GgufValue::make_f32_array({0.5f})).find("image_mean"), std::string::npos);
  EXPECT_NE(rewrite("clip.vision.image_std", GgufValue::make_f32_array({0.5f, 0.0f, 0.5f})).find("image_std"), std::string::npos);
  EXPECT_NE(rewrite("clip.vision.image_size", GgufValue::make_u32(1u << 30)).find("image_size"), std::string::npos);
  EXPECT_NE(rewrite("clip.vision.patch_size", GgufValue::make_u32(0)).find("patch_size"), std::string::npos);
  EXPECT_NE(rewrite("clip.vision.block_count", GgufValue::make_u32(3)).find("missing tensor"), std::string::npos);
  EXPECT_NE(rewrite("clip.vision.embedding_length", GgufValue::make_u32(96)).find("shape"), std::string::npos);
  EXPECT_NE(rewrite("clip.projector_type", GgufValue::make_string("mlp")).find("projector type"), std::string::npos);
  std::filesystem::remove_all(dir);
}
