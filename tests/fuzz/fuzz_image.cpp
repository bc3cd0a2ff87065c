// libFuzzer target: PNG/JPEG decoding and the Idefics3 preprocessing of whatever decodes never
// crash; undecodable input is a tessera::Error.
#include <cstdint>

#include "core/error.h"
#include "image/image.h"
#include "models/smolvlm/preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::ImageLimits lim;
  lim.max_pixels = 1 << 16;  // keep each run small
  try {
    const tessera::ImageRGB img = tessera::decode_image(data, size, "fuzz", lim);
    tessera::Idefics3PreprocessConfig cfg;
    cfg.tile = 32;
    cfg.longest_edge = 64;
    tessera::preprocess_idefics3(img, cfg);
  } catch (const tessera::Error&) {
  }
  return 0;
}
