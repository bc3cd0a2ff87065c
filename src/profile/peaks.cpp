// The profiler's roofline denominators, read from the probe's saved JSON.
#include <filesystem>

#include "core/mapped_file.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "profile/probe.h"
#include "profile/profiler.h"

namespace tessera::prof {

Peaks load_peaks(const std::string& path, int threads) {
  Peaks p;
  p.threads = threads;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return p;  // no probe run yet: no roofline verdicts
  const std::string j = read_small_file(path, size_t{1} << 20, "probe results");  // a regular file, not a FIFO
  auto get = [&](const char* name) {
    double v = probe_lookup(j, name, threads);
    if (v <= 0) v = probe_lookup(j, name, 1) * threads;  // only the 1-thread figure stored
    return v;
  };
  // the roofs of the level the kernels run at (a `--isa avx2` cap on an AVX-512 machine gets AVX2's)
  const Isa isa = active_isa();
  const bool x512 = isa >= Isa::Avx512;
  p.gflops = get(x512 ? "fp32_fma_avx512" : isa == Isa::Avx2 ? "fp32_fma_avx2" : isa == Isa::Neon ? "fp32_fma_neon" : "");
  p.int8_gops = get(isa >= Isa::Avx512Vnni ? "int8_dot_vnni" : isa == Isa::Neon ? "int8_dot_sdot" : "int8_dot_avx2");
  // the bf16 GEMM and attention: on AMX against the ceiling with tile loads (what a GEMM can reach;
  // older probe files lack it), on AVX512-BF16 without AMX against VDPBF16PS
  if (isa == Isa::Amx) {
    p.bf16_gflops = get("amx_bf16_loads");
    if (p.bf16_gflops <= 0) p.bf16_gflops = get("amx_bf16");
  } else if (isa == Isa::Avx512Vnni && kernels().bf16_tiles) {
    p.bf16_gflops = get("bf16_dot_avx512");
  }
  // the fp16 GEMM and attention (AVX512-FP16) against VFMADD231PH
  if (kernels().f16_tiles) p.f16_gflops = get("fp16_fma_avx512");
  p.dram_gbs = get("read_dram");
  p.l3_gbs = get("read_l3");
  p.source = path;
  return p;
}

}  // namespace tessera::prof
