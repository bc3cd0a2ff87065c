// Memory for data written once and then streamed again and again: the repacked weights, which
// decode reads whole for every token. It comes in 2 MiB-aligned chunks that Linux is asked to back
// with transparent huge pages (madvise; the default "madvise" setting gives a plain allocation
// 4 KiB pages). Decode streams ~100 MB a token through kernels that compute as they read; with
// 4 KiB pages each page is a TLB miss, on a VM a nested page walk, and on a 2-vCPU Zen 3 decode
// ran 1.15x faster per round from huge pages (docs/measurements.md). Allocations are not freed
// one by one: the chunks go with the arena. Elsewhere (macOS) the chunks are plain mappings.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera {

class HugePageArena {
 public:
  HugePageArena() = default;
  ~HugePageArena();
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // n zero bytes, 64-byte aligned, valid while the arena lives; throws Error (naming `what`)
  // when memory runs out.
  uint8_t* allocate(size_t n, const char* what);
  // The bytes mapped for the chunks (address space; pages count once written).
  size_t mapped_bytes() const;

 private:
  struct Chunk {
    uint8_t* p;
    size_t size;
  };
  std::vector<Chunk> chunks_;
  size_t used_ = 0;  // bytes handed out from the last chunk
};

}  // namespace tessera
