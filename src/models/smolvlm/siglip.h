// SigLIP vision encoder (Idefics3/SmolVLM flavour) and the Idefics3 connector: patch embedding,
// learned position embeddings, pre-norm encoder blocks with bidirectional attention and a
// GELU-tanh MLP, post-layernorm; then pixel shuffle and a bias-free linear projection.
// One call encodes one tile; tiles never see each other, so per-tile results can be cached.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/attention.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernels.h"
#include "models/tensor_source.h"
#include "models/smolvlm/preprocess.h"

namespace tessera {

struct SiglipConfig {
  int image_size = 512, patch_size = 16, hidden = 768, layers = 12, heads = 12, ff = 3072;
  float eps = 1e-6f;
  int scale_factor = 4;   // pixel shuffle
  int text_hidden = 576;  // projector output width
  int n_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
  int tokens_per_tile() const { return n_patches() / (scale_factor * scale_factor); }
};

// The encoder's attention over one tile: every head, bidirectional, over its n_patches keys.
AttentionShape tile_attention_shape(const SiglipConfig& c);

// What a SmolVLM mmproj GGUF's metadata gives (clip.* keys), every number range-checked, and the
// preprocessing settings it carries (into `pre`). Throws Error.
SiglipConfig read_siglip_config(const GgufFile& f, const std::string& path, Idefics3PreprocessConfig& pre);

struct Linear {
  WeightMatrix w;
  std::vector<float> b;  // empty when the layer has no bias
};

struct SiglipLayer {
  std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
  Linear q, k, v, o, fc1, fc2;
  // With bf16 GEMMs (use_bf16_gemm): q, k and v stacked into one matrix (bf16_tiles.h), whose
  // tiles q, k and v then view; its bias the three biases in a row. Unset otherwise.
  Linear qkv;
};

class Idefics3Vision {
 public:
  // llama.cpp's mmproj GGUF (clip.* keys, v.* and mm.* tensors). With q8_0, the float layers are
  // loaded as quantize_to_q8_0() leaves them, straight from the file (no float panels between:
  // the load's peak memory is the Q8_0 weights', not the float ones').
  static std::unique_ptr<Idefics3Vision> load_mmproj(const std::string& path, bool q8_0 = false);
  // Tensors named as Hugging Face's Idefics3ForConditionalGeneration saves them; q8_0 likewise.
  static std::unique_ptr<Idefics3Vision> from_hf(const SiglipConfig& cfg, std::shared_ptr<const TensorSource> src,
                                                 const Idefics3PreprocessConfig& pre, bool q8_0 = false);

  const SiglipConfig& config() const { return cfg_; }
  const Idefics3PreprocessConfig& preprocess_config() const { return pre_; }
  // The processor's size.longest_edge (at least one tile; the mmproj's preproc_image_size by default).
  void set_longest_edge(int edge);

  // What a tile's encoding leaves behind for a later gated re-encoding of the same tile
  // position: every layer's keys and values, and the encoder output (N x H floats). The keys
  // and values are fp32 (k, v: layers x N x H), or, where the bf16 attention runs (bf16 and
  // 8-bit paths), that attention's own packed bf16 layouts (k16, v16: per layer,
  // bf16_attn_k_elems / bf16_attn_v_elems): half the memory, written by the fused q/k/v GEMM
  // or by the attention's own packing, and a gated re-encoding rounds only its changed keys into
  // them instead of repacking all.
  struct TileState {
    std::vector<float> k, v, encoded;
    std::vector<uint16_t> k16, v16;
  };

  // Encodes one normalised tile [3][S][S] into n_patches x hidden (after the post-layernorm);
  // with `record`, also keeps its per-layer keys/values (no change to the result).
  void encode_tile(const float* chw, float* encoded, ThreadPool& pool, TileState* record = nullptr) const;
  // Token gating (Eventful-Transformer style, approximate): re-encodes a tile of which only the
  // patches `changed` differ from the tile `state` was recorded from. Only those patches'
  // tokens are recomputed in every layer -- against the other tokens' cached keys and values --
  // and the other tokens keep their previous outputs (what the changed tokens would have done to
  // them is the approximation). Updates `state` to describe the new tile.
  void encode_tile_gated(const float* chw, const std::vector<int>& changed, TileState& state, float* encoded,
                         ThreadPool& pool) const;
  // Pixel shuffle + projection: n_patches x hidden -> tokens_per_tile() x text_hidden.
  void connector(const float* encoded, float* out, ThreadPool& pool) const;
  // From now on, run every linear layer whose weights are Q8_0, Q4_0, Q4_1, Q4_K or A4G64 (a
  // quantized mmproj) on 8-bit activations, as llama.cpp's CPU backend does for such weights:
  // inputs quantized per 32 (quantize_row_q8_1), integer block dots (matmul_q8, VNNI where the
  // CPU has it). Repacks those weights into q8 panels once; float weights keep the fp32 GEMM.
  // Returns the number of layers switched. Like every kernel path, results stay bitwise the
  // same across thread counts and batch sizes (so gated re-encoding keeps its guarantees).
  int use_q8_activations();
  // From now on, run every float linear layer (F32, F16, BF16: an f16 mmproj's) but the patch
  // embedding as Q8_0 on 8-bit activations: the weights quantized to Q8_0 once -- the very bytes
  // `tessera convert --type q8_0` writes for them -- and repacked into q8 panels, which are all
  // that is kept. So the results are bitwise those of the converted file after
  // use_q8_activations(), on every kernel level. The CLI's default for a float mmproj where this is
  // faster than its 16-bit path (AMD Zen 4: q8_vision_fast() with bf16_gemm_fast()); its quality
  // cost: docs/numerics.md. Returns the number of layers switched.
  int quantize_to_q8_0(ThreadPool& pool);
  // Layers quantize_to_q8_0() switched (their weights were float in the file).
  int quantized_at_load() const { return quantized_at_load_; }
  // From now on, run every linear layer not on 8-bit activations (F32, F16, BF16 weights, and
  // llama.cpp's block types, dequantized: supports_bf16_tiles) as the bf16 GEMM on AMX or
  // AVX512-BF16 (kernels/bf16_tiles.h), and the attention as the bf16 attention
  // (kernels/attention_bf16.h): inputs rounded to bf16, fp32 sums. Repacks those weights into
  // bf16 tiles once. Fails with a one-line error where the CPU or OS gives neither. Results
  // stay bitwise the same across thread counts and batch sizes; they differ from the fp32 path by
  // the bf16 rounding of the inputs (docs/numerics.md). Returns the number of layers switched.
  int use_bf16_gemm();
  bool bf16() const { return bf16_attention_; }  // use_bf16_gemm() was called
  // From now on, run every linear layer not on 8-bit activations or bf16 as the fp16 GEMM on
  // AVX512-FP16 (kernels/f16_tiles.h: inputs rounded to fp16, products summed in fp16 over chunks
  // of 128 k, the chunks in fp32), and the attention as the fp16 attention (attention_f16.h) over
  // fp32 K/V rows (so a recorded state keeps fp32 K/V). Repacks those weights into f16 tiles
  // once. Fails with a one-line error where the CPU has no AVX512-FP16. Bitwise invariant across
  // thread counts and batch sizes, like every path. Returns the number of layers switched.
  int use_f16_gemm();
  // Bytes of the mmproj file whose pages were given back once repacked (fp32-GEMM panels at load,
  // a quantized matrix's tiles or q8 panels later): a memory plan counts the file less these.
  size_t released_file_bytes() const { return released_file_bytes_; }
  // Bytes of the repacked weights held (panels and tiles; the file's own pages not counted).
  size_t packed_bytes() const { return packed_bytes_; }
  // The arithmetic: "bf16", "f16" or "fp32"; with 8-bit activations in the quantized layers
  // "int8+bf16" etc. (the attention and any float layers keep the named one).
  const char* precision() const {
    if (q8_) return bf16_attention_ ? "int8+bf16" : f16_ ? "int8+f16" : "int8+fp32";
    return bf16_attention_ ? "bf16" : f16_ ? "f16" : "fp32";
  }

 private:
  Idefics3Vision() = default;
  void load_weights(const TensorSource& src, bool gguf_names, bool q8_0_at_load);
  void quantize_at_load();  // quantize_to_q8_0 on a pool of all cores (load_mmproj/from_hf with q8_0)
  // Every linear layer's weights: the patch embedding, q k v o fc1 fc2 per layer, the projection.
  std::vector<WeightMatrix*> linear_weights();
  // Frees the fp32-GEMM panels w was read from (its 16-bit tiles replace them) and unlinks them.
  void drop_gemm_panels(WeightMatrix& w);
  // Gives back the file pages of a matrix repacked straight from the file (a quantized type: no
  // fp32-GEMM panels), once its tiles or q8 panels exist; reading them again would only fault them in.
  void release_file_pages(const WeightMatrix& w);
  // Gives back the pages of w's rows in the file (counting nothing); returns their bytes.
  size_t give_back_rows(const WeightMatrix& w) const;
  // Every linear layer not yet repacked and of a type the tiles take, repacked by `pack`.
  int repack_linear(PackedWeights (*pack)(const WeightMatrix&));
  // The patch embedding of n patches (patches[r], or all in order when null): im2col into cols,
  // the patch GEMM with its bias, and each patch's position embedding, into x.
  void embed_patches(const float* chw, const int* patches, int n, float* cols, float* x, ThreadPool& pool,
                     const char* what) const;
  std::unique_ptr<GgufFile> file_;
  std::shared_ptr<const TensorSource> source_;  // keeps the weights' file mapped
  SiglipConfig cfg_;
  Idefics3PreprocessConfig pre_;
  Linear patch_;
  std::vector<float> pos_, post_w_, post_b_;
  std::vector<SiglipLayer> layers_;
  WeightMatrix proj_;
  // The dense GEMM weights repacked at load (kernels/gemm_panels.h) and, after
  // use_q8_activations(), the quantized ones' q8 panels; the WeightMatrix fields above point
  // into them.
  std::vector<PackedWeights> packed_;
  size_t packed_bytes_ = 0;
  bool bf16_attention_ = false;  // after use_bf16_gemm()
  bool f16_ = false;             // after use_f16_gemm()
  bool q8_ = false;              // after use_q8_activations() or quantize_to_q8_0() switched a layer
  int quantized_at_load_ = 0;    // layers quantize_to_q8_0() switched
  size_t released_file_bytes_ = 0;  // file bytes given back once repacked (released_file_bytes())
};

}  // namespace tessera
