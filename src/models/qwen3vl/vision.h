// Qwen3-VL's vision encoder and mergers (transformers' Qwen3VLVisionModel), over a whole image at
// its own resolution: 16 x 16 x 2 patch embedding (a Conv3d over the still image's two temporal
// copies), a learned 48 x 48 position table resampled bilinearly (align_corners) to the patch
// grid, pre-norm ViT blocks with 2-D rotary positions (h, w; half the rotated pairs each) and
// bidirectional attention over every patch, GELU-tanh MLPs; then the merger (LayerNorm per patch,
// 2 x 2 patches concatenated, fc1, exact GELU, fc2) and, after the DeepStack layers, the same
// with the LayerNorm over the concatenated block. docs/qwen3vl.md lists what was confirmed.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"
#include "models/qwen3vl/preprocess.h"
#include "models/tensor_source.h"

namespace tessera {

struct Qwen3VLVisionConfig {
  int hidden = 1024, depth = 24, heads = 16, ff = 4096;
  int patch = 16, temporal = 2, merge = 2;
  int out_hidden = 2048;  // the language model's width
  int n_pos = 2304;       // learned position table: side x side
  float eps = 1e-6f;      // every LayerNorm (transformers hard-codes 1e-6)
  float rope_theta = 10000.0f;
  std::vector<int> deepstack;  // block indexes whose output feeds a DeepStack merger
  int head_dim() const { return hidden / heads; }
  int side() const;       // sqrt(n_pos)
};

// What a Qwen3-VL mmproj GGUF's metadata gives (clip.* keys), range-checked; check_config's
// checks come with loading. Throws Error.
Qwen3VLVisionConfig read_qwen3vl_vision_config(const GgufFile& f, const std::string& path);

struct Qwen3VLLinear {
  WeightMatrix w;
  std::vector<float> b;
};

struct Qwen3VLBlock {
  std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
  Qwen3VLLinear qkv, proj, fc1, fc2;  // qkv: q, k and v rows stacked (3 hidden x hidden)
};

struct Qwen3VLMerger {
  std::vector<float> ln_w, ln_b;  // hidden (merger) or 4 hidden (DeepStack: after the concatenation)
  Qwen3VLLinear fc1, fc2;
  bool postshuffle = false;
};

class Qwen3VLVision {
 public:
  // llama.cpp's mmproj GGUF (projector type qwen3vl_merger).
  static std::unique_ptr<Qwen3VLVision> load_mmproj(const std::string& path);
  // Tensors as transformers saves Qwen3VLForConditionalGeneration ("model.visual." prefix).
  static std::unique_ptr<Qwen3VLVision> from_hf(const Qwen3VLVisionConfig& cfg, std::shared_ptr<const TensorSource> src);

  const Qwen3VLVisionConfig& config() const { return cfg_; }
  Qwen3VLPreprocessConfig preprocess_config() const;
  // Width of one output row: the merged feature, then each DeepStack level's (what llama.cpp's
  // mmproj hands the text model, and what Session's DeepStack positions take).
  int out_row() const { return cfg_.out_hidden * (1 + static_cast<int>(cfg_.deepstack.size())); }

  // What an encoding leaves behind for a later gated re-encoding of the same-sized image: every
  // block's rotated keys and values (fp16, depth x patches x hidden each: 4 * depth * hidden
  // bytes per patch, ~96 KiB for the 2B's tower) and the last output rows.
  struct GateState {
    int grid_h = 0, grid_w = 0;
    std::vector<uint16_t> k, v;
    std::vector<float> out;  // tokens x out_row()
    size_t bytes() const { return 2 * (k.size() + v.size()) + 4 * out.size(); }
  };

  // Encodes one image's patches into p.n_tokens() rows of out_row() floats. With `patch_embeds`
  // / `block0`, also the patch-embedding output (with positions) and the first block's output
  // (n_patches x hidden each; for tests). With `record`, the state a gated re-encoding needs
  // (the output is the same bits either way).
  void encode(const Qwen3VLPatches& p, float* out, ThreadPool& pool, std::vector<float>* patch_embeds = nullptr,
              std::vector<float>* block0 = nullptr, GateState* record = nullptr) const;
  // Token gating (approximate; watch --approx-gate): re-encodes only the patches of the changed
  // merge blocks (merged-token indexes, increasing) of an image on the grid `st` was recorded
  // on. They attend to every patch's keys and values as `st` holds them (their own replaced as
  // they are computed); every other patch keeps its previous output, which is what the changed
  // patches would have done to it through attention -- the approximation. Attention runs in
  // fp32 over the fp16 state. Writes every output row to `out` and keeps them in `st`.
  void encode_gated(const Qwen3VLPatches& p, const std::vector<int>& changed_blocks, GateState& st, float* out,
                    ThreadPool& pool) const;
  // From now on, every linear layer as the bf16 GEMM and the attention as the bf16 attention (AMX
  // or AVX512-BF16; inputs rounded to bf16, fp32 sums), as SigLIP's use_bf16_gemm: weights
  // repacked into bf16 tiles once. Fails with a one-line error where the CPU gives neither.
  // Returns the number of layers switched.
  int use_bf16_gemm();
  bool bf16() const { return bf16_; }
  // Every linear layer as the fp16 GEMM on AVX512-FP16 (kernels/f16_tiles.h) and the attention as
  // the fp16 attention (kernels/attention_f16.h), as SigLIP's use_f16_gemm. Fails with a one-line
  // error where the CPU has no AVX512-FP16 or ARM FP16 arithmetic.
  int use_f16_gemm();
  // The GEMMs' arithmetic: "bf16", "f16" or "fp32".
  const char* precision() const { return bf16_ ? "bf16" : f16_ ? "f16" : "fp32"; }
  // Bytes of the mmproj file whose pages were given back once repacked: a memory plan counts the
  // file less these.
  size_t released_file_bytes() const { return released_file_bytes_; }

 private:
  Qwen3VLVision() = default;
  void load_weights(const TensorSource& s, bool gguf_names);
  void check_config(const std::string& file) const;
  struct Scratch {
    std::vector<float> xn, qkv, att, tmp, ff;
  };
  void embed(const Qwen3VLPatches& p, const int* idx, int n, float* x, float* cs, ThreadPool& pool) const;
  void block(const Qwen3VLBlock& B, float* x, int n, const float* cs, Scratch& s, const std::function<void(float*, float*)>& attend,
             ThreadPool& pool) const;
  AttentionShape attention_shape(int n_kv) const;
  void record_kv(const float* qkv, const int* idx, int n, int l, GateState& st, ThreadPool& pool) const;
  void merge(const Qwen3VLMerger& m, const float* x, int n_patches, float* out, int64_t out_stride, ThreadPool& pool) const;
  std::unique_ptr<GgufFile> file_;
  std::shared_ptr<const TensorSource> source_;
  Qwen3VLVisionConfig cfg_;
  std::vector<float> patch_w_;  // hidden x (3 * temporal * patch^2), columns [channel][t][y][x]
  Qwen3VLLinear patch_;
  std::vector<float> pos_;      // n_pos x hidden
  std::vector<Qwen3VLBlock> blocks_;
  Qwen3VLMerger merger_;
  std::vector<Qwen3VLMerger> deepstack_;
  std::vector<PackedWeights> packed_;
  bool bf16_ = false;
  bool f16_ = false;  // after use_f16_gemm()
  size_t released_file_bytes_ = 0;  // released_file_bytes()
  std::vector<WeightMatrix*> dense_weights();
  // Every dense matrix not yet repacked and of a type the tiles take, repacked by `pack`.
  int repack_dense(PackedWeights (*pack)(const WeightMatrix&));
};

}  // namespace tessera
