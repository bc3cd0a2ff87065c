#include "core/huge_page_arena.h"

#include <sys/mman.h>

#include <algorithm>

#include "core/error.h"

namespace tessera {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
// A chunk holds many matrices, so the huge pages span a layer's small ones too (SmolLM2's are
// 69-553 KB); what a chunk leaves unused at its end is address space, not memory.
constexpr size_t kChunk = size_t{64} << 20;
constexpr size_t kMaxBytes = size_t{1} << 40;  // no machine has it: an overflowed size
}  // namespace

HugePageArena::~HugePageArena() {
  for (const Chunk& c : chunks_) ::munmap(c.p, c.size);
}

uint8_t* HugePageArena::allocate(size_t n, const char* what) {
  if (n > kMaxBytes) fail("out of memory: the %s needs %.1f MiB", what, static_cast<double>(n) / (1 << 20));
  const size_t at = (used_ + 63) / 64 * 64;
  if (!chunks_.empty() && at + n <= chunks_.back().size) {
    used_ = at + n;
    return chunks_.back().p + at;
  }
  const size_t size = std::max(kChunk, (n + kHugePage - 1) / kHugePage * kHugePage);
  // map a huge page more than asked, then unmap the ends so the chunk starts on a 2 MiB boundary
  void* m = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) fail("out of memory: the %s needs %.1f MiB", what, static_cast<double>(n) / (1 << 20));
  const uintptr_t a = reinterpret_cast<uintptr_t>(m), start = (a + kHugePage - 1) / kHugePage * kHugePage;
  if (start > a) ::munmap(m, start - a);
  ::munmap(reinterpret_cast<void*>(start + size), a + kHugePage - start);  // never empty: start < a + kHugePage
  uint8_t* p = reinterpret_cast<uint8_t*>(start);
#ifdef MADV_HUGEPAGE
  ::madvise(p, size, MADV_HUGEPAGE);  // only a hint: without it the pages are 4 KiB ones
#endif
  chunks_.push_back({p, size});
  used_ = n;
  return p;
}

size_t HugePageArena::mapped_bytes() const {
  size_t s = 0;
  for (const Chunk& c : chunks_) s += c.size;
  return s;
}

}  // namespace tessera
