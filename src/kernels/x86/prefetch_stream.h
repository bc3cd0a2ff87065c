// Software prefetch spread over a loop's steps; plain SSE intrinsics, so both the AVX2 and the
// AVX-512 kernel files can use it.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace tessera::x86 {

// Prefetches the compiler keeps. GCC 12's mod-ref analysis takes a function whose only effects
// are __builtin_prefetch (_mm_prefetch) for one without side effects and may delete its calls
// before inlining them: it did so to a prefetch-only helper in every K-quant decode tile of a
// draft of matmul_q8_vnni.cpp (seen in the object code; -fno-ipa-modref kept them), which then
// read DRAM at the hardware prefetchers' rate. An asm statement is a side effect.
inline void prefetch_l1(const void* p) { asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p))); }
inline void prefetch_l2(const void* p) { asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p))); }

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
