#include "plan/predict.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/bf16_tiles.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernels.h"
#include "kernels/q8_panels.h"
#include "models/footprint.h"
#include "models/smolvlm/preprocess.h"

namespace tessera::plan {

namespace {

// Kernel calls per layer and token batch besides the seven matmuls (whose rates are measured per
// call, fixed cost included): attention, RoPE with the cache store, two norms and SwiGLU (the
// profiler counts 12.1 calls per layer for SmolLM2); the embedding and the last norm per batch.
constexpr double kCallsPerLayer = 5, kCallsPerPass = 2;

// The session computes logits this many rows at a time (runtime/session.h, kLogitRows).
constexpr double kLogitRows = 32;
// A text model's tokenizer and tables, per vocabulary entry: measured resident size after loading
// (SmolLM2's 49152 tokens: 20 MB; Qwen3's 151936: 55 MB).
constexpr double kTokenizerBytesPerToken = 380;

const char* const kLayerMatrices[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

double rate(const std::map<DType, double>& r, DType t) {
  const auto it = r.find(t);
  if (it != r.end()) return it->second;
  // IQ4_NL, IQ4_XS, Q3_K, Q2_K (8-bit path; the calibration times the types it can write at every
  // shape): the 4-bit type whose panel walk they share, Q4_0's (IQ4_NL: plus one table lookup per
  // 16 bytes) and Q4_K's (IQ4_XS likewise; Q3_K: nibbles with Q6_K's two scales per block; Q2_K:
  // 2-bit quants, two scales and two mins per block)
  const DType like = t == DType::IQ4_NL ? DType::Q4_0 : t == DType::IQ4_XS || t == DType::Q3_K || t == DType::Q2_K ? DType::Q4_K : t;
  if (like != t && r.count(like))
    return r.at(like);
  // a type the calibration did not time (F64, I8, A4G64): the slowest measured rate
  double lo = 0;
  for (const auto& [k, v] : r) lo = lo == 0 ? v : std::min(lo, v);
  if (lo <= 0) fail("the device profile has no kernel rates");
  return lo;
}

template <class F>
void for_each_layer_matrix(const ModelSpec& m, F&& f) {
  for (int l = 0; l < m.text.n_layer; ++l)
    for (const char* n : kLayerMatrices) {
      const WeightTensor* t = m.find("blk." + std::to_string(l) + "." + n + ".weight");
      if (!t) fail("%s: no blk.%d.%s.weight", m.name.c_str(), l, n);
      f(*t);
    }
}

const WeightTensor& head(const ModelSpec& m) {
  const WeightTensor* t = m.find("output.weight");
  if (!t) t = m.find("token_embd.weight");
  if (!t) fail("%s: no output or token_embd matrix", m.name.c_str());
  return *t;
}

// One position's K and V over every layer, as the session stores them (K in tiles of 16).
double kv_bytes_per_position(const ModelSpec& m, DType kv) {
  const LlamaConfig& c = m.text;
  return static_cast<double>(c.n_layer) * c.n_head_kv *
         (static_cast<double>(kv_tile_bytes(kv, c.head_dim)) / kKvTile + static_cast<double>(kv_row_bytes(kv, c.head_dim)));
}

// Encoder FLOPs: GEMMs and attention, per SmolVLM tile or per Qwen3-VL image of n patches; and
// its element-wise passes, in elements: LayerNorms, the FFN's GELU (SigLIP's bf16 GEMM applies
// it in its epilogue: no pass there), Qwen3-VL's 2-D RoPE of q and k.
struct VisionWork {
  double gemm_flops = 0, attn_flops = 0, calls = 0;
  // a quantized mmproj on 8-bit activations (vision_q8_type): its GEMMs at the 8-bit prefill rate
  // of this type, the inputs quantized (a norm element's cost each), the GELU a pass of its own
  bool q8 = false;
  DType q8_type = DType::F32;
  double q8_input_elems = 0;
  bool qwen = false;  // Qwen3-VL's tower: its GEMMs at their own calibrated rate
  double norm_elems = 0, gelu_elems = 0, rope_elems = 0;
  bool gelu_in_bf16_gemm = false;
};

VisionWork siglip_tile_work(const SiglipConfig& v) {
  const double N = v.n_patches(), H = v.hidden, F = v.ff, P = v.patch_size, s2 = v.scale_factor * v.scale_factor;
  VisionWork w;
  w.gemm_flops = v.layers * 2 * N * (4 * H * H + 2 * H * F) + 2 * N * 3 * P * P * H + 2 * (N / s2) * (H * s2) * v.text_hidden;
  w.attn_flops = v.layers * 4 * N * N * H;
  w.calls = v.layers * 8 + 4;
  w.norm_elems = (2.0 * v.layers + 1) * N * H;
  w.gelu_elems = v.layers * N * F;
  w.gelu_in_bf16_gemm = true;
  w.q8_input_elems = v.layers * N * (3 * H + F);  // q/k/v's, o's and fc1's inputs (H each; q/k/v once), fc2's (F)
  return w;
}

VisionWork qwen_image_work(const Qwen3VLVisionConfig& v, double N) {
  const double H = v.hidden, F = v.ff, M = H * v.merge * v.merge, K = 3.0 * v.temporal * v.patch * v.patch;
  VisionWork w;
  w.gemm_flops = v.depth * 2 * N * (4 * H * H + 2 * H * F) + 2 * N * K * H +
                 (1 + v.deepstack.size()) * 2 * (N / (v.merge * v.merge)) * (M * M + M * v.out_hidden);
  w.attn_flops = v.depth * 4 * N * N * H;
  w.calls = v.depth * 8 + 4 + 2 * (1 + v.deepstack.size());
  w.norm_elems = 2.0 * v.depth * N * H + (1 + v.deepstack.size()) * N * H;
  w.gelu_elems = v.depth * N * F + (1 + v.deepstack.size()) * (N / (v.merge * v.merge)) * M;
  w.rope_elems = v.depth * 2 * N * H;
  w.qwen = true;
  return w;
}

double vision_ms(const VisionWork& w, const DeviceProfile& d) {
  // with bf16 (fp16) GEMMs the encoder's attention is bf16 (fp16) too: at its calibrated rate (369
  // GFLOP/s where the GEMM ran at 447 on Zen 4), or the GEMM's in calibrations without it
  const bool half = d.vision_bf16 || d.vision_f16;
  const double attn_rate = !half ? d.attn_gflops : d.vision_attn_gflops > 0 ? d.vision_attn_gflops : d.vision_gflops;
  // element-wise passes at the text layer's calibrated rates (0 in calibrations without them):
  // a LayerNorm element at an (add+)RMSNorm's, a GELU element at a SwiGLU's, a RoPE element at
  // RoPE with the cache store's; together 3-4% of a SigLIP tile on the fp16 path
  const double gelu = w.gelu_in_bf16_gemm && d.vision_bf16 && !w.q8 ? 0 : w.gelu_elems;
  const double norm = w.norm_elems + (w.q8 ? w.q8_input_elems : 0);
  const double elementwise_ms = (norm * d.norm_ns + gelu * d.swiglu_ns + w.rope_elems * d.rope_store_ns) * 1e-6;
  const double gemm_rate = w.q8 ? rate(d.q8_prefill_gflops, w.q8_type)
                           : w.qwen && d.qwen_vision_gflops > 0 ? d.qwen_vision_gflops : d.vision_gflops;
  return (w.gemm_flops / (gemm_rate * 1e9) + w.attn_flops / (attn_rate * 1e9)) * 1e3 + w.calls * d.op_us * 1e-3 + elementwise_ms;
}

// Whether the session runs this text matrix on 8-bit activations (runtime/session.cpp: a
// quantized type matmul_q8 takes, its row a whole number of the type's column multiple).
bool on_q8(const WeightTensor& t, bool q8) {
  return q8 && t.rows > 1 && supports_q8_activations(t.type) && t.cols % q8_col_multiple(t.type) == 0;
}

// A text matrix as the session holds it: on 8-bit activations its q8 panels (16 rows each,
// kernels/q8_panels.h); else the decode panels, which take the file's bytes but for Q6_K, whose
// 6-bit quants are widened to bytes (280 bytes per 256 weights where the file has 210;
// kernels/decode_panels.h).
// A tensor held in another type (Q3_K; IQ4_NL on fp32 activations) also keeps that copy beside its
// panels: it is the source's (or the session's) memory, not the file's pages, so it is not dropped.
double resident_text_bytes(const WeightTensor& t, bool q8) {
  const double b = static_cast<double>(t.bytes()), held = t.held() ? b : 0.0;
  if (on_q8(t, q8)) return held + static_cast<double>((t.rows + kPanelRows - 1) / kPanelRows) * static_cast<double>(panel_bytes(t.type, t.cols));
  return held + (t.type == DType::Q6_K && t.rows > 1 ? b * 280.0 / 210.0 : b);
}

// Whether the session runs a SmolVLM mmproj's quantized matrices on 8-bit activations (the CLI's
// default where the calibration says q8_vision_fast(), and the text's activations are 8-bit too),
// and of which type: the vision part's main type, if matmul_q8 takes it; a float one as Q8_0 where
// the calibration says it is quantized at load (vision_q8_float).
bool vision_q8(const ModelSpec& m, const DeviceProfile& d, bool q8, DType* type) {
  DType t = m.main_type(true);
  if (supports_gemm_panels(t) && d.vision_q8_float) t = DType::Q8_0;
  *type = t;
  return q8 && d.vision_q8 && !d.q8_prefill_gflops.empty() && supports_q8_activations(t);
}

// Whether a float vision matrix is quantized to Q8_0 at load (Idefics3Vision::quantize_to_q8_0):
// rows a whole number of blocks (not the patch embedding, whose GGUF rows are its 16 pixels).
bool q8_at_load(const WeightTensor& t, bool q8_float) { return q8_float && supports_gemm_panels(t.type) && t.cols % 32 == 0; }

// Vision weights as the engine holds them: repacked into fp32-GEMM panels in their own type, or,
// where bf16 or fp16 GEMMs run (this CPU's choice: bf16_gemm_fast(), f16_gemm_fast()), into
// 16-bit tiles, each matrix's panels freed once its tiles exist; with q8, a quantized matrix as
// q8 panels (kernels/q8_panels.h) instead.
double vision_resident(const ModelSpec& m, bool bf16, bool q8 = false, bool q8_float = false) {
  double b = 0, largest = 0;
  for (const WeightTensor& t : m.tensors) {
    if (!t.vision) continue;
    const bool matrix = t.rows > 1 && t.name.find("position_embd") == std::string::npos;
    const DType as = matrix && q8 && q8_at_load(t, q8_float) ? DType::Q8_0 : t.type;
    if (matrix && q8 && supports_q8_activations(as) && t.cols % q8_col_multiple(as) == 0) {
      b += static_cast<double>((t.rows + kPanelRows - 1) / kPanelRows) * static_cast<double>(panel_bytes(as, t.cols));
      continue;
    }
    const double tiles = static_cast<double>((t.rows + 31) / 32 * 32) * static_cast<double>(bf16_padded_k(t.cols)) * 2;
    if (!matrix || !bf16) b += static_cast<double>(t.bytes());
    else b += tiles, largest = std::max(largest, static_cast<double>(t.bytes()));
  }
  return b + largest;  // while converting, one matrix's panels beside its tiles (the peak)
}

// A one-token matmul's rate for a matrix of this many bytes: the two calibrated sizes, on a log
// scale of the bytes; the 8-bit path's rates where the session takes it and they were measured.
double decode_rate(const DeviceProfile& d, const WeightTensor& t, bool q8) {
  const bool q = on_q8(t, q8) && !d.q8_decode_gbs.empty();
  const double large = rate(q ? d.q8_decode_gbs : d.decode_gbs, t.type);
  if ((q ? d.q8_decode_gbs_small : d.decode_gbs_small).empty()) return large;
  const double small = rate(q ? d.q8_decode_gbs_small : d.decode_gbs_small, t.type);
  const double b = static_cast<double>(t.bytes());
  const double b0 = static_cast<double>(row_bytes(t.type, 512)) * 1536, b1 = static_cast<double>(row_bytes(t.type, 2048)) * 4096;
  // above the large size, the large rate; below the small one, the line carried on (smaller calls
  // weigh their fixed cost more), down to half the small rate
  const double f = std::min(std::log2(b / b0) / std::log2(b1 / b0), 1.0);
  return std::max(0.5 * small, small + f * (large - small));
}

// How much faster than the calibrated decode rates a token that reads `bytes` runs. Those rates
// cycle through a 128 MiB set (DRAM's rate on most machines seen; on the Xeon VM's 260 MiB L3 it
// sits at the cliff). The decode curve (device.h) is the same kernel's rate against its set's
// bytes, so the speed-up is the curve at `bytes` over the curve at 128 MiB, where the token's bytes
// fit a cache the kernel gains from. At least 1: past 128 MiB the curve, which cycles one set pass
// after pass, still eased 2-12% toward 256 MiB on Zen 4, while the calibrated rates, each set timed
// after the other types' sets, already predict a 1.1 GB model's decode within 7% (Zen 3, 2026-12-07).
// Calibrations without a curve use the older estimate (the read curve's share of a 16 MiB cached
// ratio); without either, 1.
double cache_speedup(const DeviceProfile& d, double bytes, bool q8) {
  const auto& curve = q8 && !d.q8_decode_curve.empty() ? d.q8_decode_curve : d.decode_curve;
  if (curve.size() >= 2) return std::max(1.0, rate_on_curve(curve, bytes) / rate_on_curve(curve, kDecodeSetBytes));
  const double ratio = q8 && d.q8_decode_cached_ratio > 0 ? d.q8_decode_cached_ratio : d.decode_cached_ratio;
  if (d.read_curve.size() < 2 || ratio <= 1) return 1;
  double hi = 0;
  for (const auto& [b, g] : d.read_curve)
    if (b <= kDecodeSetBytes) hi = std::max(hi, g);
  const double lo = d.read_curve.back().second;
  if (hi < 1.1 * lo) return 1;
  const double f = std::clamp((rate_on_curve(d.read_curve, bytes) - lo) / (hi - lo), 0.0, 1.0);
  return 1 + f * (ratio - 1);
}

// A matmul's rate over `tokens` rows for a matrix of this row length: the two calibrated shapes,
// between them on a log scale of the row length; below 256 tokens, scaled down toward the 64-token
// rate on a log scale of the token count (a short prompt's matmul amortizes its weights' unpacking
// over fewer rows).
double gemm_rate(const DeviceProfile& d, const WeightTensor& t, int tokens, bool q8) {
  const bool q = on_q8(t, q8) && !d.q8_prefill_gflops.empty();
  const double wide = rate(q ? d.q8_prefill_gflops : d.prefill_gflops, t.type);
  if ((q ? d.q8_prefill_gflops_narrow : d.prefill_gflops_narrow).empty()) return wide;
  const double narrow = rate(q ? d.q8_prefill_gflops_narrow : d.prefill_gflops_narrow, t.type);
  const double f = std::clamp(std::log2(static_cast<double>(t.cols) / 512) / 2, 0.0, 1.0);  // 512 -> 0, 2048 -> 1
  double r = narrow + f * (wide - narrow);
  const std::map<DType, double>& short_rates = q ? d.q8_prefill_gflops_short : d.prefill_gflops_short;
  const auto s = short_rates.find(t.type);
  if (s != short_rates.end() && tokens < 256) {
    const double ratio = std::min(1.0, s->second / narrow);
    const double g = std::clamp(std::log2(std::max(tokens, 1) / 64.0) / 2, 0.0, 1.0);  // 64 -> 0, 256 -> 1
    r *= ratio + g * (1 - ratio);
  }
  return r;
}

// The layers' element-wise work for n tokens, seconds (the calibrated per-element costs; 0 where
// the profile has none): two norms over the width, RoPE and the K/V stores, SwiGLU over the FFN.
double elementwise_s(const LlamaConfig& c, const DeviceProfile& d, int n) {
  const double kv = static_cast<double>(c.n_head_kv) * c.head_dim;
  return static_cast<double>(n) * c.n_layer *
         (2.0 * c.n_embd * d.norm_ns + (c.q_dim() + 2 * kv) * d.rope_store_ns + static_cast<double>(c.n_ff) * d.swiglu_ns) * 1e-9;
}

// A prompt's causal attention rate, GFLOP/s, for a call over `positions` keys: the 128- and
// 512-position calibrations, on a log scale between them, the nearer one outside (older
// calibrations: the encoder tile's bidirectional rate).
double prompt_attn_rate(const DeviceProfile& d, int positions) {
  if (d.prompt_attn_gflops_128 <= 0 || d.prompt_attn_gflops_512 <= 0) return d.attn_gflops;
  const double g = std::clamp(std::log2(std::max(positions, 1) / 128.0) / 2, 0.0, 1.0);  // 128 -> 0, 512 -> 1
  return d.prompt_attn_gflops_128 + g * (d.prompt_attn_gflops_512 - d.prompt_attn_gflops_128);
}

}  // namespace

double prefill_ms(const ModelSpec& m, const DeviceProfile& d, int n, int depth, int n_batch, bool q8) {
  if (n <= 0) return 0;
  double s = elementwise_s(m.text, d, n);
  const int per_pass = std::min(n, n_batch);
  for_each_layer_matrix(m, [&](const WeightTensor& t) {
    s += 2.0 * n * static_cast<double>(t.rows) * static_cast<double>(t.cols) / (gemm_rate(d, t, per_pass, q8) * 1e9);
  });
  const LlamaConfig& c = m.text;
  const double pairs = static_cast<double>(n) * depth + 0.5 * static_cast<double>(n) * (n + 1);
  s += c.n_layer * 4.0 * pairs * c.q_dim() / (prompt_attn_rate(d, n + depth) * 1e9);
  const int passes = (n + n_batch - 1) / n_batch;
  const WeightTensor& h = head(m);
  s += passes * static_cast<double>(h.bytes()) / (decode_rate(d, h, q8) * 1e9);  // the last row's logits
  s += passes * (kCallsPerLayer * c.n_layer + kCallsPerPass) * d.op_us * 1e-6;
  return s * 1e3;
}

double decode_ms(const ModelSpec& m, const DeviceProfile& d, int pos, DType kv_type, bool q8) {
  double s = elementwise_s(m.text, d, 1);
  const WeightTensor& h = head(m);
  double per_token = static_cast<double>(h.bytes()) + kv_bytes_per_position(m, kv_type) * pos;
  for_each_layer_matrix(m, [&](const WeightTensor& t) { per_token += static_cast<double>(t.bytes()); });
  const double cached[2] = {cache_speedup(d, per_token, false), cache_speedup(d, per_token, true)};
  const auto matrix_s = [&](const WeightTensor& t) {
    return static_cast<double>(t.bytes()) / (decode_rate(d, t, q8) * cached[on_q8(t, q8)] * 1e9);
  };
  for_each_layer_matrix(m, [&](const WeightTensor& t) { s += matrix_s(t); });
  s += matrix_s(h);
  // the cache: at the calibrated decode-attention rate (converting and multiplying the cache's
  // values costs more than reading them at these lengths; calibrated from memory), counted in the
  // cache's bytes, faster as the weights are where the token's bytes fit the last-level cache
  s += kv_bytes_per_position(m, kv_type) * pos / ((d.attn_decode_gbs > 0 ? d.attn_decode_gbs : d.dram_gbs) * cached[0] * 1e9);
  s += (kCallsPerLayer * m.text.n_layer + kCallsPerPass) * d.op_us * 1e-6;
  return s * 1e3;
}

ModelSpec as_computed(const ModelSpec& in, bool q8) {
  ModelSpec m = in;
  for (WeightTensor& t : m.tensors)
    if (q8 && !t.vision && t.rows > 1 && supports_q8_activations(t.stored)) t.type = t.stored;
  return m;
}

Prediction predict(const ModelSpec& spec, const Scenario& s, const DeviceProfile& d) {
  if (s.screen_w < 1 || s.screen_h < 1) fail("the screen size must be positive");
  const ModelSpec m = as_computed(spec, s.q8_activations);
  Prediction p;
  const LlamaConfig& c = m.text;
  const bool bf16 = d.vision_bf16 || d.vision_f16;  // the calibration timed the 16-bit GEMM where it is fast
  int rows = 0;
  if (m.vision == VisionFamily::Idefics3) {
    Idefics3PreprocessConfig pc = m.idefics3;
    if (s.longest_edge) pc.longest_edge = s.longest_edge;
    const Idefics3Grid g = idefics3_grid(pc, s.screen_w, s.screen_h);
    p.tiles = g.tiles();
    rows = g.rows;
    p.image_tokens = p.tiles * m.siglip.tokens_per_tile();
    // markup (models/smolvlm/idefics3.cpp): two tokens before each grid tile, a newline after each
    // row (the last one's merges with the next "\n"), three around the global image
    p.prompt_tokens = p.image_tokens + (g.rows ? 2 * (p.tiles - 1) + rows : 0) + 3 + s.question_tokens;
    const double px = g.rows ? static_cast<double>(g.stretched_w) * g.stretched_h : static_cast<double>(g.resized_w) * g.resized_h;
    VisionWork work = siglip_tile_work(m.siglip);
    work.q8 = vision_q8(m, d, s.q8_activations, &work.q8_type);
    // a tower repacked straight from the file (q8 panels, or a quantized file's 16-bit tiles)
    // frees no float panels (its float weights' size, the load's largest frees) for the first
    // frame's images to reuse: the cold bound; else the bounds' midpoint (device.cpp,
    // first_frame_seconds; docs/plan.md)
    const bool cold = work.q8 || !supports_gemm_panels(m.main_type(true));
    p.preprocess_ms = (static_cast<double>(s.screen_w) * s.screen_h * (cold ? d.preprocess_cold_ns_src : d.preprocess_ns_src) +
                       px * (cold ? d.preprocess_cold_ns_out : d.preprocess_ns_out)) * 1e-6;
    p.vision_q8 = work.q8;
    if (work.q8) p.vision_q8_type = work.q8_type;
    p.vision_per_tile_ms = vision_ms(work, d);
    p.vision_ms = p.vision_per_tile_ms * p.tiles;
    p.vision_buffers = static_cast<double>(siglip_buffer_bytes(m.siglip, d.vision_bf16, work.q8));
    const double scratch = static_cast<double>(idefics3_resize_scratch_bytes(pc, s.screen_w, s.screen_h));
    p.frames = static_cast<double>(s.screen_w) * s.screen_h * 3 + px * 3 + p.tiles * (3.0 * pc.tile * pc.tile) +
               2.0 * p.image_tokens * m.siglip.text_hidden * 4 + scratch;
  } else if (m.vision == VisionFamily::Qwen3VL) {
    p.patches = qwen3vl_patches(m.qwen, s.max_pixels, s.screen_w, s.screen_h);
    p.tiles = 1;
    p.image_tokens = static_cast<int>(p.patches / (m.qwen.merge * m.qwen.merge));
    p.prompt_tokens = p.image_tokens + 2 + s.question_tokens;
    const double px = static_cast<double>(p.patches) * m.qwen.patch * m.qwen.patch;
    p.preprocess_ms = (static_cast<double>(s.screen_w) * s.screen_h * d.qwen_preprocess_ns_src + px * d.qwen_preprocess_ns_out) * 1e-6;
    p.vision_ms = p.vision_per_tile_ms = vision_ms(qwen_image_work(m.qwen, static_cast<double>(p.patches)), d);
    p.vision_buffers = static_cast<double>(qwen3vl_buffer_bytes(m.qwen, p.patches));
    const double K = 3.0 * m.qwen.temporal * m.qwen.patch * m.qwen.patch;
    p.frames = static_cast<double>(s.screen_w) * s.screen_h * 3 + px * 3 + static_cast<double>(p.patches) * K * 4 +
               2.0 * p.image_tokens * qwen3vl_out_row(m.qwen) * 4 +
               static_cast<double>(qwen3vl_resize_scratch_bytes(m.qwen, s.max_pixels, s.screen_w, s.screen_h));
  } else {
    p.prompt_tokens = s.question_tokens;
  }
  // memory
  for (const WeightTensor& t : m.tensors)
    if (!t.vision && !(t.name == "token_embd.weight" && !c.tied_embeddings)) p.weights += resident_text_bytes(t, s.q8_activations);
  if (!c.tied_embeddings)  // the embedding's rows the prompt reads (pages of the file)
    p.weights += std::min<double>(static_cast<double>(m.find("token_embd.weight") ? m.find("token_embd.weight")->bytes() : 0),
                                  (p.prompt_tokens + s.answer_tokens) * 4096.0);
  p.weights += kTokenizerBytesPerToken * c.n_vocab;
  p.vision_weights = vision_resident(m, bf16, p.vision_q8, d.vision_q8_float);
  const double kvp = kv_bytes_per_position(m, s.kv_type);
  p.kv_full = kvp * s.n_ctx;
  p.kv_question = kvp * std::min(s.n_ctx, p.prompt_tokens + s.answer_tokens);
  // the session's buffers, all written when allocated (runtime/session.cpp): per batch row x, xn,
  // tmp, q, att, k, v, gate, up and the rotary angles; 32 rows of logits
  const double per_row = 4.0 * (3.0 * c.n_embd + 2.0 * c.q_dim() + 2.0 * c.n_head_kv * c.head_dim + 2.0 * c.n_ff + c.head_dim);
  p.activations = s.n_batch * per_row + 4.0 * kLogitRows * c.n_vocab;
  if (s.q8_activations)  // a batch's matmul inputs quantized, 32 per block
    p.activations += static_cast<double>((static_cast<size_t>(s.n_batch) * static_cast<size_t>(std::max(c.n_embd, c.n_ff)) / 32 + 1) *
                                         sizeof(BlockQ8_1));
  p.process = d.process_bytes;
  p.peak_question = p.process + p.weights + p.vision_weights + p.kv_question + p.activations + p.vision_buffers + p.frames;
  if (m.vision == VisionFamily::Idefics3)
    p.screen_cache = static_cast<double>(p.image_tokens) * m.siglip.text_hidden * 4 + kvp * (p.prompt_tokens - s.question_tokens);
  else if (m.vision == VisionFamily::Qwen3VL)
    p.screen_cache = static_cast<double>(p.image_tokens) * qwen3vl_out_row(m.qwen) * 4 + kvp * (p.prompt_tokens - s.question_tokens);
  p.reserved = p.peak_question - p.kv_question + p.kv_full + p.screen_cache;
  // time
  p.prefill_ms = prefill_ms(m, d, p.prompt_tokens, 0, s.n_batch, s.q8_activations);
  p.prefill_question_ms = prefill_ms(m, d, s.question_tokens, p.prompt_tokens - s.question_tokens, s.n_batch, s.q8_activations);
  p.decode_ms_per_token = decode_ms(m, d, p.prompt_tokens + s.answer_tokens / 2, s.kv_type, s.q8_activations);
  p.ttft_cold_ms = p.preprocess_ms + p.vision_ms + p.prefill_ms + p.decode_ms_per_token;
  p.ttft_watched_ms = p.prefill_question_ms + p.decode_ms_per_token;
  p.answer_ms = p.ttft_cold_ms + (s.answer_tokens - 1) * p.decode_ms_per_token;
  // watching: a changing frame is resampled (its changed rows), re-encoded (SmolVLM: its changed
  // tiles and the global image; Qwen3-VL: the whole image, exact reuse) and the screen prefix
  // evaluated again
  if (m.vision != VisionFamily::None) {
    const double grid = std::max(0, p.tiles - 1);
    const double encoded = m.vision == VisionFamily::Idefics3 ? std::min(grid, std::ceil(s.tiles_changing * grid)) + 1 : 1;
    const double frame_ms = p.preprocess_ms * (m.vision == VisionFamily::Idefics3 ? encoded / p.tiles : 1.0) +
                            p.vision_per_tile_ms * encoded + prefill_ms(m, d, p.prompt_tokens - s.question_tokens, 0, s.n_batch, s.q8_activations);
    p.watch_ms_per_frame = s.frames_changing * frame_ms;
    p.watch_cpu_share = p.watch_ms_per_frame / (s.cadence_s * 1e3) * d.threads / std::max(1, d.cores);
  }
  return p;
}

}  // namespace tessera::plan
