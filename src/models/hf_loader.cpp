#include "models/hf_loader.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "core/error.h"
#include "core/fp16.h"
#include "core/mapped_file.h"
#include "formats/json_input.h"
#include "formats/safetensors.h"

namespace tessera {

namespace {

using nlohmann::json;

constexpr size_t kMaxConfigBytes = size_t{16} << 20;  // config.json files are a few KiB

// One or more safetensors shards presented as one TensorSource (shapes reversed to GGUF order).
class SafetensorsSource : public TensorSource {
 public:
  explicit SafetensorsSource(const std::string& dir) : dir_(dir) {
    namespace fs = std::filesystem;
    std::vector<std::string> shards;
    const std::string index = dir + "/model.safetensors.index.json";
    if (fs::exists(dir + "/model.safetensors")) {
      shards.push_back(dir + "/model.safetensors");
    } else if (fs::exists(index)) {
      const json j = read_json_file(index);
      std::map<std::string, bool> seen;
      try {
        for (auto it = j.at("weight_map").begin(); it != j.at("weight_map").end(); ++it) {
          const std::string shard = it.value().get<std::string>();
          if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
            fail("%s: shard name '%s' is not a plain file name", index.c_str(), shard.c_str());
          if (!seen[shard]) shards.push_back(dir + "/" + shard);
          seen[shard] = true;
        }
      } catch (const json::exception&) {
        fail("%s: no weight_map", index.c_str());
      }
    } else {
      fail("%s: no model.safetensors or model.safetensors.index.json", dir.c_str());
    }
    for (const std::string& s : shards) {
      files_.push_back(SafetensorsFile::open(s));
      for (const auto& [name, t] : files_.back()->tensors()) {
        if (views_.count(name)) fail("%s: tensor '%s' appears in two shards", dir.c_str(), name.c_str());
        TensorView v;
        v.name = name;
        v.type = t.known_dtype ? t.type : DType::I8;  // unreadable dtypes fail in need()
        v.dims.assign(t.shape.rbegin(), t.shape.rend());
        if (v.dims.empty()) v.dims.push_back(1);
        v.data = t.data;
        views_[name] = v;
      }
    }
  }
  const TensorView* find(const std::string& name) const override {
    auto it = views_.find(name);
    return it == views_.end() ? nullptr : &it->second;
  }
  std::string describe() const override { return dir_; }
  size_t release(const uint8_t* p, size_t n) const override {
    size_t dropped = 0;
    for (const auto& f : files_) dropped += f->release(p, n);
    return dropped;
  }

  // MLX affine 4-bit weights (mlx-lm's "quantization": {"group_size", "bits": 4}): each
  // `X.weight` stored as uint32 words of 8 nibbles (element 8j+k in bits 4k..4k+3 of word j)
  // with `X.scales` and `X.biases` per group is repacked at load into the engine's blocks:
  // group 32 -> Q4_1 (scale, bias as d, m), group 64 -> A4G64. Returns the tensors repacked.
  int repack_mlx_affine(int group, const std::string& cfg_path) {
    int repacked = 0;
    size_t inexact = 0, total = 0;
    for (auto& [name, view] : views_) {
      if (name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0) continue;
      const SafetensorsTensor* w = raw(name);
      if (!w || w->dtype != "U32") continue;
      const std::string base = name.substr(0, name.size() - 7);
      const SafetensorsTensor* sc = raw(base + ".scales");
      const SafetensorsTensor* bi = raw(base + ".biases");
      if (!sc || !bi) fail("%s: quantized tensor '%s' has no .scales/.biases", cfg_path.c_str(), name.c_str());
      if (w->shape.size() != 2) fail("%s: quantized tensor '%s' is not a matrix", cfg_path.c_str(), name.c_str());
      const uint64_t rows = w->shape[0], words = w->shape[1], cols = words * 8;
      if (cols % static_cast<uint64_t>(group) != 0) fail("%s: '%s' has %llu columns, not a multiple of group %d", cfg_path.c_str(), name.c_str(), static_cast<unsigned long long>(cols), group);
      const uint64_t groups = cols / static_cast<uint64_t>(group);
      for (const SafetensorsTensor* t : {sc, bi})
        if (t->shape != std::vector<uint64_t>{rows, groups} || !(t->dtype == "F16" || t->dtype == "BF16" || t->dtype == "F32"))
          fail("%s: '%s' must be F16/BF16/F32 of shape [%llu, %llu]", cfg_path.c_str(), t->name.c_str(),
               static_cast<unsigned long long>(rows), static_cast<unsigned long long>(groups));
      const DType out = group == 32 ? DType::Q4_1 : DType::A4G64;
      const size_t rb = row_bytes(out, cols), gb = group == 32 ? 20 : 36;
      owned_.emplace_back(rb * rows);
      uint8_t* dst = owned_.back().data();
      for (uint64_t r = 0; r < rows; ++r) {
        const uint8_t* wr = w->data + r * words * 4;
        for (uint64_t g = 0; g < groups; ++g) {
          uint8_t* blk = dst + r * rb + g * gb;
          const uint16_t h_s = to_half(*sc, r * groups + g, inexact), h_b = to_half(*bi, r * groups + g, inexact);
          total += 2;
          std::memcpy(blk, &h_s, 2);
          std::memcpy(blk + 2, &h_b, 2);
          std::memset(blk + 4, 0, gb - 4);
          for (int j = 0; j < group; ++j) {
            const uint64_t e = g * static_cast<uint64_t>(group) + static_cast<uint64_t>(j);
            uint32_t word;
            std::memcpy(&word, wr + (e / 8) * 4, 4);
            const uint8_t q = static_cast<uint8_t>((word >> (4 * (e % 8))) & 0xF);
            const int half = j / 32, jj = j % 32;  // Q4_1 nibble order within each 32
            uint8_t& byte = blk[4 + 16 * half + jj % 16];
            byte = static_cast<uint8_t>(byte | (jj < 16 ? q : q << 4));
          }
        }
      }
      view.type = out;
      view.dims = {cols, rows};
      view.data = dst;
      ++repacked;
    }
    if (inexact)
      std::fprintf(stderr, "note: %zu of %zu MLX scales/biases are not exactly representable in fp16 (rounded)\n", inexact, total);
    return repacked;
  }

 private:
  const SafetensorsTensor* raw(const std::string& name) const {
    for (const auto& f : files_)
      if (const SafetensorsTensor* t = f->find(name)) return t;
    return nullptr;
  }
  static uint16_t to_half(const SafetensorsTensor& t, uint64_t i, size_t& inexact) {
    float v;
    if (t.dtype == "F32") {
      std::memcpy(&v, t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      if (t.dtype == "F16") return h;
      v = bf16_to_float(h);
    }
    const uint16_t h = float_to_fp16(v);
    if (fp16_to_float(h) != v) ++inexact;
    return h;
  }

  std::string dir_;
  std::vector<std::vector<uint8_t>> owned_;  // repacked weights
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorView> views_;
};

// Integers are range-checked as 64-bit values before narrowing (json_int); floats as doubles.
template <typename T>
T get(const json& j, const char* key, T lo, T hi, const std::string& file) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(json_int(j, key, lo, hi, file));
  } else {
    if (!j.contains(key)) fail("%s: missing '%s'", file.c_str(), key);
    const json& v = j[key];
    if (!v.is_number()) fail("%s: '%s' must be a number", file.c_str(), key);
    const double x = v.get<double>();
    if (!(x >= static_cast<double>(lo) && x <= static_cast<double>(hi))) fail("%s: '%s' is out of range", file.c_str(), key);
    return static_cast<T>(x);
  }
}
template <typename T>
T get(const json& j, const char* key, T lo, T hi, T fallback, const std::string& file) {
  return j.contains(key) && !j[key].is_null() ? get<T>(j, key, lo, hi, file) : fallback;
}

LlamaConfig text_config(const json& t, bool tie_default, const std::string& file) {
  LlamaConfig c;
  c.n_embd = get<int>(t, "hidden_size", 1, 65536, file);
  c.n_layer = get<int>(t, "num_hidden_layers", 1, 1024, file);
  c.n_head = get<int>(t, "num_attention_heads", 1, 1024, file);
  c.n_head_kv = get<int>(t, "num_key_value_heads", 1, 1024, c.n_head, file);
  c.n_ff = get<int>(t, "intermediate_size", 1, 1 << 20, file);
  c.n_vocab = get<int>(t, "vocab_size", 1, 1 << 22, file);
  c.n_ctx_train = get<int>(t, "max_position_embeddings", 1, 1 << 24, 8192, file);
  c.rms_eps = get<float>(t, "rms_norm_eps", 1e-12f, 1.0f, 1e-5f, file);
  float theta = get<float>(t, "rope_theta", 1.0f, 1e12f, 10000.0f, file);
  if (t.contains("rope_parameters") && t["rope_parameters"].is_object())  // transformers 5 layout
    theta = get<float>(t["rope_parameters"], "rope_theta", 1.0f, 1e12f, theta, file);
  c.rope_base = theta;
  c.tied_embeddings = t.contains("tie_word_embeddings") && t["tie_word_embeddings"].is_boolean() ? t["tie_word_embeddings"].get<bool>() : tie_default;
  c.head_dim = get<int>(t, "head_dim", 2, 1024, c.n_embd / c.n_head, file);
  return c;
}

// bos_token_id and eos_token_id (an integer; an eos list is left to the tokenizer's own stops)
void read_special_ids(const json& t, const std::string& file, HfConfig& h) {
  h.bos = get<int>(t, "bos_token_id", -1, h.text.n_vocab - 1, -1, file);
  h.eos = t.contains("eos_token_id") && t["eos_token_id"].is_number() ? get<int>(t, "eos_token_id", -1, h.text.n_vocab - 1, file) : -1;
}

}  // namespace

HfConfig parse_hf_config(const std::string& config_text, const std::string& processor_text, const std::string& cfg_path,
                         const std::string& pp_path) {
  const json cfg = parse_json(reinterpret_cast<const uint8_t*>(config_text.data()), config_text.size(), cfg_path);
  if (!cfg.is_object()) fail("%s: not a JSON object", cfg_path.c_str());
  HfConfig h;
  h.type = cfg.contains("model_type") && cfg["model_type"].is_string() ? cfg["model_type"].get<std::string>() : "";
  if (cfg.contains("quantization")) {  // mlx-lm's quantized checkpoints
    const json& q = cfg["quantization"];
    if (!q.is_object()) fail("%s: 'quantization' is not an object", cfg_path.c_str());
    const int bits = get<int>(q, "bits", 1, 16, cfg_path), group = get<int>(q, "group_size", 1, 1024, cfg_path);
    const std::string mode = q.contains("mode") && q["mode"].is_string() ? q["mode"].get<std::string>() : "affine";
    if (bits != 4 || mode != "affine" || (group != 32 && group != 64))
      fail("%s: MLX quantization bits=%d group_size=%d mode=%s is not supported (4-bit affine, group 32 or 64)", cfg_path.c_str(),
           bits, group, mode.c_str());
    h.mlx_group = group;
  }
  const bool tie_top = cfg.contains("tie_word_embeddings") && cfg["tie_word_embeddings"].is_boolean() ? cfg["tie_word_embeddings"].get<bool>() : false;
  if (h.type == "qwen3_vl") {  // text_config, and vision_config when the directory holds the tower
    if (!cfg.contains("text_config") || !cfg["text_config"].is_object()) fail("%s: text_config is required", cfg_path.c_str());
    h.text = text_config(cfg["text_config"], tie_top, cfg_path);
    h.text.qk_norm = true;
    h.text_prefix = "model.language_model.";
    const json& tc = cfg["text_config"];
    if (cfg.contains("vision_config") && cfg["vision_config"].is_object()) {
      const json& vc = cfg["vision_config"];
      Qwen3VLVisionConfig& v = h.qwen_vision;
      h.has_qwen_vision = true;
      v.hidden = get<int>(vc, "hidden_size", 1, 16384, cfg_path);
      v.depth = get<int>(vc, "depth", 1, 256, cfg_path);
      v.heads = get<int>(vc, "num_heads", 1, 1024, cfg_path);
      v.ff = get<int>(vc, "intermediate_size", 1, 65536, cfg_path);
      v.patch = get<int>(vc, "patch_size", 1, 64, cfg_path);
      v.temporal = get<int>(vc, "temporal_patch_size", 1, 4, 2, cfg_path);
      v.merge = get<int>(vc, "spatial_merge_size", 1, 8, 2, cfg_path);
      v.out_hidden = get<int>(vc, "out_hidden_size", 1, 65536, cfg_path);
      v.n_pos = get<int>(vc, "num_position_embeddings", 1, 1 << 20, cfg_path);
      const std::string act = vc.contains("hidden_act") && vc["hidden_act"].is_string() ? vc["hidden_act"].get<std::string>() : "gelu_pytorch_tanh";
      if (act != "gelu_pytorch_tanh") fail("%s: vision activation '%s' is not supported", cfg_path.c_str(), act.c_str());
      if (vc.contains("deepstack_visual_indexes")) {
        const json& ds = vc["deepstack_visual_indexes"];
        if (!ds.is_array() || ds.size() > 64) fail("%s: deepstack_visual_indexes must be a list", cfg_path.c_str());
        for (const json& d : ds) v.deepstack.push_back(static_cast<int>(json_int_value(d, 0, v.depth - 1, cfg_path + ": deepstack_visual_indexes")));
      }
      h.text.deepstack_layers = static_cast<int>(v.deepstack.size());
    }
    // transformers 5 writes rope_parameters, 4.x rope_scaling
    const char* rope_key = tc.contains("rope_parameters") ? "rope_parameters" : "rope_scaling";
    if (tc.contains(rope_key) && tc[rope_key].is_object() && tc[rope_key].contains("mrope_section")) {
      const json& sec = tc[rope_key]["mrope_section"];
      if (!sec.is_array() || sec.size() != 3) fail("%s: mrope_section must be 3 integers", cfg_path.c_str());
      for (int i = 0; i < 3; ++i) h.text.mrope[i] = json_int_value(sec[static_cast<size_t>(i)], 0, h.text.head_dim / 2, cfg_path + ": mrope_section");
    }
    read_special_ids(tc, cfg_path, h);
    return h;
  }
  if (h.type == "llama" || h.type == "qwen3") {
    h.text = text_config(cfg, tie_top, cfg_path);
    h.text.qk_norm = h.type == "qwen3";
    read_special_ids(cfg, cfg_path, h);
    return h;
  }
  if (h.type != "idefics3" && h.type != "smolvlm") fail("%s: model_type '%s' is not supported (llama, qwen3, qwen3_vl, idefics3)", cfg_path.c_str(), h.type.c_str());
  h.text_prefix = "model.text_model.";
  if (!cfg.contains("text_config") || !cfg["text_config"].is_object() || !cfg.contains("vision_config") || !cfg["vision_config"].is_object())
    fail("%s: text_config and vision_config are required", cfg_path.c_str());
  const json& tc = cfg["text_config"];
  const json& vc = cfg["vision_config"];
  h.text = text_config(tc, tie_top, cfg_path);
  read_special_ids(tc, cfg_path, h);

  h.has_vision = true;
  SiglipConfig& v = h.vision;
  v.hidden = get<int>(vc, "hidden_size", 1, 16384, cfg_path);
  v.layers = get<int>(vc, "num_hidden_layers", 1, 256, cfg_path);
  v.heads = get<int>(vc, "num_attention_heads", 1, 1024, cfg_path);
  v.ff = get<int>(vc, "intermediate_size", 1, 65536, cfg_path);
  v.image_size = get<int>(vc, "image_size", 1, 4096, cfg_path);
  v.patch_size = get<int>(vc, "patch_size", 1, 64, cfg_path);
  v.eps = get<float>(vc, "layer_norm_eps", 1e-12f, 0.1f, 1e-6f, cfg_path);
  const std::string act = vc.contains("hidden_act") && vc["hidden_act"].is_string() ? vc["hidden_act"].get<std::string>() : "gelu_pytorch_tanh";
  if (act != "gelu_pytorch_tanh") fail("%s: vision activation '%s' is not supported", cfg_path.c_str(), act.c_str());
  v.scale_factor = get<int>(cfg, "scale_factor", 1, 64, 2, cfg_path);
  v.text_hidden = h.text.n_embd;

  Idefics3PreprocessConfig& pre = h.preprocess;
  pre.tile = v.image_size;
  pre.longest_edge = 4 * v.image_size;
  json pp;
  if (!processor_text.empty()) {
    pp = parse_json(reinterpret_cast<const uint8_t*>(processor_text.data()), processor_text.size(), pp_path);
    // transformers 4 writes preprocessor_config.json; 5 nests it in processor_config.json
    if (pp.is_object() && pp.contains("image_processor") && pp["image_processor"].is_object()) pp = json(pp["image_processor"]);
  }
  if (pp.is_object()) {
    if (pp.contains("size") && pp["size"].is_object()) pre.longest_edge = get<int>(pp["size"], "longest_edge", 1, 1 << 16, pre.longest_edge, pp_path);
    if (pp.contains("max_image_size") && pp["max_image_size"].is_object()) {
      const int t = get<int>(pp["max_image_size"], "longest_edge", 1, 1 << 16, pre.tile, pp_path);
      if (t != v.image_size) fail("%s: max_image_size %d differs from the encoder's image size %d", pp_path.c_str(), t, v.image_size);
    }
    if (pp.contains("do_image_splitting") && pp["do_image_splitting"].is_boolean()) pre.split = pp["do_image_splitting"].get<bool>();
    for (const char* key : {"image_mean", "image_std"}) {
      if (!pp.contains(key)) continue;
      const json& a = pp[key];
      if (!a.is_array() || a.size() != 3) fail("%s: %s must be a list of 3 numbers", pp_path.c_str(), key);
      for (int i = 0; i < 3; ++i) {
        if (!a[static_cast<size_t>(i)].is_number()) fail("%s: %s must be a list of 3 numbers", pp_path.c_str(), key);
        const double x = a[static_cast<size_t>(i)].get<double>();
        const bool is_std = std::string(key) == "image_std";
        if (!std::isfinite(x) || (is_std && !(x > 1e-6)) || std::fabs(x) > 1e3) fail("%s: %s out of range", pp_path.c_str(), key);
        (is_std ? pre.std : pre.mean)[i] = static_cast<float>(x);
      }
    }
    if (pp.contains("resample") && pp["resample"].is_number() && get<int>(pp, "resample", 0, 5, pp_path) != 1)
      fail("%s: only LANCZOS resampling (1) is supported", pp_path.c_str());
  }
  if (pre.longest_edge < pre.tile) fail("%s: longest_edge is smaller than the tile", pp_path.c_str());
  return h;
}

HfModel load_hf_dir(const std::string& dir, bool vision_q8_0) {
  namespace fs = std::filesystem;
  const std::string cfg_path = dir + "/config.json";
  std::string pp_path = dir + "/preprocessor_config.json";
  if (!fs::exists(pp_path) && fs::exists(dir + "/processor_config.json")) pp_path = dir + "/processor_config.json";
  const HfConfig h = parse_hf_config(read_small_file(cfg_path, kMaxConfigBytes, "config"),
                                     fs::exists(pp_path) ? read_small_file(pp_path, kMaxConfigBytes, "processor config") : std::string(),
                                     cfg_path, pp_path);
  auto src = std::make_shared<SafetensorsSource>(dir);
  if (h.mlx_group && src->repack_mlx_affine(h.mlx_group, cfg_path) == 0)
    fail("%s: 'quantization' is set but no tensor is quantized", cfg_path.c_str());
  TokenizerSpec spec = Tokenizer::spec_from_hf_json(dir + "/tokenizer.json");
  spec.bos = h.bos;
  spec.eos = h.eos;
  HfModel m;
  m.text = LlamaModel::from_hf(h.text, std::make_unique<Tokenizer>(std::move(spec)), src, h.text_prefix);
  if (h.has_vision) m.vision = Idefics3Vision::from_hf(h.vision, src, h.preprocess, vision_q8_0);
  if (h.has_qwen_vision) m.qwen_vision = Qwen3VLVision::from_hf(h.qwen_vision, src);
  return m;
}

}  // namespace tessera
