// `tessera plan` (src/plan/): model shapes read without weights, the device profile, and the cost
// model's terms against what the engine allocates and what preprocessing produces. (Its
// predictions against measured runs are a benchmark, bench/plan/validate.py: timing is no unit test.)
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "core/error.h"
#include "profile/profiler.h"
#include <nlohmann/json.hpp>
#include "image/image.h"
#include "models/footprint.h"
#include "models/open_model.h"
#include "models/smolvlm/preprocess.h"
#include "plan/predict.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

// Round rates, so each term can be computed by hand.
DeviceProfile round_device() {
  DeviceProfile d;
  d.name = "test";
  d.mem_bytes = 16.0 * (1u << 30);
  d.cores = d.threads = 2;
  d.dram_gbs = 20;
  d.fp32_peak_gflops = 200;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q6_K, DType::Q5_K, DType::Q5_1, DType::Q5_0, DType::Q4_K,
                  DType::Q4_1, DType::Q4_0}) {
    d.decode_gbs[t] = d.decode_gbs_small[t] = 10;
    d.prefill_gflops[t] = d.prefill_gflops_narrow[t] = 100;
  }
  d.vision_gflops = 200, d.attn_gflops = 50, d.attn_decode_gbs = 20, d.op_us = 0;
  d.vision_bf16 = true;
  return d;
}

}  // namespace

// The published configurations give the published sizes.
TEST(Plan, BuiltinModelsHaveTheirPublishedSizes) {
  const auto total = [](const std::string& n) {
    const ModelSpec m = open_model_spec(n);
    return (m.params(false) + m.params(true)) / 1e9;
  };
  EXPECT_NEAR(total("smolvlm-256m"), 0.256, 0.03);
  EXPECT_NEAR(total("smolvlm-500m"), 0.507, 0.04);
  EXPECT_NEAR(total("qwen3-vl-2b"), 2.13, 0.1);
  EXPECT_NEAR(total("qwen3-vl-4b"), 4.44, 0.2);
  EXPECT_NEAR(total("qwen3-vl-8b"), 8.77, 0.3);
  EXPECT_THROW(open_model_spec("qwen3-vl-2b", "x.gguf"), Error);
  EXPECT_THROW(open_model_spec("no-such-model"), Error);
}

// A GGUF's header gives what the loaders give, and its tensors' bytes are the file's.
TEST(Plan, GgufSpecMatchesTheLoadedModel) {
  const std::string text = test::source_path("tests/fixtures/qwen3vl/tiny/text.gguf");
  const std::string mmproj = test::source_path("tests/fixtures/qwen3vl/tiny/mmproj.gguf");
  const ModelSpec m = open_model_spec(text, mmproj);
  const HfModel loaded = open_model(text, mmproj);
  const LlamaConfig& c = loaded.text->config();
  EXPECT_EQ(m.text.n_embd, c.n_embd);
  EXPECT_EQ(m.text.n_layer, c.n_layer);
  EXPECT_EQ(m.text.n_head_kv, c.n_head_kv);
  EXPECT_EQ(m.text.head_dim, c.head_dim);
  EXPECT_EQ(m.text.n_ff, c.n_ff);
  EXPECT_EQ(m.text.n_vocab, c.n_vocab);
  ASSERT_EQ(m.vision, VisionFamily::Qwen3VL);
  EXPECT_EQ(m.qwen.depth, loaded.qwen_vision->config().depth);
  EXPECT_EQ(m.qwen.deepstack, loaded.qwen_vision->config().deepstack);
  const auto f = GgufFile::open(text);
  size_t bytes = 0;
  for (const GgufTensor& t : f->tensors()) bytes += row_bytes(t.type, t.dims[0]) * (t.n_elements / t.dims[0]);
  EXPECT_EQ(m.bytes(false), bytes);
  EXPECT_THROW(open_model_spec(test::source_path("README.md")), Error);
}

// A Hugging Face directory (config.json and the processor's settings) gives the shapes the GGUF
// pair converted from it gives.
TEST(Plan, HfDirectoryMatchesItsGgufConversion) {
  for (const std::string dir : {"tests/fixtures/vision/tiny/", "tests/fixtures/qwen3vl/tiny/"}) {
    const ModelSpec h = open_model_spec(test::source_path(dir + "hf"));
    const ModelSpec g = open_model_spec(test::source_path(dir + "text.gguf"), test::source_path(dir + "mmproj.gguf"));
    EXPECT_EQ(h.vision, g.vision) << dir;
    EXPECT_EQ(h.text.n_embd, g.text.n_embd) << dir;
    EXPECT_EQ(h.text.n_layer, g.text.n_layer) << dir;
    EXPECT_EQ(h.text.n_ff, g.text.n_ff) << dir;
    EXPECT_EQ(h.text.n_vocab, g.text.n_vocab) << dir;
    EXPECT_EQ(h.params(false), g.params(false)) << dir;
    if (g.vision == VisionFamily::Idefics3) {
      EXPECT_EQ(h.siglip.layers, g.siglip.layers);
      EXPECT_EQ(h.idefics3.longest_edge, g.idefics3.longest_edge);
    } else {
      EXPECT_EQ(h.qwen.depth, g.qwen.depth);
      EXPECT_EQ(h.qwen.deepstack, g.qwen.deepstack);
    }
  }
}

// Converted types follow `tessera convert`: K types on rows that are not a multiple of 256 take
// llama-quantize's fallback; norms keep their type.
TEST(Plan, WeightTypesFollowConvert) {
  const ModelSpec m = with_weight_types(open_model_spec("smolvlm-256m"), DType::Q4_K, kKeepType);
  EXPECT_EQ(m.find("blk.0.ffn_up.weight")->type, DType::Q5_0);    // rows of 576
  EXPECT_EQ(m.find("blk.0.ffn_down.weight")->type, DType::Q4_K);  // rows of 1536
  EXPECT_EQ(m.find("blk.0.attn_norm.weight")->type, DType::F32);
  EXPECT_EQ(m.find("v.blk.0.attn_q.weight")->type, DType::BF16);
  const ModelSpec q = with_weight_types(open_model_spec("qwen3-vl-2b"), DType::Q8_0, DType::F16);
  EXPECT_EQ(q.main_type(false), DType::Q8_0);
  EXPECT_EQ(q.main_type(true), DType::F16);
  EXPECT_NEAR(static_cast<double>(q.bytes(false)) / q.params(false), 34.0 / 32, 0.01);  // Q8_0: 34 bytes per 32
}

// The geometry the planner counts is the one preprocessing produces.
TEST(Plan, TileGridMatchesPreprocessing) {
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{700, 450}, {1920, 1080}, {300, 900}, {512, 512}, {100, 80}})
    for (int edge : {512, 1024, 2048}) {
      Idefics3PreprocessConfig pc;
      pc.longest_edge = edge;
      ImageRGB im;
      im.width = w, im.height = h;
      im.pixels.assign(static_cast<size_t>(w) * h * 3, 128);
      const PreprocessedImage p = preprocess_idefics3(im, pc);
      const Idefics3Grid g = idefics3_grid(pc, w, h);
      EXPECT_EQ(g.rows, p.rows) << w << "x" << h << " edge " << edge;
      EXPECT_EQ(g.cols, p.cols) << w << "x" << h << " edge " << edge;
      EXPECT_EQ(static_cast<size_t>(g.tiles()), p.tiles.size()) << w << "x" << h << " edge " << edge;
      EXPECT_EQ(idefics3_tile_count(pc, w, h), p.tiles.size());
    }
}

// A tensor the engine holds in another type (Q3_K as Q6_K, IQ4_NL as Q8_0 on fp32 activations:
// kernels/exact_repack.h) keeps that copy beside its panels, so it counts twice in the resident
// weights; the file's own pages, dropped once packed, count once. (llama-quantize's Q3_K_S of
// SmolLM2 is Q3_K in ffn_down.)
TEST(Plan, HeldTypesCountTheirCopy) {
  const DeviceProfile d = round_device();
  const ModelSpec m = with_weight_types(open_model_spec(test::model_path()), DType::Q4_0, kKeepType);
  // Q3_K and IQ4_NL: the 8-bit kernels take them as stored (their own panels, no copy); on fp32
  // activations the session holds them as Q6_K and Q8_0, a copy beside the decode panels
  for (auto [stored, held] : {std::pair{DType::Q3_K, DType::Q6_K}, std::pair{DType::IQ4_NL, DType::Q8_0}}) {
    ModelSpec h = m, as_stored = m, as_held = m;
    double copy = 0;
    for (ModelSpec* x : {&h, &as_stored, &as_held})
      for (WeightTensor& t : x->tensors)
        if (t.name.find("ffn_down") != std::string::npos) {
          t.stored = x == &as_held ? held : stored;
          t.type = x == &as_stored ? stored : held;
          if (x == &h) copy += static_cast<double>(t.bytes());
        }
    ASSERT_GT(copy, 0);
    Scenario s;
    s.q8_activations = true;
    EXPECT_EQ(predict(h, s, d).weights, predict(as_stored, s, d).weights) << dtype_name(stored);
    EXPECT_LT(predict(h, s, d).weights, predict(as_held, s, d).weights) << dtype_name(stored);
    s.q8_activations = false;
    EXPECT_NEAR(predict(h, s, d).weights - predict(as_held, s, d).weights, copy, 1e-6 * copy) << dtype_name(stored);
  }
}

// Each term of the cost model, by hand, on round rates: decode streams every layer matrix and the
// head once, plus the cache; prefill multiplies them once per token; the cache's size is the
// session's own.
TEST(Plan, CostTermsByHand) {
  const DeviceProfile d = round_device();
  const ModelSpec m = open_model_spec(test::model_path());  // SmolLM2-135M Q4_1
  double stream = 0, flops = 0;
  for (const WeightTensor& t : m.tensors) {
    if (t.name.rfind("blk.", 0) != 0 || t.rows <= 1) continue;
    stream += static_cast<double>(t.bytes());
    flops += 2.0 * static_cast<double>(t.rows) * static_cast<double>(t.cols);
  }
  const double head = static_cast<double>(m.find("token_embd.weight")->bytes());
  const auto f = GgufFile::open(test::model_path());
  EXPECT_FALSE(m.find("output.weight"));
  EXPECT_NEAR(decode_ms(m, d, 0, DType::F16), (stream + head) / 10e9 * 1e3, 1e-9);
  const LlamaConfig& c = m.text;
  const double pairs = 100.0 * 101 / 2;
  EXPECT_NEAR(prefill_ms(m, d, 100, 0, 512), (100 * flops / 100e9 + c.n_layer * 4 * pairs * c.q_dim() / 50e9 + head / 10e9) * 1e3, 1e-6);
  // two passes of 64 tokens read the head twice
  EXPECT_GT(prefill_ms(m, d, 100, 0, 64), prefill_ms(m, d, 100, 0, 512));
  // a short prompt's matmuls: at the 64-token rate up to 64 tokens, the 256-token one from 256,
  // between them on a log scale of the token count (at 128: half way, 75 GFLOP/s)
  DeviceProfile ds = d;
  for (const auto& [t, v] : d.prefill_gflops) ds.prefill_gflops_short[t] = v / 2;
  const auto attn_head = [&](int n) { return (c.n_layer * 4 * (n * (n + 1) / 2.0) * c.q_dim() / 50e9 + head / 10e9) * 1e3; };
  EXPECT_NEAR(prefill_ms(m, ds, 64, 0, 512), 64 * flops / 50e9 * 1e3 + attn_head(64), 1e-6);
  EXPECT_NEAR(prefill_ms(m, ds, 32, 0, 512), 32 * flops / 50e9 * 1e3 + attn_head(32), 1e-6);
  EXPECT_NEAR(prefill_ms(m, ds, 128, 0, 512), 128 * flops / 75e9 * 1e3 + attn_head(128), 1e-6);
  EXPECT_NEAR(prefill_ms(m, ds, 300, 0, 512), prefill_ms(m, d, 300, 0, 512), 1e-9);
  // a prompt's causal attention at its calibrated rates where measured: the 128-position one up to
  // 128 positions (prompt and cache), the 512 one from 512, a log scale between (256: half way)
  DeviceProfile da = d;
  da.prompt_attn_gflops_128 = 25, da.prompt_attn_gflops_512 = 100;
  const auto attn_ms = [&](int n, int depth, double gflops) {
    return c.n_layer * 4 * (static_cast<double>(n) * depth + n * (n + 1) / 2.0) * c.q_dim() / (gflops * 1e9) * 1e3;
  };
  for (const auto& [n, depth, rate] : {std::tuple{100, 0, 25.0}, std::tuple{256, 0, 62.5}, std::tuple{512, 0, 100.0}, std::tuple{64, 448, 100.0},
                                       std::tuple{64, 2000, 100.0}})
    EXPECT_NEAR(prefill_ms(m, da, n, depth, 512) - prefill_ms(m, d, n, depth, 512), attn_ms(n, depth, rate) - attn_ms(n, depth, 50), 1e-6)
        << n << " after " << depth;
  // the 8-bit path's rates where measured (every matrix of this Q4_1 model takes it), the fp32
  // ones with --f32-activations or where a profile has none
  DeviceProfile d8 = d;
  for (const auto& [t, v] : d.decode_gbs) d8.q8_decode_gbs[t] = d8.q8_decode_gbs_small[t] = t == DType::Q4_1 ? 20 : 40;
  for (const auto& [t, v] : d.prefill_gflops) d8.q8_prefill_gflops[t] = d8.q8_prefill_gflops_narrow[t] = t == DType::Q4_1 ? 400 : 800;
  double stream8 = 0, flops8 = 0;  // seconds at the 8-bit rates, per type (576 and 1536 columns: whole blocks)
  for (const WeightTensor& t : m.tensors) {
    if (t.name.rfind("blk.", 0) != 0 || t.rows <= 1) continue;
    stream8 += static_cast<double>(t.bytes()) / (t.type == DType::Q4_1 ? 20e9 : 40e9);
    flops8 += 2.0 * static_cast<double>(t.rows) * static_cast<double>(t.cols) / (t.type == DType::Q4_1 ? 400e9 : 800e9);
  }
  const double head8 = head / (m.find("token_embd.weight")->type == DType::Q4_1 ? 20e9 : 40e9) * 1e3;
  EXPECT_NEAR(decode_ms(m, d8, 0, DType::F16), stream8 * 1e3 + head8, 1e-9);
  EXPECT_NEAR(decode_ms(m, d8, 0, DType::F16, false), decode_ms(m, d, 0, DType::F16), 1e-12);
  EXPECT_NEAR(decode_ms(m, d, 0, DType::F16, true), decode_ms(m, d, 0, DType::F16, false), 1e-12);
  EXPECT_NEAR(prefill_ms(m, d8, 100, 0, 512), (100 * flops8 + c.n_layer * 4 * pairs * c.q_dim() / 50e9) * 1e3 + head8, 1e-6);
  // the element-wise work per token and layer: two norms over the width, RoPE and the K/V stores
  // over q, k and v, SwiGLU over the FFN
  DeviceProfile de = d;
  de.norm_ns = 1, de.rope_store_ns = 2, de.swiglu_ns = 3;
  const double ew = c.n_layer * (2.0 * c.n_embd * 1 + (c.q_dim() + 2.0 * c.n_head_kv * c.head_dim) * 2 + c.n_ff * 3.0) * 1e-6;  // ms
  EXPECT_NEAR(decode_ms(m, de, 0, DType::F16) - decode_ms(m, d, 0, DType::F16), ew, 1e-9);
  EXPECT_NEAR(prefill_ms(m, de, 100, 0, 512) - prefill_ms(m, d, 100, 0, 512), 100 * ew, 1e-6);
  // decode from the cache, the older estimate (calibrations without decode curves): this model's
  // ~101 MB per token on a read curve flat at 60 GB/s to 64 MiB, 40 at 128 MiB and 30 at 512
  // (DRAM). At its bytes the curve reads (log-linear between 64 and 128 MiB) r, so its share of
  // the 16 MiB set's 1.5x cached ratio is (r - 30) / (60 - 30).
  DeviceProfile dc = d8;
  const double MiB = 1 << 20;
  dc.read_curve = {{16 * MiB, 60}, {64 * MiB, 60}, {128 * MiB, 40}, {512 * MiB, 30}};
  dc.q8_decode_cached_ratio = 1.5;
  const double bytes = stream + head;  // the cache at position 0 adds none
  const double r = 60 + std::log2(bytes / (64 * MiB)) * (40 - 60);
  ASSERT_GT(r, 40);
  ASSERT_LT(r, 60);
  EXPECT_NEAR(rate_on_curve(dc.read_curve, bytes), r, 1e-9);
  EXPECT_NEAR(decode_ms(m, dc, 0, DType::F16), decode_ms(m, d8, 0, DType::F16) / (1 + (r - 30) / 30 * 0.5), 1e-9);
  EXPECT_NEAR(decode_ms(m, dc, 0, DType::F16, false), decode_ms(m, d, 0, DType::F16), 1e-12);  // no fp32 ratio
  DeviceProfile flat = dc;  // a plateau within 10% of DRAM: no scaling
  flat.read_curve = {{16 * MiB, 30}, {1024 * MiB, 29}};
  EXPECT_NEAR(decode_ms(m, flat, 0, DType::F16), decode_ms(m, d8, 0, DType::F16), 1e-12);
  EXPECT_EQ(rate_on_curve(flat.read_curve, 1.0), 30);
  EXPECT_EQ(rate_on_curve(flat.read_curve, 1e12), 29);
  EXPECT_EQ(rate_on_curve({}, 1e8), 0);
  // the decode kernel's own curve, where the calibration has it, replaces that estimate: the 8-bit
  // path's Q4_1 matmul at 48 GB/s through 64 MiB, 36 through 128 MiB, 30 through 256 MiB. The
  // speed-up is the curve at the token's bytes over the curve at 128 MiB, whatever the read curve
  // and the cached ratio say.
  DeviceProfile dk = dc;
  dk.q8_decode_curve = {{16 * MiB, 50}, {64 * MiB, 48}, {128 * MiB, 36}, {256 * MiB, 30}};
  const double rk = 48 + std::log2(bytes / (64 * MiB)) * (36 - 48);
  EXPECT_NEAR(rate_on_curve(dk.q8_decode_curve, bytes), rk, 1e-9);
  EXPECT_NEAR(decode_ms(m, dk, 0, DType::F16), decode_ms(m, d8, 0, DType::F16) / (rk / 36), 1e-9);
  EXPECT_NEAR(decode_ms(m, dk, 0, DType::F16, false), decode_ms(m, d, 0, DType::F16), 1e-12);  // the fp32 path has no curve
  // never below the calibrated rate: a curve that falls before 128 MiB (noise) or past it
  DeviceProfile past = d8;
  past.q8_decode_curve = {{16 * MiB, 30}, {128 * MiB, 36}, {256 * MiB, 20}};
  EXPECT_NEAR(decode_ms(m, past, 0, DType::F16), decode_ms(m, d8, 0, DType::F16), 1e-12);
  // at 4096 positions the f16 cache adds ~94 MB a token: past the 128 MiB set, where the curve falls
  ASSERT_GT(bytes + 4096 * 2.0 * c.n_layer * c.n_head_kv * c.head_dim * 2, 128 * MiB);
  EXPECT_NEAR(decode_ms(m, past, 4096, DType::F16), decode_ms(m, d8, 4096, DType::F16), 1e-12);

  Scenario s;
  s.n_ctx = 1024;
  const Prediction p = predict(m, s, d);
  auto model = LlamaModel::load(test::model_path());
  SessionOptions so;
  so.n_ctx = 1024;
  so.n_threads = 1;
  Session session(*model, so);
  EXPECT_NEAR(p.kv_full, static_cast<double>(session.kv_bytes()), 0.001 * p.kv_full);
  so.kv_type = DType::I8;
  s.kv_type = DType::I8;
  Session s8(*model, so);
  EXPECT_NEAR(predict(m, s, d).kv_full, static_cast<double>(s8.kv_bytes()), 0.001 * p.kv_full);
  EXPECT_EQ(p.vision_ms, 0);
  EXPECT_EQ(p.prompt_tokens, s.question_tokens);
}

// Vision: SmolVLM's 1920x1080 screen is 12 tiles and a global image, 64 tokens each, with the
// prompt's markup; Qwen3-VL's patches are the processor's; the buffers are the footprint's.
TEST(Plan, VisionTermsFollowTheProcessors) {
  const DeviceProfile d = round_device();
  const ModelSpec sm = open_model_spec("smolvlm-256m");
  Scenario s;
  const Prediction p = predict(sm, s, d);
  EXPECT_EQ(p.tiles, 13);
  EXPECT_EQ(p.image_tokens, 832);
  EXPECT_EQ(p.prompt_tokens, 832 + 2 * 12 + 3 + 3 + s.question_tokens);
  // 0.21 TFLOP per tile (docs: 174 GFLOP of GEMMs, 39 of attention)
  const double per_tile = 2.0 * 1024 * (12 * (4.0 * 768 * 768 + 2.0 * 768 * 3072) + 3 * 256 * 768 + 768 * 576);
  EXPECT_NEAR(p.vision_per_tile_ms, (per_tile / 200e9 + 12 * 4.0 * 1024 * 1024 * 768 / 200e9) * 1e3, 1e-6);
  EXPECT_NEAR(p.vision_ms, 13 * p.vision_per_tile_ms, 1e-9);
  EXPECT_EQ(p.vision_buffers, static_cast<double>(siglip_buffer_bytes(sm.siglip, d.vision_bf16)));
  // the element-wise passes: 25 LayerNorms over 1024 x 768, and on the fp16 and fp32 paths the
  // GELU pass over 12 x 1024 x 3072 (SigLIP's bf16 GEMM applies GELU in its epilogue)
  DeviceProfile de = d;
  de.norm_ns = 1, de.swiglu_ns = 3, de.rope_store_ns = 2;
  const double norms_ms = 25.0 * 1024 * 768 * 1e-6, gelu_ms = 12.0 * 1024 * 3072 * 3 * 1e-6;
  de.vision_bf16 = true, de.vision_f16 = false;
  EXPECT_NEAR(predict(sm, s, de).vision_per_tile_ms - p.vision_per_tile_ms, norms_ms, 1e-6);
  de.vision_bf16 = false, de.vision_f16 = true;
  DeviceProfile d16 = d;
  d16.vision_bf16 = false, d16.vision_f16 = true;
  EXPECT_NEAR(predict(sm, s, de).vision_per_tile_ms - predict(sm, s, d16).vision_per_tile_ms, norms_ms + gelu_ms, 1e-6);
  // A Q8_0 mmproj where the calibration says 8-bit activations are its fast path (vision_q8, the
  // CLI's default there): its GEMMs at Q8_0's 8-bit prefill rate, each layer's inputs quantized (a
  // norm element each: q/k/v's once, o's, fc1's, fc2's), the GELU a pass again, the matrices as q8
  // panels (~1.06 bytes a weight against bf16 tiles' 2), the fp32 buffers plus the attention's tiles.
  {
    const ModelSpec sq = with_weight_types(sm, kKeepType, DType::Q8_0);
    DeviceProfile dq = d;
    dq.q8_prefill_gflops[DType::Q8_0] = 400;
    dq.norm_ns = 1, dq.swiglu_ns = 3;
    const Prediction off = predict(sq, s, dq);
    EXPECT_FALSE(off.vision_q8);
    dq.vision_q8 = true;
    const Prediction on = predict(sq, s, dq);
    EXPECT_TRUE(on.vision_q8);
    const double quantized_ms = 12.0 * 1024 * (3 * 768 + 3072) * 1e-6;
    EXPECT_NEAR(on.vision_per_tile_ms - off.vision_per_tile_ms, per_tile * (1 / 400e9 - 1 / 200e9) * 1e3 + quantized_ms + gelu_ms, 1e-6);
    EXPECT_LT(on.vision_weights, 0.6 * off.vision_weights);
    EXPECT_EQ(on.vision_buffers, static_cast<double>(siglip_buffer_bytes(sq.siglip, true, true)));
    EXPECT_GT(on.vision_buffers, off.vision_buffers);
    Scenario f32 = s;
    f32.q8_activations = false;  // --f32-activations
    EXPECT_FALSE(predict(sq, f32, dq).vision_q8);
    EXPECT_FALSE(predict(sm, s, dq).vision_q8);  // an f16 mmproj has nothing to switch
    // ... unless the calibration says a float mmproj is quantized to Q8_0 at load (vision_q8_float,
    // the CLI's default on Zen 4): then it is predicted as the Q8_0 file, time and memory, but for
    // the patch embedding, which stays f16 in both
    dq.vision_q8_float = true;
    const Prediction at_load = predict(sm, s, dq);
    EXPECT_TRUE(at_load.vision_q8);
    EXPECT_EQ(at_load.vision_q8_type, DType::Q8_0);
    EXPECT_EQ(on.vision_q8_type, DType::Q8_0);
    EXPECT_NEAR(at_load.vision_per_tile_ms, on.vision_per_tile_ms, 1e-9);
    EXPECT_NEAR(at_load.vision_weights, on.vision_weights, 1.0);
    EXPECT_EQ(at_load.vision_buffers, on.vision_buffers);
    EXPECT_FALSE(predict(sm, f32, dq).vision_q8);
    // the first frame after a load that freed no float panels (the tower as q8 panels straight
    // from the file) pays the cold bound; with the tower's float panels freed, the midpoint
    dq.preprocess_ns_src = 1, dq.preprocess_ns_out = 2, dq.preprocess_cold_ns_src = 3, dq.preprocess_cold_ns_out = 5;
    const double src = 1920.0 * 1080 * 1e-6;
    const ModelSpec q4 = with_weight_types(sm, DType::Q4_1, kKeepType);
    dq.vision_q8_float = false;
    const double out = (predict(q4, s, dq).preprocess_ms - 1 * src) / 2;  // the output pixels, in millions
    EXPECT_GT(out, 0);  // above: the f16 tower's panels were freed (midpoint)
    EXPECT_NEAR(predict(sq, s, dq).preprocess_ms, 3 * src + 5 * out, 1e-9);  // a Q8_0 tower
    dq.vision_q8_float = true;
    EXPECT_NEAR(predict(q4, s, dq).preprocess_ms, 3 * src + 5 * out, 1e-9);  // the f16 tower quantized at load
    EXPECT_NEAR(predict(sm, s, dq).preprocess_ms, 3 * src + 5 * out, 1e-9);  // whatever the text
    dq.vision_q8 = false;
    EXPECT_NEAR(predict(sq, s, dq).preprocess_ms, 3 * src + 5 * out, 1e-9);  // a Q8_0 file's tiles: no float panels either
    EXPECT_NEAR(predict(q4, s, dq).preprocess_ms, 1 * src + 2 * out, 1e-9);
  }
  s.longest_edge = 512;
  EXPECT_EQ(predict(sm, s, d).tiles, 1);

  const ModelSpec q = open_model_spec("qwen3-vl-2b");
  s = Scenario{};
  s.max_pixels = 262144;
  const Prediction pq = predict(q, s, d);
  EXPECT_EQ(pq.patches, qwen3vl_patches(q.qwen, 262144, 1920, 1080));
  EXPECT_EQ(pq.image_tokens, pq.patches / 4);
  EXPECT_EQ(pq.vision_buffers, static_cast<double>(qwen3vl_buffer_bytes(q.qwen, pq.patches)));
  // attention over the whole image grows with the square of its patches
  s.max_pixels = 4 * 262144;
  const Prediction pq4 = predict(q, s, d);
  EXPECT_GT(pq4.vision_ms, 4 * pq.vision_ms);
  EXPECT_GT(pq4.ttft_cold_ms, pq4.ttft_watched_ms);
  // bf16 GEMMs (vision 200 > attention 50 GFLOP/s here): the encoder's attention at its own
  // calibrated rate where there is one, else the GEMM's; halving it adds the attention's time again
  DeviceProfile da = d;
  da.vision_attn_gflops = 200;
  EXPECT_NEAR(predict(q, s, da).vision_ms, pq4.vision_ms, 1e-9);
  da.vision_attn_gflops = 100;
  const double h = q.qwen.hidden, n = pq4.patches;
  EXPECT_NEAR(predict(q, s, da).vision_ms - pq4.vision_ms, q.qwen.depth * 4 * n * n * h / 200e9 * 1e3, 1e-6);
  // Qwen3-VL's GEMMs at their own calibrated rate where there is one (its layer's wider rows)
  DeviceProfile dq = d;
  dq.qwen_vision_gflops = 100;
  const double gemm_flops = pq4.patches * 2.0 *
                            (q.qwen.depth * (4.0 * h * h + 2.0 * h * q.qwen.ff) + 3.0 * q.qwen.temporal * q.qwen.patch * q.qwen.patch * h);
  EXPECT_GT(predict(q, s, dq).vision_ms - pq4.vision_ms, gemm_flops * (1 / 100e9 - 1 / 200e9) * 1e3);
  // fp32 GEMMs that are merely faster than fp32 attention (the Xeon without AMX: 291 against 161
  // GFLOP/s): the attention at its own fp32 rate, 50 here, not the GEMM's 200
  DeviceProfile df = d;
  df.vision_bf16 = false;
  EXPECT_NEAR(predict(q, s, df).vision_ms - pq4.vision_ms, q.qwen.depth * 4 * n * n * h * (1 / 50e9 - 1 / 200e9) * 1e3, 1e-6);
}

// The saved calibration is read back exactly and checked like any input; an Apple device scales it.
TEST(Plan, DeviceProfilesRoundTripAndScale) {
  DeviceProfile d = round_device();
  d.preprocess_ns_src = 1, d.preprocess_ns_out = 2, d.qwen_preprocess_ns_src = 3, d.qwen_preprocess_ns_out = 4, d.process_bytes = 5e6;
  d.preprocess_cold_ns_src = 1.5, d.preprocess_cold_ns_out = 2.5;
  d.vision_attn_gflops = 123;
  d.qwen_vision_gflops = 111;
  d.prefill_gflops_short[DType::Q4_K] = 45;
  d.q8_decode_gbs[DType::Q4_K] = 31, d.q8_prefill_gflops_short[DType::Q4_0] = 77;
  d.norm_ns = 0.25, d.rope_store_ns = 1.5, d.swiglu_ns = 0.125;
  d.prompt_attn_gflops_128 = 60, d.prompt_attn_gflops_512 = 90;
  const DeviceProfile r = device_from_json(device_to_json(d), "test.json");
  EXPECT_EQ(r.prompt_attn_gflops_128, 60);
  EXPECT_EQ(r.prompt_attn_gflops_512, 90);
  EXPECT_EQ(r.norm_ns, 0.25);
  EXPECT_EQ(r.rope_store_ns, 1.5);
  EXPECT_EQ(r.swiglu_ns, 0.125);
  EXPECT_EQ(r.q8_decode_gbs, d.q8_decode_gbs);
  EXPECT_EQ(r.q8_prefill_gflops_short, d.q8_prefill_gflops_short);
  EXPECT_TRUE(r.q8_prefill_gflops.empty());
  EXPECT_EQ(r.vision_attn_gflops, 123);
  EXPECT_EQ(r.qwen_vision_gflops, 111);
  EXPECT_TRUE(r.vision_bf16);
  EXPECT_FALSE(r.vision_q8);
  d.vision_q8 = true;
  EXPECT_TRUE(device_from_json(device_to_json(d), "test.json").vision_q8);
  {  // optional (calibrations before 2026-12-07 lack it: false), and a boolean where present
    nlohmann::json j = nlohmann::json::parse(device_to_json(d));
    ASSERT_TRUE(j.contains("vision_q8"));
    j["vision_q8"] = 1;
    EXPECT_THROW(device_from_json(j.dump(), "x.json"), Error);
    j.erase("vision_q8");
    EXPECT_FALSE(device_from_json(j.dump(), "old.json").vision_q8);
  }
  d.vision_q8_float = true;
  EXPECT_TRUE(device_from_json(device_to_json(d), "test.json").vision_q8_float);
  {  // optional likewise (before 2026-12-07 evening)
    nlohmann::json j = nlohmann::json::parse(device_to_json(d));
    j["vision_q8_float"] = "yes";
    EXPECT_THROW(device_from_json(j.dump(), "x.json"), Error);
    j.erase("vision_q8_float");
    EXPECT_FALSE(device_from_json(j.dump(), "old.json").vision_q8_float);
  }
  d.vision_q8 = false, d.vision_q8_float = false;
  d.vision_bf16 = false;
  EXPECT_FALSE(device_from_json(device_to_json(d), "test.json").vision_bf16);
  {  // a calibration from before the flag: inferred from the rates (vision 200 > attention 50)
    std::string old_file = device_to_json(d);
    const size_t at = old_file.find("\"vision_bf16\": false,");
    ASSERT_NE(at, std::string::npos);
    old_file.erase(at, std::string("\"vision_bf16\": false,").size());
    EXPECT_TRUE(device_from_json(old_file, "old.json").vision_bf16);
    std::string wrong = device_to_json(d);
    wrong.replace(wrong.find("\"vision_bf16\": false"), 21, "\"vision_bf16\": 1");
    EXPECT_THROW(device_from_json(wrong, "x.json"), Error);
  }
  d.vision_bf16 = true;
  d.read_curve = {{16.0 * (1 << 20), 57}, {1024.0 * (1 << 20), 31}};
  d.decode_cached_ratio = 1.25, d.q8_decode_cached_ratio = 1.5;
  d.decode_curve = {{16.0 * (1 << 20), 40}, {128.0 * (1 << 20), 30}, {512.0 * (1 << 20), 29.5}};
  d.q8_decode_curve = {{16.0 * (1 << 20), 44}, {512.0 * (1 << 20), 31}};
  const DeviceProfile rc = device_from_json(device_to_json(d), "test.json");
  EXPECT_EQ(rc.read_curve, d.read_curve);
  EXPECT_EQ(rc.decode_curve, d.decode_curve);
  EXPECT_EQ(rc.q8_decode_curve, d.q8_decode_curve);
  EXPECT_EQ(rc.decode_cached_ratio, 1.25);
  EXPECT_EQ(rc.q8_decode_cached_ratio, 1.5);
  for (const char* key : {"read_curve", "decode_curve", "q8_decode_curve"})
    for (const char* bad : {"[[1048576, 57], [1048576, 31]]", "[[1048576, 57], [2097152]]", "[[1048576, -1]]", "{}", "[[1e300, 1]]"}) {
      std::string f = device_to_json(d);
      const std::string name = std::string("\"") + key + "\": [";
      const size_t a = f.find(name);
      ASSERT_NE(a, std::string::npos) << key;
      const size_t e = f.find("\n ],", a);
      ASSERT_NE(e, std::string::npos);
      f.replace(a, e + 3 - a, std::string("\"") + key + "\": " + bad);
      EXPECT_THROW(device_from_json(f, "x.json"), Error) << key << " " << bad;
    }
  d.read_curve.clear(), d.decode_curve.clear(), d.q8_decode_curve.clear();
  d.decode_cached_ratio = d.q8_decode_cached_ratio = 0;
  EXPECT_EQ(r.prefill_gflops_short, d.prefill_gflops_short);
  EXPECT_EQ(r.decode_gbs, d.decode_gbs);
  EXPECT_EQ(r.prefill_gflops, d.prefill_gflops);
  EXPECT_EQ(r.dram_gbs, d.dram_gbs);
  EXPECT_EQ(r.qwen_preprocess_ns_out, 4);
  EXPECT_EQ(r.preprocess_cold_ns_src, 1.5);
  EXPECT_EQ(r.preprocess_cold_ns_out, 2.5);
  {  // the cold bound is optional (calibrations before 2026-12-07 evening): the midpoint's then
    nlohmann::json j = nlohmann::json::parse(device_to_json(d));
    j.erase("preprocess_cold_ns_src"), j.erase("preprocess_cold_ns_out");
    const DeviceProfile old = device_from_json(j.dump(), "old.json");
    EXPECT_EQ(old.preprocess_cold_ns_src, 1);
    EXPECT_EQ(old.preprocess_cold_ns_out, 2);
    j["preprocess_cold_ns_out"] = -1;
    EXPECT_THROW(device_from_json(j.dump(), "x.json"), Error);
  }
  EXPECT_THROW(device_from_json("{\"mem_bytes\": 1e9}", "x.json"), Error);
  EXPECT_THROW(device_from_json("[1, 2]", "x.json"), Error);
  std::string bad = device_to_json(d);
  bad.replace(bad.find("\"dram_gbs\": 20"), 14, "\"dram_gbs\": -1");
  EXPECT_THROW(device_from_json(bad, "x.json"), Error);

  const DeviceProfile m2 = apple_device("m2-pro", 32, d);
  EXPECT_EQ(m2.mem_bytes, 32.0 * (1u << 30));
  EXPECT_NEAR(m2.decode_gbs.at(DType::Q4_K), 10.0 * 200 / 20, 1e-9);  // half the roof, as here
  EXPECT_NEAR(m2.q8_decode_gbs.at(DType::Q4_K), 20.0 * 200 / 20, 1e-9);  // at most the roof here
  EXPECT_NEAR(m2.vision_gflops, 200.0 * (8 * 32 * 3.5) / 200, 1e-9);
  EXPECT_THROW(apple_device("m2-pro", 12, d), Error);
  EXPECT_THROW(apple_device("m7", 0, d), Error);
}

// The memory terms against what a session holds, as the profiler records it: its repacked
// weights, its activations and its KV cache; for Qwen3-VL's tiny model too (its K-quant-free
// weights stay unpacked where no panel layout takes them: the term is the file's bytes).
TEST(Plan, MemoryTermsAreTheSessionsOwn) {
  const DeviceProfile d = round_device();
  for (const std::string& path : {test::model_path(), test::source_path("tests/fixtures/qwen3vl/tiny/text.gguf")})
   for (bool q8 : {true, false}) {  // q8 panels and quantized inputs; decode panels
    const ModelSpec m = open_model_spec(path);
    Scenario s;
    s.n_ctx = 512;
    s.n_batch = 64;
    s.q8_activations = q8;
    const Prediction p = predict(m, s, d);
    auto model = LlamaModel::load(path);
    SessionOptions so;
    so.n_ctx = 512;
    so.n_batch = 64;
    so.n_threads = 1;
    so.q8_activations = q8;
    Session session(*model, so);
    prof::start(false);
    session.eval({1, 2, 3});
    prof::stop();
    const auto mem = nlohmann::json::parse(prof::report_json(prof::Peaks{}))["memory"];
    const double weights = mem.contains("repacked weights") ? mem["repacked weights"].get<double>() : mem["weights"].get<double>();
    EXPECT_NEAR(p.weights - 380.0 * m.text.n_vocab, weights, 0.002 * weights) << path << " q8 " << q8;
    EXPECT_EQ(p.activations, mem["activations"].get<double>()) << path << " q8 " << q8;
    EXPECT_EQ(p.kv_full, mem["kv cache"].get<double>()) << path << " q8 " << q8;
  }
}
