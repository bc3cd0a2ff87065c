// Decoded images: 8-bit RGB, row-major, from PNG/JPEG files or from raw frames in memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct ImageRGB {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3
  uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * width * 3; }
  const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * width * 3; }
};

struct ImageLimits {
  int64_t max_pixels = int64_t{1} << 26;  // 64 Mpx: larger images are refused before decoding
};

// Reads a PNG or JPEG (by content, not extension). Grayscale, palette and 16-bit PNGs are
// expanded; images with alpha are composited onto white exactly as Hugging Face's Idefics3
// processor does (PIL alpha_composite). Throws tessera::Error on anything unreadable.
ImageRGB load_image(const std::string& path, const ImageLimits& limits = {});
ImageRGB decode_image(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& limits = {});

// Wraps raw interleaved pixels (3 = RGB, 4 = RGBA composited onto white) handed over in memory.
ImageRGB image_from_raw(const uint8_t* data, int width, int height, int channels, size_t stride_bytes,
                        const ImageLimits& limits = {});

// PIL's Image.alpha_composite of an RGBA pixel over opaque white, then dropping alpha.
void composite_on_white(const uint8_t rgba[4], uint8_t rgb[3]);

}  // namespace tessera
