// The engine's own profiler: wall time per phase (image preprocessing, vision encoding,
// connector, prefill, decode, sampling), per-op calls/time/FLOPs/bytes, the time between ops,
// memory high-water marks, and an optional Chrome/Perfetto trace (one track per thread).
//
// Off by default; when off every scope is one relaxed load and a not-taken branch, and nothing
// is recorded. Ops are named by the caller ("prefill/matmul Q4_1 1536x576"); the report groups
// by name, so a name should say the phase, kind, type and shape it measures.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "kernels/op_cost.h"

namespace tessera::prof {

enum class Phase : int { Preprocess, VisionEncode, Connector, Prefill, Decode, Sample, Count };
const char* phase_name(Phase p);

namespace detail {
extern std::atomic<bool> g_on, g_trace;
}
inline bool on() { return detail::g_on.load(std::memory_order_relaxed); }
inline bool tracing() { return detail::g_trace.load(std::memory_order_relaxed); }

void start(bool trace);  // clears previous data, turns recording on
void stop();

int64_t now_ns();

// A phase of one request (nests: the innermost is "current").
class PhaseScope {
 public:
  explicit PhaseScope(Phase p);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase p_;
  Phase prev_;
  int64_t t0_ = -1;
};

// One kernel call, timed on the calling thread; flops and bytes moved are the caller's count.
class OpScope {
 public:
  OpScope(const char* kind, const char* detail, double flops, double bytes);
  // the count from the kernel layer's formulas (kernels/op_cost.h)
  OpScope(const char* kind, const char* detail, OpCost cost) : OpScope(kind, detail, cost.flops, cost.bytes) {}
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  int64_t t0_ = -1;
  int slot_ = -1;
  const char* prev_label_ = nullptr;
};

// The thread pool reports each chunk a thread ran (trace only), labelled with the op that
// started the job.
const char* current_label();
void chunk(const char* label, int64_t t0, int64_t t1);

// High-water mark of one of the engine's memory pools ("weights", "kv cache", "activations",
// "vision cache", ...).
void note_memory(const char* pool, uint64_t bytes);

// Peaks for the roofline, from the probe (GFLOP/s and GB/s for the thread count in use).
struct Peaks {
  double gflops = 0, dram_gbs = 0, l3_gbs = 0;
  double int8_gops = 0;  // the roof of 8-bit-activation ops ("matmul_q8 ..."), when the probe has it
  double f16_gflops = 0;   // the roof of fp16 ops ("gemm_f16 ...", "attention_f16 ..."): VFMADD231PH, likewise
  double bf16_gflops = 0;  // the roof of bf16 ops ("gemm_bf16 ...", "attention_bf16 ..."): AMX or VDPBF16PS, likewise
  int threads = 1;
  std::string source;  // where they came from
};
Peaks load_peaks(const std::string& probe_json_path, int threads);
// The compute roof an op (as named in the report, "phase / kind detail") is judged against:
// the int8 rate for matmul_q8, the AMX bf16 tile rate for gemm_bf16 and attention_bf16 (where the
// probe measured them), else fp32 FMA.
double compute_roof(const std::string& op, const Peaks& p);

// The report of what was recorded since start(): text table and JSON.
std::string report_text(const Peaks& peaks);
std::string report_json(const Peaks& peaks);
// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing).
std::string trace_json();

}  // namespace tessera::prof
