// The profiler's roofline denominators, read from the probe's saved JSON.
#include <filesystem>

#include "core/mapped_file.h"
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
  p.gflops = get("fp32_fma_avx512");
  if (p.gflops <= 0) p.gflops = get("fp32_fma");
  p.int8_gops = get("int8_dot_vnni");
  p.amx_bf16_gflops = get("amx_bf16");
  p.dram_gbs = get("read_dram");
  p.l3_gbs = get("read_l3");
  p.source = path;
  return p;
}

}  // namespace tessera::prof
