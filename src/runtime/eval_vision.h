// Quality of a vision tower (and the text model behind it) against a reference, on real
// screenshots: the encoder's output (SmolVLM, per 512 tile), the connector's output (the image
// embeddings the text model receives: SmolVLM's connector, Qwen3-VL's merger and DeepStack
// rows), and the downstream next-token distribution after the question (KL divergence, top token).
// `tessera eval --image` (tools/eval.cpp) runs it.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "image/image.h"
#include "models/llama/llama.h"
#include "models/qwen3vl/vision.h"
#include "models/smolvlm/siglip.h"
#include "runtime/session.h"

namespace tessera {

// A text model and its vision tower (one of the two set).
struct VlmParts {
  const LlamaModel* text = nullptr;
  const Idefics3Vision* smolvlm = nullptr;
  const Qwen3VLVision* qwen = nullptr;
};

struct VisionEvalImage {
  std::string name;
  int tiles = 0, image_tokens = 0;
  double encoder_err = -1;   // largest over the tiles of |a - b| / |b| (L2), SmolVLM; -1 where not measured
  double connector_err = 0;  // |a - b| / |b| over all the image embeddings
  double kld = 0;            // KL(reference || model) of the next token after the prompt, nats
  bool same_top = false;
};

struct VisionEvalStats {
  std::vector<VisionEvalImage> images;
  double encoder_err_max = -1, connector_err_mean = 0, connector_err_max = 0;
  double kld_mean = 0, kld_max = 0, same_top = 0;
};

// Both sides must be the same family and geometry (the same tiles or patch grid for an image).
// `max_pixels`: Qwen3-VL's resize bound (0: the processor's). Throws Error on a mismatch.
VisionEvalStats evaluate_vision(const VlmParts& model, const VlmParts& reference,
                                const std::vector<std::pair<std::string, ImageRGB>>& images, const std::string& question,
                                const SessionOptions& options, int64_t max_pixels = 0);

}  // namespace tessera
