// A byte buffer for work done again and again (the resampler's intermediate images, every frame):
// it grows, never shrinks and is never cleared, so a call after the first finds its pages already
// mapped. Allocating such buffers per call cost more than the work they hold: a 1920 x 1080 screen
// resized to 2048 x 1152 spent 9 of its 17 ms faulting and zeroing 20 MB of fresh pages
// (docs/plan.md). Plain 4 KiB pages: asking for transparent huge pages (madvise) made the first
// call's time depend on how fragmented the host's memory was (the kernel compacts memory to find
// them), and the later calls were no faster.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tessera {

class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ~ScratchBuffer() { release(); }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  // At least n bytes, contents unspecified (what the last user left); throws Error naming `what`
  // when memory runs out. Pointers from an earlier call stay valid only while n fits.
  uint8_t* get(size_t n, const char* what);
  size_t capacity() const { return cap_; }
  // Gives the pages back.
  void release();

 private:
  uint8_t* p_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace tessera
