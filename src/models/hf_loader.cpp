#include "models/hf_loader.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "formats/safetensors.h"

namespace tessera {

namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  MappedFile f(path);
  try {
    return json::parse(f.data(), f.data() + f.size());
  } catch (const json::exception&) {
    fail("%s: not valid JSON", path.c_str());
  }
}

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
      const json j = read_json(index);
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

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorView> views_;
};

template <typename T>
T get(const json& j, const char* key, T lo, T hi, const std::string& file) {
  if (!j.contains(key)) fail("%s: missing '%s'", file.c_str(), key);
  const json& v = j[key];
  if (!v.is_number()) fail("%s: '%s' must be a number", file.c_str(), key);
  const T x = v.get<T>();
  if (!(x >= lo && x <= hi)) fail("%s: '%s' is out of range", file.c_str(), key);
  return x;
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
  if (t.contains("head_dim") && t["head_dim"].is_number() && t["head_dim"].get<int>() * c.n_head != c.n_embd)
    fail("%s: head_dim other than hidden_size / heads is not supported", file.c_str());
  return c;
}

}  // namespace

HfModel load_hf_dir(const std::string& dir) {
  const std::string cfg_path = dir + "/config.json";
  const json cfg = read_json(cfg_path);
  const std::string type = cfg.value("model_type", "");
  auto src = std::make_shared<SafetensorsSource>(dir);
  TokenizerSpec spec = Tokenizer::spec_from_hf_json(dir + "/tokenizer.json");
  const bool tie_top = cfg.contains("tie_word_embeddings") && cfg["tie_word_embeddings"].is_boolean() ? cfg["tie_word_embeddings"].get<bool>() : false;
  HfModel m;
  if (type == "llama") {
    LlamaConfig c = text_config(cfg, tie_top, cfg_path);
    spec.bos = get<int>(cfg, "bos_token_id", -1, c.n_vocab - 1, -1, cfg_path);
    spec.eos = cfg.contains("eos_token_id") && cfg["eos_token_id"].is_number() ? get<int>(cfg, "eos_token_id", -1, c.n_vocab - 1, cfg_path) : -1;
    m.text = LlamaModel::from_hf(c, std::make_unique<Tokenizer>(std::move(spec)), src, "model.");
    return m;
  }
  if (type != "idefics3" && type != "smolvlm") fail("%s: model_type '%s' is not supported (llama, idefics3)", cfg_path.c_str(), type.c_str());
  if (!cfg.contains("text_config") || !cfg["text_config"].is_object() || !cfg.contains("vision_config") || !cfg["vision_config"].is_object())
    fail("%s: text_config and vision_config are required", cfg_path.c_str());
  const json& tc = cfg["text_config"];
  const json& vc = cfg["vision_config"];
  LlamaConfig c = text_config(tc, tie_top, cfg_path);
  spec.bos = get<int>(tc, "bos_token_id", -1, c.n_vocab - 1, -1, cfg_path);
  if (tc.contains("eos_token_id") && tc["eos_token_id"].is_number()) spec.eos = get<int>(tc, "eos_token_id", -1, c.n_vocab - 1, cfg_path);
  m.text = LlamaModel::from_hf(c, std::make_unique<Tokenizer>(std::move(spec)), src, "model.text_model.");

  SiglipConfig v;
  v.hidden = get<int>(vc, "hidden_size", 1, 16384, cfg_path);
  v.layers = get<int>(vc, "num_hidden_layers", 1, 256, cfg_path);
  v.heads = get<int>(vc, "num_attention_heads", 1, 1024, cfg_path);
  v.ff = get<int>(vc, "intermediate_size", 1, 65536, cfg_path);
  v.image_size = get<int>(vc, "image_size", 1, 4096, cfg_path);
  v.patch_size = get<int>(vc, "patch_size", 1, 64, cfg_path);
  v.eps = get<float>(vc, "layer_norm_eps", 1e-12f, 0.1f, 1e-6f, cfg_path);
  const std::string act = vc.value("hidden_act", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh") fail("%s: vision activation '%s' is not supported", cfg_path.c_str(), act.c_str());
  v.scale_factor = get<int>(cfg, "scale_factor", 1, 64, 2, cfg_path);
  v.text_hidden = c.n_embd;

  Idefics3PreprocessConfig pre;
  pre.tile = v.image_size;
  pre.longest_edge = 4 * v.image_size;
  // transformers 4 writes preprocessor_config.json; 5 nests it in processor_config.json
  std::string pp_path = dir + "/preprocessor_config.json";
  json pp;
  if (std::filesystem::exists(pp_path)) {
    pp = read_json(pp_path);
  } else if (std::filesystem::exists(dir + "/processor_config.json")) {
    pp_path = dir + "/processor_config.json";
    const json proc = read_json(pp_path);
    if (proc.contains("image_processor") && proc["image_processor"].is_object()) pp = proc["image_processor"];
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
        const float x = a[static_cast<size_t>(i)].get<float>();
        const bool is_std = std::string(key) == "image_std";
        if (!std::isfinite(x) || (is_std && !(x > 1e-6f)) || std::fabs(x) > 1e3f) fail("%s: %s out of range", pp_path.c_str(), key);
        (is_std ? pre.std : pre.mean)[i] = x;
      }
    }
    if (pp.contains("resample") && pp["resample"].is_number() && pp["resample"].get<int>() != 1)
      fail("%s: only LANCZOS resampling (1) is supported", pp_path.c_str());
  }
  if (pre.longest_edge < pre.tile) fail("%s: longest_edge is smaller than the tile", pp_path.c_str());
  m.vision = Idefics3Vision::from_hf(v, src, pre);
  return m;
}

}  // namespace tessera
