// Software prefetch spread over a loop's steps; plain SSE intrinsics, so both the AVX2 and the
// AVX-512 kernel files can use it.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace tessera::x86 {

// Software prefetch of [p, p + bytes) spread over the n steps of a loop (into L1, or with
// Hint = _MM_HINT_T1 into L2): each step() issues the next ceil(lines / n) cache lines. The
// per-step count is fixed up front, so the loop pays no division (two 64-bit divides per block
// cost as much as the block's dequantization did). A null p prefetches nothing.
template <auto Hint = _MM_HINT_T0>
class PrefetchStream {
 public:
  PrefetchStream(const uint8_t* p, int64_t bytes, int64_t n)
      : p_(p), end_(p ? p + bytes : p), per_(p && n > 0 ? ((bytes + 63) / 64 + n - 1) / n : 0) {}
  void step() {
    for (int64_t i = 0; i < per_ && p_ < end_; ++i, p_ += 64) _mm_prefetch(reinterpret_cast<const char*>(p_), Hint);
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  int64_t per_;
};

}  // namespace tessera::x86
