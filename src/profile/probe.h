// `tessera probe`: this machine's measured peaks -- the denominators of every kernel target
// and of the profiler's roofline. Compute, for each vector level the CPU has: fp32 FMA (AVX2,
// AVX-512, NEON), int8 dot products (AVX2 vpmaddubsw, AVX512-VNNI, NEON SDOT and SMMLA), bf16
// (AVX512-BF16), AMX bf16 and int8 when the OS grants tile data (AMX bf16 also with its tile
// loads, the ceiling a GEMM can reach). Bandwidth: reads from L2-, L3- and DRAM-sized buffers
// (and, when asked, from a buffer of a given size: a decode's working set).
// Each figure is the median of repeated timed runs, on 1 thread and on all threads.
#pragma once
#include <string>
#include <vector>

namespace tessera {

struct ProbeResult {
  std::string name, unit;  // e.g. "fp32_fma", "GFLOP/s"
  int threads = 1;
  double value = 0;        // median
  std::vector<double> samples;
};

struct ProbeOptions {
  int threads = 0;  // 0: all cores
  int repetitions = 5;
  double scale = 1.0;  // iterations and buffer sizes × scale: < 1 for a quick run (under qemu), whose figures mean nothing
  // > 0: read rates only (no compute loops), plus "read_set": the read rate over this many bytes
  // in all, split across the threads -- the roof of a decode that reads this many bytes per token
  // (L3- or DRAM-bound as the machine's caches decide)
  int64_t read_bytes = 0;
};

std::vector<ProbeResult> run_probe(const ProbeOptions& opt);
std::string probe_to_json(const std::vector<ProbeResult>& r);
// The compute loops whose all-core figure is under 3/4 of threads × their one-thread figure: each
// thread runs its own registers-only loop, so on idle cores the figure scales with the thread
// count (Zen 4, 2 vCPUs: 1.99-2.00×); less means other work shared the cores (a run beside a
// build saved int8 at 469 GOP/s on 2 threads against 457 on one, and the profiler then printed
// kernels at 118% of that roof). One line per loop, empty when none.
std::vector<std::string> probe_contended(const std::vector<ProbeResult>& r);
// One pass of the probe's read loop over [p, p + bytes) (p 64-byte aligned); returns the bytes
// read, 0 where the loop is not built. Lets a benchmark time the DRAM read rate right beside a
// kernel, so a noisy neighbour slows both sides of the ratio.
double probe_read_pass(const float* p, size_t bytes);
// Peak of `name` at `threads` from a saved probe JSON; 0 when absent.
double probe_lookup(const std::string& json, const std::string& name, int threads);

}  // namespace tessera
