#include "plan/model_spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "formats/gguf.h"
#include "kernels/exact_repack.h"
#include "models/footprint.h"
#include "models/gguf_convert.h"
#include "models/hf_loader.h"
#include "models/open_model.h"

namespace tessera::plan {

namespace {

// Published configurations (config.json as the model's Hugging Face repository has it, the keys
// the loader reads). Sources: docs/plan.md.
struct Builtin {
  const char* name;
  const char* config;
};
const Builtin kBuiltins[] = {
    {"smolvlm-256m",
     R"({"model_type": "idefics3", "scale_factor": 4, "tie_word_embeddings": false,
         "text_config": {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
                         "num_key_value_heads": 3, "vocab_size": 49280, "rope_theta": 100000, "max_position_embeddings": 8192},
         "vision_config": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
                           "image_size": 512, "patch_size": 16}})"},
    {"smolvlm-500m",
     R"({"model_type": "idefics3", "scale_factor": 4, "tie_word_embeddings": false,
         "text_config": {"hidden_size": 960, "intermediate_size": 2560, "num_hidden_layers": 32, "num_attention_heads": 15,
                         "num_key_value_heads": 5, "vocab_size": 49280, "rope_theta": 100000, "max_position_embeddings": 8192},
         "vision_config": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
                           "image_size": 512, "patch_size": 16}})"},
    {"qwen3-vl-2b",
     R"({"model_type": "qwen3_vl", "tie_word_embeddings": true,
         "text_config": {"hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16,
                         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rope_theta": 5000000,
                         "max_position_embeddings": 262144, "rope_scaling": {"mrope_section": [24, 20, 20]}},
         "vision_config": {"depth": 24, "hidden_size": 1024, "num_heads": 16, "intermediate_size": 4096, "patch_size": 16,
                           "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 2048,
                           "num_position_embeddings": 2304, "deepstack_visual_indexes": [5, 11, 17]}})"},
    {"qwen3-vl-4b",
     R"({"model_type": "qwen3_vl", "tie_word_embeddings": true,
         "text_config": {"hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32,
                         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rope_theta": 5000000,
                         "max_position_embeddings": 262144, "rope_scaling": {"mrope_section": [24, 20, 20]}},
         "vision_config": {"depth": 24, "hidden_size": 1024, "num_heads": 16, "intermediate_size": 4096, "patch_size": 16,
                           "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 2560,
                           "num_position_embeddings": 2304, "deepstack_visual_indexes": [5, 11, 17]}})"},
    {"qwen3-vl-8b",
     R"({"model_type": "qwen3_vl", "tie_word_embeddings": false,
         "text_config": {"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
                         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "rope_theta": 5000000,
                         "max_position_embeddings": 262144, "rope_scaling": {"mrope_section": [24, 20, 20]}},
         "vision_config": {"depth": 27, "hidden_size": 1152, "num_heads": 16, "intermediate_size": 4304, "patch_size": 16,
                           "temporal_patch_size": 2, "spatial_merge_size": 2, "out_hidden_size": 4096,
                           "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24]}})"},
};

// `t` as stored; the engine holds Q3_K and IQ4_NL in another type (kernels/exact_repack.h)
void add(ModelSpec& m, const std::string& name, int64_t rows, int64_t cols, DType t, bool vision) {
  m.tensors.push_back({name, rows, cols, exact_repack_type(t), vision, t});
}

// The weights a configuration implies, named as llama.cpp's converter names them, matrices in
// `t`, norms and position tables in f32.
void synthesize_text(ModelSpec& m, DType t) {
  const LlamaConfig& c = m.text;
  const int64_t E = c.n_embd, QD = c.q_dim(), KV = static_cast<int64_t>(c.n_head_kv) * c.head_dim, FF = c.n_ff;
  add(m, "token_embd.weight", c.n_vocab, E, t, false);
  if (!c.tied_embeddings) add(m, "output.weight", c.n_vocab, E, t, false);
  add(m, "output_norm.weight", 1, E, DType::F32, false);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(m, p + "attn_q.weight", QD, E, t, false);
    add(m, p + "attn_k.weight", KV, E, t, false);
    add(m, p + "attn_v.weight", KV, E, t, false);
    add(m, p + "attn_output.weight", E, QD, t, false);
    add(m, p + "ffn_gate.weight", FF, E, t, false);
    add(m, p + "ffn_up.weight", FF, E, t, false);
    add(m, p + "ffn_down.weight", E, FF, t, false);
    add(m, p + "attn_norm.weight", 1, E, DType::F32, false);
    add(m, p + "ffn_norm.weight", 1, E, DType::F32, false);
    if (c.qk_norm) add(m, p + "attn_q_norm.weight", 1, c.head_dim, DType::F32, false), add(m, p + "attn_k_norm.weight", 1, c.head_dim, DType::F32, false);
    if (c.post_norms) add(m, p + "post_attention_norm.weight", 1, E, DType::F32, false), add(m, p + "post_ffw_norm.weight", 1, E, DType::F32, false);
  }
}

void synthesize_vision(ModelSpec& m, DType t) {
  if (m.vision == VisionFamily::Idefics3) {
    const SiglipConfig& v = m.siglip;
    const int64_t H = v.hidden;
    add(m, "v.patch_embd.weight", H, 3 * v.patch_size * v.patch_size, t, true);
    add(m, "v.position_embd.weight", v.n_patches(), H, DType::F32, true);
    for (int l = 0; l < v.layers; ++l) {
      const std::string p = "v.blk." + std::to_string(l) + ".";
      for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_out"}) add(m, p + n + ".weight", H, H, t, true);
      add(m, p + "ffn_up.weight", v.ff, H, t, true);
      add(m, p + "ffn_down.weight", H, v.ff, t, true);
    }
    add(m, "mm.model.fc.weight", v.text_hidden, H * v.scale_factor * v.scale_factor, t, true);
  } else if (m.vision == VisionFamily::Qwen3VL) {
    const Qwen3VLVisionConfig& v = m.qwen;
    const int64_t H = v.hidden, M = H * v.merge * v.merge;
    add(m, "v.patch_embd.weight", H, 3 * v.temporal * v.patch * v.patch, t, true);
    add(m, "v.position_embd.weight", v.n_pos, H, DType::F32, true);
    for (int l = 0; l < v.depth; ++l) {
      const std::string p = "v.blk." + std::to_string(l) + ".";
      add(m, p + "attn_qkv.weight", 3 * H, H, t, true);
      add(m, p + "attn_out.weight", H, H, t, true);
      add(m, p + "ffn_up.weight", v.ff, H, t, true);
      add(m, p + "ffn_down.weight", H, v.ff, t, true);
    }
    for (size_t k = 0; k <= v.deepstack.size(); ++k) {
      const std::string p = k == 0 ? "mm." : "v.deepstack." + std::to_string(k - 1) + ".";
      add(m, p + "fc1.weight", M, M, t, true);
      add(m, p + "fc2.weight", v.out_hidden, M, t, true);
    }
  }
}

ModelSpec from_hf_config(const std::string& config_text, const std::string& processor_text, const std::string& name,
                         const std::string& source, const std::string& cfg_path, const std::string& pp_path) {
  const HfConfig h = parse_hf_config(config_text, processor_text, cfg_path, pp_path);
  ModelSpec m;
  m.name = name;
  m.source = source;
  m.text = h.text;
  if (h.has_vision) m.vision = VisionFamily::Idefics3, m.siglip = h.vision, m.idefics3 = h.preprocess;
  if (h.has_qwen_vision) m.vision = VisionFamily::Qwen3VL, m.qwen = h.qwen_vision;
  // Hugging Face checkpoints are published in bf16; mlx-lm's 4-bit ones in its affine groups
  const DType t = h.mlx_group == 64 ? DType::A4G64 : h.mlx_group == 32 ? DType::Q4_1 : DType::BF16;
  synthesize_text(m, t);
  synthesize_vision(m, DType::BF16);
  return m;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("%s: cannot be read", path.c_str());
  std::ostringstream s;
  s << f.rdbuf();
  if (s.str().size() > (64u << 20)) fail("%s: too large for a configuration file", path.c_str());
  return s.str();
}

void add_gguf_tensors(ModelSpec& m, const GgufFile& f, bool vision) {
  for (const GgufTensor& t : f.tensors()) {
    const int64_t cols = static_cast<int64_t>(t.dims[0]);
    const int64_t rows = cols ? static_cast<int64_t>(t.n_elements / t.dims[0]) : 0;
    add(m, t.name, rows, cols, t.type, vision);
  }
}

}  // namespace

size_t WeightTensor::bytes() const { return row_bytes(type, static_cast<uint64_t>(cols)) * static_cast<size_t>(rows); }

const WeightTensor* ModelSpec::find(const std::string& n) const {
  for (const WeightTensor& t : tensors)
    if (t.name == n) return &t;
  return nullptr;
}

double ModelSpec::params(bool vision_part) const {
  double p = 0;
  for (const WeightTensor& t : tensors)
    if (t.vision == vision_part) p += static_cast<double>(t.rows) * static_cast<double>(t.cols);
  return p;
}

size_t ModelSpec::bytes(bool vision_part) const {
  size_t b = 0;
  for (const WeightTensor& t : tensors)
    if (t.vision == vision_part) b += t.bytes();
  return b;
}

DType ModelSpec::main_type(bool vision_part) const {
  std::map<DType, size_t> by;
  for (const WeightTensor& t : tensors)
    if (t.vision == vision_part && t.rows > 1) by[t.type] += t.bytes();
  DType best = DType::F32;
  size_t most = 0;
  for (const auto& [t, b] : by)
    if (b > most) best = t, most = b;
  return best;
}

const std::vector<std::string>& builtin_models() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Builtin& b : kBuiltins) n.push_back(b.name);
    return n;
  }();
  return names;
}

ModelSpec open_model_spec(const std::string& what, const std::string& mmproj) {
  for (const Builtin& b : kBuiltins)
    if (what == b.name) {
      if (!mmproj.empty()) fail("--mmproj goes with a GGUF text model, not the built-in '%s'", b.name);
      return from_hf_config(b.config, "", b.name, "built-in configuration", b.name, b.name);
    }
  std::error_code ec;
  if (std::filesystem::is_directory(what, ec) || (what.size() > 5 && what.substr(what.size() - 5) == ".json")) {
    if (!mmproj.empty()) fail("--mmproj goes with a GGUF text model, not a Hugging Face configuration");
    const bool dir = std::filesystem::is_directory(what, ec);
    const std::string cfg = dir ? (std::filesystem::path(what) / "config.json").string() : what;
    const std::string base = std::filesystem::path(cfg).parent_path().string();
    std::string pp_path;
    for (const char* n : {"preprocessor_config.json", "processor_config.json"}) {
      const std::string p = (std::filesystem::path(base.empty() ? "." : base) / n).string();
      if (std::filesystem::is_regular_file(p, ec)) {
        pp_path = p;
        break;
      }
    }
    const std::string name = std::filesystem::path(dir ? what : base.empty() ? what : base).filename().string();
    return from_hf_config(read_text(cfg), pp_path.empty() ? "" : read_text(pp_path), name, what, cfg, pp_path);
  }
  ModelSpec m;
  const std::unique_ptr<GgufFile> f = GgufFile::open(what);
  m.text = read_llama_config(*f, what);
  const GgufTensor* emb = f->find_tensor("token_embd.weight");
  if (!emb || emb->dims.size() != 2) fail("%s: no token_embd.weight matrix", what.c_str());
  m.text.n_vocab = static_cast<int>(std::min<uint64_t>(emb->dims[1], 1u << 24));
  m.text.tied_embeddings = f->find_tensor("output.weight") == nullptr;
  m.name = std::filesystem::path(what).filename().string();
  m.source = what;
  add_gguf_tensors(m, *f, false);
  if (!mmproj.empty()) {
    const std::unique_ptr<GgufFile> v = GgufFile::open(mmproj);
    const std::string proj = mmproj_projector_type(mmproj);
    if (proj == "qwen3vl_merger") m.vision = VisionFamily::Qwen3VL, m.qwen = read_qwen3vl_vision_config(*v, mmproj);
    else m.vision = VisionFamily::Idefics3, m.siglip = read_siglip_config(*v, mmproj, m.idefics3);
    add_gguf_tensors(m, *v, true);
    m.name += " + " + std::filesystem::path(mmproj).filename().string();
  }
  return m;
}

ModelSpec with_weight_types(const ModelSpec& m, DType text_type, DType vision_type) {
  ModelSpec out = m;
  for (WeightTensor& t : out.tensors) {
    const DType want = t.vision ? vision_type : text_type;
    if (want == kKeepType || t.rows <= 1) continue;  // norms and biases keep their type
    if (info(want).block_elems == 1 && t.name.find("position_embd") != std::string::npos) continue;
    t.stored = convert_target_type(t.name, {static_cast<uint64_t>(t.cols), static_cast<uint64_t>(t.rows)}, t.stored, want);
    t.type = exact_repack_type(t.stored);
  }
  return out;
}

}  // namespace tessera::plan
