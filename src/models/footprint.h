// What a vision tower's work holds in memory, from its configuration alone: the server's memory
// budget (serve/engine.cpp) and `tessera plan` (plan/predict.cpp) count it the same way.
#pragma once
#include <cstddef>
#include <cstdint>

#include "models/qwen3vl/preprocess.h"
#include "models/qwen3vl/vision.h"
#include "models/smolvlm/preprocess.h"
#include "models/smolvlm/siglip.h"

namespace tessera {

// SmolVLM. A tile encode's resident buffers: the encoder's activations (tile_scratch in
// siglip.cpp: im2col, rows of hidden, q/k/v, the MLP; with bf16, the ones that path writes and its
// bf16 tiles) and a visual memory's own (pixels, output). q8: a quantized mmproj on 8-bit
// activations (fp32 buffers like the fp32 path, plus, with bf16, the bf16 attention's tiles): with
// bf16 the largest of all, which a budget may count whatever the path.
size_t siglip_buffer_bytes(const SiglipConfig& c, bool bf16 = false, bool q8 = false);
// A w x h image's tiles: the grid after the processor's resize, and the global image.
size_t idefics3_tile_count(const Idefics3PreprocessConfig& p, int w, int h);
// The frames a visual memory holds at once for a w x h screen: the newest and the copy being
// encoded, its resized image and tiles, and four copies of the embeddings (the encoding in
// progress, the memory, a question's snapshot and its prompt).
// Its resampler scratch included: idefics3_resize_scratch_bytes.
size_t idefics3_frame_bytes(const SiglipConfig& c, const Idefics3PreprocessConfig& p, int w, int h);
// The resampler's scratch (image/resize.cpp, core/scratch_buffer.h) after preprocessing a w x h
// screen, which the preprocessing thread keeps: for each of its three buffers the largest of the
// processor's resizes (the screen to its longest edge, then to one tile, or stretched to whole tiles
// and to the global tile).
size_t idefics3_resize_scratch_bytes(const Idefics3PreprocessConfig& p, int w, int h);

// Qwen3-VL. The patches of a w x h image at max_pixels (0: the processor's own bound).
int64_t qwen3vl_patches(const Qwen3VLVisionConfig& c, int64_t max_pixels, int w, int h);
// The encoder's buffers for that many patches (vision.cpp's encode: the rows of hidden, q/k/v,
// the MLP, rotary angles, the patch pixels, the mergers).
size_t qwen3vl_buffer_bytes(const Qwen3VLVisionConfig& c, int64_t patches);
// A screen: the newest frame and its copy, two sets of patches (being encoded, last encoded) and
// five copies of the features (the encoding, the last, the memory, a snapshot, a prompt).
// Its resampler scratch included: qwen3vl_resize_scratch_bytes (the screen to the smart-resized size).
size_t qwen3vl_frame_bytes(const Qwen3VLVisionConfig& c, int64_t max_pixels, int w, int h);
size_t qwen3vl_resize_scratch_bytes(const Qwen3VLVisionConfig& c, int64_t max_pixels, int w, int h);
// Floats per image token the language model receives: the merger's, then one per DeepStack layer.
inline int qwen3vl_out_row(const Qwen3VLVisionConfig& c) { return c.out_hidden * (1 + static_cast<int>(c.deepstack.size())); }
Qwen3VLPreprocessConfig qwen3vl_preprocess_config(const Qwen3VLVisionConfig& c);

}  // namespace tessera
