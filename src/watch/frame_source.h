// Frames for `tessera watch`: the images of a directory (sorted by name), the paths listed in
// a file, or raw frames on stdin from a capturer: a 16-byte header "TSRF", uint32 width,
// uint32 height, uint32 channels (3 = RGB, 4 = RGBA), little endian, then width*height*channels
// bytes; repeated. A frame that cannot be read is reported, never half-used.
#pragma once
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "image/image.h"

namespace tessera {

struct Frame {
  std::string name;     // file path or "stdin#N"
  ImageRGB image;
  std::string error;    // non-empty: this frame is skipped, for this reason
};

class FrameSource {
 public:
  // `spec`: a directory, a list file, or "-" for stdin.
  static std::unique_ptr<FrameSource> open(const std::string& spec, const ImageLimits& limits);
  virtual ~FrameSource() = default;
  virtual bool next(Frame& f) = 0;  // false at the end
};

// Writes one raw frame in the stdin format (for capturers and tests).
void write_raw_frame(std::FILE* out, const ImageRGB& image);

}  // namespace tessera
