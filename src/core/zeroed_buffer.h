// A zero-filled byte buffer whose pages cost memory only once written: calloc of a large size
// maps fresh pages from the kernel, which are zero without being touched (std::vector's
// value-initialization writes every byte, so all of it becomes resident at once). For the KV
// cache, sized for the whole context but filled a position at a time: a server with -c 4096
// that answers 1,000-token prompts keeps a quarter of it resident.
#pragma once
#include <cstdint>
#include <cstdlib>

#include "core/error.h"

namespace tessera {

class ZeroedBuffer {
 public:
  ZeroedBuffer() = default;
  ~ZeroedBuffer() { std::free(data_); }
  ZeroedBuffer(const ZeroedBuffer&) = delete;
  ZeroedBuffer& operator=(const ZeroedBuffer&) = delete;

  // Replaces the contents with n zero bytes; throws Error (naming `what`) when memory runs out.
  void reset(size_t n, const char* what) {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
    if (n == 0) return;
    data_ = static_cast<uint8_t*>(std::calloc(n, 1));
    if (!data_) fail("out of memory: the %s needs %.1f MiB", what, static_cast<double>(n) / (1 << 20));
    size_ = n;
  }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tessera
