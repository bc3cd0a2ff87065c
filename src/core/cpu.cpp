#include "core/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace tessera {

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
#if defined(__x86_64__)
    unsigned a, b, cx, d;
    if (__get_cpuid(0, &a, &b, &cx, &d)) c.amd = b == 0x68747541u && d == 0x69746e65u && cx == 0x444d4163u;  // "AuthenticAMD"
    if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
    const bool osxsave = (cx >> 27) & 1;
    c.fma = (cx >> 12) & 1;
    c.f16c = (cx >> 29) & 1;
    if (osxsave) {
      unsigned lo, hi;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      c.os_avx = (lo & 0x6) == 0x6;
      c.os_avx512 = c.os_avx && (lo & 0xe0) == 0xe0;
      c.os_amx = (lo & 0x60000) == 0x60000;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
      c.avx2 = (b >> 5) & 1;
      c.avx512f = (b >> 16) & 1;
      c.avx512dq = (b >> 17) & 1;
      c.avx512bw = (b >> 30) & 1;
      c.avx512vl = (b >> 31) & 1;
      c.avx512vnni = (cx >> 11) & 1;
      c.avx512fp16 = (d >> 23) & 1;
      c.amx_bf16 = (d >> 22) & 1;
      c.amx_tile = (d >> 24) & 1;
      c.amx_int8 = (d >> 25) & 1;
    }
    if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) c.avx512bf16 = (a >> 5) & 1;
#elif defined(__aarch64__) && defined(__linux__)
    c.dotprod = (getauxval(AT_HWCAP) >> 20) & 1;  // HWCAP_ASIMDDP
    c.fp16_arith = (getauxval(AT_HWCAP) >> 10) & 1;  // HWCAP_ASIMDHP
    c.i8mm = (getauxval(AT_HWCAP2) >> 13) & 1;    // HWCAP2_I8MM
    c.sme = (getauxval(AT_HWCAP2) >> 23) & 1;     // HWCAP2_SME
#elif defined(__aarch64__) && defined(__APPLE__)
    c.dotprod = true;  // every Apple Silicon core (M1 and later)
    c.fp16_arith = true;
#endif
    return c;
  }();
  return f;
}

bool amx_granted() {
  static const bool ok = [] {
    const CpuFeatures& f = cpu_features();
    if (!f.amx_tile || !f.os_amx) return false;
#if defined(__x86_64__) && defined(__linux__)
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return ok;
}

}  // namespace tessera
