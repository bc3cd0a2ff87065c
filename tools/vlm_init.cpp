#include "vlm_init.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "kernels/kernels.h"

namespace tessera {

namespace {

// splitmix64 + Box-Muller: the same numbers on every platform and compiler.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) / 9007199254740992.0; }
  double normal() {
    if (have_) {
      have_ = false;
      return spare_;
    }
    const double u = uniform(), v = uniform(), r = std::sqrt(-2.0 * std::log(u));
    spare_ = r * std::sin(2 * M_PI * v);
    have_ = true;
    return r * std::cos(2 * M_PI * v);
  }

 private:
  uint64_t s_;
  double spare_ = 0;
  bool have_ = false;
};

std::vector<uint8_t> f16_tensor(Rng& rng, size_t n, double mean, double std) {
  std::vector<uint8_t> out(n * 2);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = float_to_fp16(static_cast<float>(mean + std * rng.normal()));
    std::memcpy(&out[2 * i], &h, 2);
  }
  return out;
}
std::vector<uint8_t> f32_tensor(Rng& rng, size_t n, double mean, double std) {
  std::vector<uint8_t> out(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(mean + std * rng.normal());
    std::memcpy(&out[4 * i], &f, 4);
  }
  return out;
}

uint64_t u(int x) { return static_cast<uint64_t>(x); }

}  // namespace

void vlm_init(const VlmInitOptions& o) {
  auto text = GgufFile::open(o.text_in);
  if (text->get_string("general.architecture") != "llama") fail("%s: expected a llama text model", o.text_in.c_str());
  const int E = static_cast<int>(text->get_int("llama.embedding_length", 1, 65536));
  std::vector<std::string> tokens = text->get("tokenizer.ggml.tokens").strs;
  if (tokens.size() != 49152) fail("%s: expected SmolLM2's 49152-token vocabulary, found %zu", o.text_in.c_str(), tokens.size());
  if (o.hidden % o.heads || o.image_size % o.patch_size || (o.image_size / o.patch_size) % o.scale_factor)
    fail("vision sizes do not divide");
  Rng rng(o.seed);

  // ---- text: SmolVLM's added tokens (ids 49152..49279, as in SmolVLM's tokenizer) ----
  std::vector<std::string> added = {"<global-img>"};
  for (int r = 1; r <= 6; ++r)
    for (int c = 1; c <= 6; ++c) added.push_back("<row_" + std::to_string(r) + "_col_" + std::to_string(c) + ">");
  added.push_back("<fake_token_around_image>");
  added.push_back("<image>");
  while (added.size() < 127) added.push_back("<|reserved_special_token_" + std::to_string(added.size() - 39) + "|>");
  added.push_back("<end_of_utterance>");
  const GgufTensor* emb = text->find_tensor("token_embd.weight");
  if (!emb || emb->dims.size() != 2 || emb->dims[1] != tokens.size()) fail("%s: token_embd.weight is missing or misshapen", o.text_in.c_str());
  const size_t rb = row_bytes(emb->type, emb->dims[0]);
  std::vector<uint8_t> emb_data(emb->data, emb->data + emb->n_bytes);
  // new rows: embeddings of existing tokens picked at random, so they have the usual scale
  for (size_t i = 0; i < added.size(); ++i) {
    const size_t src = 1000 + rng.next() % 40000;
    emb_data.insert(emb_data.end(), emb->data + src * rb, emb->data + (src + 1) * rb);
  }
  // RMS of the real embeddings: the projector is scaled to produce image embeddings like them
  double ss = 0;
  std::vector<float> row(static_cast<size_t>(E));
  for (size_t t = 0; t < 2000; ++t) {
    dequantize_row(emb->type, emb->data + (t * 23) * rb, row.data(), E);
    for (float v : row) ss += static_cast<double>(v) * v;
  }
  const double emb_rms = std::sqrt(ss / (2000.0 * E));

  GgufWriter tw;
  for (const auto& [k, v] : text->metadata()) tw.set(k, v);
  std::vector<int32_t> types;
  const GgufValue& tt = text->get("tokenizer.ggml.token_type");
  for (uint64_t i = 0; i < tt.count; ++i) types.push_back(static_cast<int32_t>(tt.int_at(i)));
  for (const auto& a : added) {
    tokens.push_back(a);
    types.push_back(3);  // control
  }
  tw.set("tokenizer.ggml.tokens", GgufValue::make_strings(tokens));
  tw.set("tokenizer.ggml.token_type", GgufValue::make_i32_array(types));
  if (text->find("llama.vocab_size")) tw.set("llama.vocab_size", GgufValue::make_u32(static_cast<uint32_t>(tokens.size())));
  tw.set("general.name", GgufValue::make_string(text->get_string("general.name", "text") + " + SmolVLM image tokens"));
  for (const auto& t : text->tensors()) {
    if (t.name == "token_embd.weight") tw.add_tensor(t.name, t.type, {t.dims[0], tokens.size()}, emb_data);
    else tw.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  tw.write(o.text_out);

  // ---- mmproj: SigLIP + Idefics3 projector, seeded N(0, 1/fan_in) weights ----
  const int H = o.hidden, P = o.patch_size, NP = (o.image_size / P) * (o.image_size / P), FF = o.ff;
  GgufWriter mw;
  mw.set("general.architecture", GgufValue::make_string("clip"));
  mw.set("general.type", GgufValue::make_string("mmproj"));
  mw.set("general.name", GgufValue::make_string("random SigLIP (seed " + std::to_string(o.seed) + ")"));
  mw.set("clip.has_vision_encoder", GgufValue::make_bool(true));
  mw.set("clip.projector_type", GgufValue::make_string("idefics3"));
  mw.set("clip.use_gelu", GgufValue::make_bool(true));
  mw.set("clip.vision.projection_dim", GgufValue::make_u32(static_cast<uint32_t>(E)));
  mw.set("clip.vision.image_size", GgufValue::make_u32(static_cast<uint32_t>(o.image_size)));
  mw.set("clip.vision.patch_size", GgufValue::make_u32(static_cast<uint32_t>(P)));
  mw.set("clip.vision.embedding_length", GgufValue::make_u32(static_cast<uint32_t>(H)));
  mw.set("clip.vision.feed_forward_length", GgufValue::make_u32(static_cast<uint32_t>(FF)));
  mw.set("clip.vision.block_count", GgufValue::make_u32(static_cast<uint32_t>(o.layers)));
  mw.set("clip.vision.attention.head_count", GgufValue::make_u32(static_cast<uint32_t>(o.heads)));
  mw.set("clip.vision.attention.layer_norm_epsilon", GgufValue::make_f32(1e-6f));
  mw.set("clip.vision.image_mean", GgufValue::make_f32_array({0.5f, 0.5f, 0.5f}));
  mw.set("clip.vision.image_std", GgufValue::make_f32_array({0.5f, 0.5f, 0.5f}));
  mw.set("clip.vision.projector.scale_factor", GgufValue::make_u32(static_cast<uint32_t>(o.scale_factor)));
  mw.set("clip.vision.preproc_image_size", GgufValue::make_u32(static_cast<uint32_t>(o.longest_edge)));
  const double bias = 0.05;
  mw.add_tensor("v.patch_embd.weight", DType::F16, {u(P), u(P), 3, u(H)}, f16_tensor(rng, size_t{3} * P * P * H, 0, 1.0 / std::sqrt(3.0 * P * P)));
  mw.add_tensor("v.patch_embd.bias", DType::F32, {u(H)}, f32_tensor(rng, u(H), 0, bias));
  mw.add_tensor("v.position_embd.weight", DType::F32, {u(H), u(NP)}, f32_tensor(rng, size_t{1} * H * NP, 0, 0.5));
  for (int l = 0; l < o.layers; ++l) {
    const std::string p = "v.blk." + std::to_string(l) + ".";
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      mw.add_tensor(p + n + ".weight", DType::F16, {u(H), u(H)}, f16_tensor(rng, size_t{1} * H * H, 0, 1.0 / std::sqrt(H)));
      mw.add_tensor(p + n + ".bias", DType::F32, {u(H)}, f32_tensor(rng, u(H), 0, bias));
    }
    for (const char* n : {"ln1", "ln2"}) {
      mw.add_tensor(p + n + ".weight", DType::F32, {u(H)}, f32_tensor(rng, u(H), 1.0, 0.1));
      mw.add_tensor(p + n + ".bias", DType::F32, {u(H)}, f32_tensor(rng, u(H), 0, bias));
    }
    mw.add_tensor(p + "ffn_up.weight", DType::F16, {u(H), u(FF)}, f16_tensor(rng, size_t{1} * H * FF, 0, 1.0 / std::sqrt(H)));
    mw.add_tensor(p + "ffn_up.bias", DType::F32, {u(FF)}, f32_tensor(rng, u(FF), 0, bias));
    mw.add_tensor(p + "ffn_down.weight", DType::F16, {u(FF), u(H)}, f16_tensor(rng, size_t{1} * H * FF, 0, 1.0 / std::sqrt(FF)));
    mw.add_tensor(p + "ffn_down.bias", DType::F32, {u(H)}, f32_tensor(rng, u(H), 0, bias));
  }
  mw.add_tensor("v.post_ln.weight", DType::F32, {u(H)}, f32_tensor(rng, u(H), 1.0, 0.1));
  mw.add_tensor("v.post_ln.bias", DType::F32, {u(H)}, f32_tensor(rng, u(H), 0, bias));
  const int in = H * o.scale_factor * o.scale_factor;
  mw.add_tensor("mm.model.fc.weight", DType::F16, {u(in), u(E)}, f16_tensor(rng, size_t{1} * in * E, 0, emb_rms / std::sqrt(in)));
  mw.write(o.mmproj_out);
  std::fprintf(stderr, "wrote %s (%zu tokens) and %s (random SigLIP %dx%d, %d layers, seed %llu)\n", o.text_out.c_str(),
               tokens.size(), o.mmproj_out.c_str(), H, FF, o.layers, static_cast<unsigned long long>(o.seed));
}

}  // namespace tessera
