// A software prefetch the compiler cannot drop. GCC's mod-ref analysis takes a function whose only
// effects are __builtin_prefetch for one without side effects and may delete its calls (it did so
// to Session's first KV-slot prefetch, 8a2a68c, and to a K-quant tile helper; see
// kernels/x86/prefetch_stream.h): an asm statement is a side effect.
#pragma once

namespace tessera {

// The line holding p, into L1, for writing where the instruction set says so: aarch64's
// `prfm pstl1keep`; on x86 a plain prefetcht0 (prefetchw is not in every -march baseline).
inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pstl1keep, %a0" : : "p"(p));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

}  // namespace tessera
