// What the CPU offers and the OS has enabled (CPUID + XGETBV), read once.
#pragma once

namespace tessera {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false, avx512bf16 = false;
  bool avx512fp16 = false;  // fp16 arithmetic (VFMADD231PH: Sapphire Rapids and later)
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  bool os_avx = false, os_avx512 = false, os_amx = false;  // XCR0 has the register state enabled
  bool dotprod = false, i8mm = false, sme = false;         // AArch64 (HWCAP, HWCAP2)
  bool fp16_arith = false;  // AArch64 FP16 vector arithmetic (HWCAP_ASIMDHP: FMLA .8h)
  bool amd = false;  // vendor AuthenticAMD (where a check was measured on one vendor's cores only)
};

const CpuFeatures& cpu_features();

// AMX tile data needs the OS's permission (Linux: arch_prctl ARCH_REQ_XCOMP_PERM); asked once per
// process. False where the CPU or OS has no AMX.
bool amx_granted();

}  // namespace tessera
