#include "core/scratch_buffer.h"

#include <cstdlib>

#include "core/error.h"

namespace tessera {

uint8_t* ScratchBuffer::get(size_t n, const char* what) {
  if (n <= cap_) return p_;
  release();
  // malloc, not a zero-filled vector: the pages become resident as the caller writes them. Sizes
  // no machine has (over 1 TiB: an overflowed product) are refused before asking.
  constexpr size_t kMaxBytes = size_t{1} << 40;
  void* p = n > kMaxBytes ? nullptr : std::malloc(n);
  if (!p) fail("out of memory: the %s needs %.1f MiB", what, static_cast<double>(n) / (1 << 20));
  p_ = static_cast<uint8_t*>(p);
  cap_ = n;
  return p_;
}

void ScratchBuffer::release() {
  std::free(p_);
  p_ = nullptr;
  cap_ = 0;
}

}  // namespace tessera
