// The profiler's roofline denominators: read from a probe file, the figures of the ISA level the
// kernels run at (a figure stored only for one thread scales with the thread count), and each op
// judged against the roof of the unit it runs on (int8 dot products, AMX bf16 tiles with their
// loads, else fp32 FMA).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "profile/probe.h"
#include "profile/profiler.h"

namespace tessera {
namespace {

TEST(Profile, EachOpIsJudgedAgainstItsUnitsRoof) {
  const std::string path = std::filesystem::temp_directory_path() / "tessera_test_probe.json";
  std::ofstream(path) << R"({"probe": [
  {"name": "fp32_fma_avx512", "unit": "GFLOP/s", "threads": 1, "median": 100.0, "samples": [100.0]},
  {"name": "fp32_fma_avx512", "unit": "GFLOP/s", "threads": 2, "median": 190.0, "samples": [190.0]},
  {"name": "int8_dot_vnni", "unit": "GOP/s", "threads": 1, "median": 400.0, "samples": [400.0]},
  {"name": "fp32_fma_avx2", "unit": "GFLOP/s", "threads": 2, "median": 110.0, "samples": [110.0]},
  {"name": "int8_dot_avx2", "unit": "GOP/s", "threads": 1, "median": 300.0, "samples": [300.0]},
  {"name": "bf16_dot_avx512", "unit": "GFLOP/s", "threads": 1, "median": 300.0, "samples": [300.0]},
  {"name": "amx_bf16", "unit": "GFLOP/s", "threads": 1, "median": 900.0, "samples": [900.0]},
  {"name": "amx_bf16_loads", "unit": "GFLOP/s", "threads": 1, "median": 500.0, "samples": [500.0]},
  {"name": "fp32_fma_neon", "unit": "GFLOP/s", "threads": 2, "median": 70.0, "samples": [70.0]},
  {"name": "int8_dot_sdot", "unit": "GOP/s", "threads": 2, "median": 280.0, "samples": [280.0]},
  {"name": "read_dram", "unit": "GB/s", "threads": 2, "median": 20.0, "samples": [20.0]}
]}
)";
  // the roofs of the level the kernels run at (only a 1-thread figure stored: × threads)
  struct Want {
    Isa level;
    double gflops, int8, amx;
  };
  for (const Want& w : {Want{Isa::Neon, 70, 280, 0}, Want{Isa::Avx2, 110, 600, 0}, Want{Isa::Avx512, 190, 600, 0},
                        Want{Isa::Avx512Vnni, 190, 800, 0}, Want{Isa::Amx, 190, 800, 1000}}) {
    if (kernel_table(w.level).isa != w.level) continue;  // not on this CPU
    set_isa_cap(w.level);
    const prof::Peaks p = prof::load_peaks(path, 2);
    EXPECT_DOUBLE_EQ(p.gflops, w.gflops) << isa_name(w.level);
    EXPECT_DOUBLE_EQ(p.int8_gops, w.int8) << isa_name(w.level);
    // AVX512-BF16 without AMX: the bf16 ops against VDPBF16PS, where the CPU has it
    const double bf16 = w.level == Isa::Avx512Vnni && kernel_table(w.level).bf16_tiles ? 600 : w.amx;
    EXPECT_DOUBLE_EQ(p.bf16_gflops, bf16) << isa_name(w.level);
    EXPECT_DOUBLE_EQ(p.dram_gbs, 20.0);
  }
  set_isa_cap(Isa::Amx);  // back to the default: the best this CPU has
  // each op against its unit's roof
  prof::Peaks p;
  p.gflops = 190, p.int8_gops = 800, p.bf16_gflops = 1800, p.dram_gbs = 20;
  EXPECT_DOUBLE_EQ(prof::compute_roof("vision encode / gemm_bf16 fc1 F16 3072x768", p), 1800.0);
  EXPECT_DOUBLE_EQ(prof::compute_roof("vision encode / attention_bf16 bidirectional", p), 1800.0);
  EXPECT_DOUBLE_EQ(prof::compute_roof("prefill / matmul_q8 q Q4_1 576x576", p), 800.0);
  EXPECT_DOUBLE_EQ(prof::compute_roof("vision encode / gemm fc1 F16 3072x768", p), 190.0);
  EXPECT_DOUBLE_EQ(prof::compute_roof("decode / matmul q Q4_1 576x576", p), 190.0);
  // a probe without AMX (or no probe at all): the bf16 ops fall back to the fp32 roof
  prof::Peaks no_amx = p;
  no_amx.bf16_gflops = 0;
  EXPECT_DOUBLE_EQ(prof::compute_roof("vision encode / gemm_bf16 fc1 F16 3072x768", no_amx), 190.0);
  const prof::Peaks none = prof::load_peaks(path + ".missing", 2);
  EXPECT_EQ(none.gflops, 0.0);
  EXPECT_EQ(none.bf16_gflops, 0.0);
  std::filesystem::remove(path);
}

// The probe's contention check: a compute loop whose all-core figure is under 3/4 of threads × its
// one-thread figure is named; bandwidth figures (which need not scale) and scaling loops are not.
TEST(Profile, ProbeNamesComputeFiguresThatDidNotScale) {
  const std::vector<ProbeResult> r = {
      {"int8_dot_vnni", "GOP/s", 1, 457.5, {}}, {"int8_dot_vnni", "GOP/s", 2, 468.6, {}},    // the contended run
      {"fp32_fma_avx512", "GFLOP/s", 1, 116.2, {}}, {"fp32_fma_avx512", "GFLOP/s", 2, 227.8, {}},  // scaled
      {"read_dram", "GB/s", 1, 22.1, {}}, {"read_dram", "GB/s", 2, 28.0, {}}};
  const std::vector<std::string> w = probe_contended(r);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("int8_dot_vnni on 2 threads is 1.02x"), std::string::npos) << w[0];
  EXPECT_TRUE(probe_contended({r[2], r[3], r[4], r[5]}).empty());
}

}  // namespace
}  // namespace tessera
