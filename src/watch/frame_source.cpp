#include "watch/frame_source.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"

namespace tessera {

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxFrameListBytes = size_t{16} << 20;  // ~100,000 paths

class FileList : public FrameSource {
 public:
  FileList(std::vector<std::string> paths, const ImageLimits& limits) : paths_(std::move(paths)), limits_(limits) {}
  bool next(Frame& f) override {
    if (i_ >= paths_.size()) return false;
    f = Frame{};
    f.name = paths_[i_++];
    try {
      f.image = load_image(f.name, limits_);
    } catch (const Error& e) {
      f.error = e.what();
    }
    return true;
  }

 private:
  std::vector<std::string> paths_;
  ImageLimits limits_;
  size_t i_ = 0;
};

class RawStdin : public FrameSource {
 public:
  explicit RawStdin(const ImageLimits& limits) : limits_(limits) {}
  bool next(Frame& f) override {
    if (done_) return false;
    f = Frame{};
    f.name = "stdin#" + std::to_string(n_++);
    unsigned char h[16];
    const size_t got = std::fread(h, 1, sizeof h, stdin);
    if (got == 0) return false;
    auto u32 = [&](int o) { return static_cast<uint32_t>(h[o]) | static_cast<uint32_t>(h[o + 1]) << 8 | static_cast<uint32_t>(h[o + 2]) << 16 | static_cast<uint32_t>(h[o + 3]) << 24; };
    if (got < sizeof h || std::memcmp(h, "TSRF", 4) != 0) {
      done_ = true;  // the stream is out of step: nothing after this can be trusted
      f.error = got < sizeof h ? "truncated frame header" : "not a raw frame (expected the TSRF header)";
      return true;
    }
    const uint32_t w = u32(4), hh = u32(8), c = u32(12);
    if (w == 0 || hh == 0 || w > 16384 || hh > 16384 || (c != 3 && c != 4) ||
        static_cast<int64_t>(w) * hh > limits_.max_pixels) {
      done_ = true;
      f.error = "raw frame header has a bad size " + std::to_string(w) + "x" + std::to_string(hh) + "x" + std::to_string(c);
      return true;
    }
    // The buffer grows as pixels arrive (at most doubling), so a header alone cannot make
    // this allocate the whole frame.
    const size_t want = static_cast<size_t>(w) * hh * c;
    std::vector<uint8_t> data;
    size_t have = 0;
    while (have < want) {
      data.resize(std::min(want, std::max<size_t>(have * 2, size_t{1} << 20)));
      const size_t got_now = std::fread(data.data() + have, 1, data.size() - have, stdin);
      have += got_now;
      if (have < data.size()) break;  // end of input or a read error
    }
    if (have < want) {
      done_ = true;
      f.error = "truncated frame: expected " + std::to_string(want) + " bytes of pixels, got " + std::to_string(have);
      return true;
    }
    f.image = image_from_raw(data.data(), static_cast<int>(w), static_cast<int>(hh), static_cast<int>(c), static_cast<size_t>(w) * c);
    return true;
  }

 private:
  ImageLimits limits_;
  bool done_ = false;
  int n_ = 0;
};

bool is_image_name(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return e == ".png" || e == ".jpg" || e == ".jpeg";
}

}  // namespace

std::unique_ptr<FrameSource> FrameSource::open(const std::string& spec, const ImageLimits& limits) {
  if (spec == "-") return std::make_unique<RawStdin>(limits);
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    std::vector<std::string> paths;
    for (const auto& e : fs::directory_iterator(spec, ec))
      if (e.is_regular_file() && is_image_name(e.path())) paths.push_back(e.path().string());
    if (ec) fail("cannot list frames in '%s': %s", spec.c_str(), ec.message().c_str());
    if (paths.empty()) fail("no frames (.png, .jpg) in directory '%s'", spec.c_str());
    std::sort(paths.begin(), paths.end());
    return std::make_unique<FileList>(std::move(paths), limits);
  }
  if (!fs::exists(spec, ec)) fail("cannot open frames '%s' (a directory, a list file, or - for raw frames on stdin)", spec.c_str());
  // a list is a regular file of bounded size: /dev/urandom or a FIFO is refused, not read forever
  std::istringstream f(read_small_file(spec, kMaxFrameListBytes, "frame list"));
  std::vector<std::string> paths;
  const fs::path base = fs::path(spec).parent_path();
  std::string line;
  while (std::getline(f, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const fs::path p(line);
    paths.push_back(p.is_absolute() ? line : (base / p).string());
  }
  if (paths.empty()) fail("the frame list '%s' names no frames", spec.c_str());
  return std::make_unique<FileList>(std::move(paths), limits);
}

void write_raw_frame(std::FILE* out, const ImageRGB& image) {
  unsigned char h[16] = {'T', 'S', 'R', 'F'};
  const uint32_t v[3] = {static_cast<uint32_t>(image.width), static_cast<uint32_t>(image.height), 3};
  for (int i = 0; i < 3; ++i)
    for (int b = 0; b < 4; ++b) h[4 + 4 * i + b] = static_cast<unsigned char>(v[i] >> (8 * b));
  std::fwrite(h, 1, sizeof h, out);
  std::fwrite(image.pixels.data(), 1, image.pixels.size(), out);
}

}  // namespace tessera
