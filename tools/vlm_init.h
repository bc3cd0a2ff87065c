// `tessera vlm-init`: turns a SmolLM2 text GGUF into a SmolVLM-shaped pair with seeded random
// vision weights, for running the whole screen path where no trained SmolVLM files exist:
// the text GGUF gains SmolVLM's image tokens, and an mmproj GGUF (llama.cpp's layout) holds a
// SigLIP encoder and Idefics3 projector of the chosen size.
#pragma once
#include <cstdint>
#include <string>

namespace tessera {

struct VlmInitOptions {
  std::string text_in, text_out, mmproj_out;
  uint64_t seed = 1;
  int hidden = 768, layers = 12, heads = 12, ff = 3072;  // SigLIP-B/16, as SmolVLM-256M
  int image_size = 512, patch_size = 16, scale_factor = 4, longest_edge = 2048;
};

void vlm_init(const VlmInitOptions& o);

}  // namespace tessera
