#include "profile/profiler.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "profile/counters.h"

namespace tessera::prof {

namespace detail {
std::atomic<bool> g_on{false}, g_trace{false};
}

namespace {

struct OpStat {
  std::string name;
  Phase phase = Phase::Count;
  int64_t calls = 0, ns = 0;
  double flops = 0, bytes = 0;
};

struct Event {  // a trace slice or counter
  std::string name;
  int64_t t0 = 0, t1 = 0;
  int tid = 0;
  char ph = 'X';
  double value = 0;
};

struct State {
  std::mutex mu;
  int64_t t_start = 0, t_stop = 0;
  int64_t phase_ns[static_cast<int>(Phase::Count)] = {};
  int64_t phase_op_ns[static_cast<int>(Phase::Count)] = {};
  int64_t phase_calls[static_cast<int>(Phase::Count)] = {};
  std::vector<OpStat> ops;
  std::map<std::string, int> op_index;
  std::map<std::string, uint64_t> memory;
  std::vector<Event> events;
  std::map<std::thread::id, int> tids;
  CounterSnapshot c0, c1;
};

State& st() {
  static State s;
  return s;
}

thread_local Phase t_phase = Phase::Count;
thread_local const char* t_label = nullptr;

int tid_locked(State& s) {
  const auto id = std::this_thread::get_id();
  auto it = s.tids.find(id);
  if (it != s.tids.end()) return it->second;
  const int t = static_cast<int>(s.tids.size()) + 1;
  s.tids[id] = t;
  return t;
}

// A memory line of /proc/self/status ("VmHWM:", "VmRSS:") in bytes; 0 where unavailable.
uint64_t status_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0) return std::stoull(line.substr(n)) * 1024;
  return 0;
}
uint64_t peak_rss_bytes() { return status_bytes("VmHWM:"); }
uint64_t rss_bytes() { return status_bytes("VmRSS:"); }

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

// Roofline verdict: the attainable rate at this arithmetic intensity is min(compute roof,
// intensity x bandwidth roof). Far below both roofs (< 25%) means the time goes elsewhere:
// dispatch, synchronisation, small shapes -- overhead-bound.
struct Verdict {
  const char* what;
  double frac;  // achieved / attainable
};
Verdict verdict(const std::string& op, double flops, double bytes, double seconds, const Peaks& p) {
  if (seconds <= 0 || p.gflops <= 0 || p.dram_gbs <= 0) return {"-", 0};
  const double roof = compute_roof(op, p);
  const double ai = bytes > 0 ? flops / bytes : 1e9;
  const double ridge = roof / p.dram_gbs;
  const double attainable = std::min(roof, ai * p.dram_gbs);  // GFLOP/s
  const double achieved = flops / seconds / 1e9;
  const double frac = attainable > 0 ? achieved / attainable : 0;
  if (flops == 0) {  // pure data movement: against the bandwidth roof
    const double f = bytes / seconds / 1e9 / p.dram_gbs;
    return {f < 0.25 ? "overhead-bound" : "bandwidth-bound", f};
  }
  if (frac < 0.25) return {"overhead-bound", frac};
  return {ai < ridge ? "bandwidth-bound" : "compute-bound", frac};
}

}  // namespace

// Ops on 8-bit activations run on integer dot products, the bf16 GEMM and attention on AMX tiles or
// VDPBF16PS, the fp16 ones on VFMADD231PH: against fp32 FMA they would read as several times "of
// roof".
double compute_roof(const std::string& op, const Peaks& p) {
  if (op.find("/ matmul_q8") != std::string::npos && p.int8_gops > 0) return p.int8_gops;
  if ((op.find("/ gemm_bf16") != std::string::npos || op.find("/ attention_bf16") != std::string::npos) &&
      p.bf16_gflops > 0)
    return p.bf16_gflops;
  if ((op.find("/ gemm_f16") != std::string::npos || op.find("/ attention_f16") != std::string::npos) && p.f16_gflops > 0)
    return p.f16_gflops;
  return p.gflops;
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Preprocess: return "image preprocess";
    case Phase::VisionEncode: return "vision encode";
    case Phase::Connector: return "connector";
    case Phase::Prefill: return "prefill";
    case Phase::Decode: return "decode";
    case Phase::Sample: return "sampling";
    default: return "other";
  }
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {
// The thread pool's slices of a trace: the pool reports its chunks through this observer
const tessera::ChunkObserver kChunkObserver = {
    [] { return tracing(); },
    [] { return static_cast<const void*>(current_label()); },
    [] { return now_ns(); },
    [](const void* label, int64_t t0, int64_t t1) { chunk(static_cast<const char*>(label), t0, t1); },
};
}  // namespace

void start(bool trace) {
  set_chunk_observer(&kChunkObserver);
  State& s = st();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    std::fill(std::begin(s.phase_ns), std::end(s.phase_ns), 0);
    std::fill(std::begin(s.phase_op_ns), std::end(s.phase_op_ns), 0);
    std::fill(std::begin(s.phase_calls), std::end(s.phase_calls), 0);
    s.ops.clear();
    s.op_index.clear();
    s.memory.clear();
    s.events.clear();
    s.tids.clear();
    tid_locked(s);  // the calling thread is track 1
    s.t_start = now_ns();
    s.t_stop = 0;
    s.c0 = read_counters();
  }
  detail::g_trace.store(trace);
  detail::g_on.store(true);
}

void stop() {
  State& s = st();
  detail::g_on.store(false);
  detail::g_trace.store(false);
  std::lock_guard<std::mutex> lk(s.mu);
  s.t_stop = now_ns();
  s.c1 = read_counters();
}

PhaseScope::PhaseScope(Phase p) : p_(p), prev_(t_phase) {
  if (!on()) return;
  t_phase = p;
  t0_ = now_ns();
}

PhaseScope::~PhaseScope() {
  if (t0_ < 0) return;
  t_phase = prev_;
  if (!on()) return;
  const int64_t t1 = now_ns();
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  // a nested phase's time belongs to it, not also to its parent
  s.phase_ns[static_cast<int>(p_)] += t1 - t0_;
  if (prev_ != Phase::Count) s.phase_ns[static_cast<int>(prev_)] -= t1 - t0_;
  if (tracing()) {
    s.events.push_back({phase_name(p_), t0_, t1, tid_locked(s), 'X', 0});
    s.events.push_back({"resident memory (MiB)", t1, t1, tid_locked(s), 'C', static_cast<double>(rss_bytes()) / (1 << 20)});
  }
}

OpScope::OpScope(const char* kind, const char* detail_text, double flops, double bytes) {
  if (!on()) return;
  std::string name = std::string(phase_name(t_phase)) + " / " + kind;
  if (detail_text && *detail_text) name += std::string(" ") + detail_text;
  State& s = st();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    auto it = s.op_index.find(name);
    if (it == s.op_index.end()) {
      it = s.op_index.emplace(name, static_cast<int>(s.ops.size())).first;
      OpStat o;
      o.name = name;
      o.phase = t_phase;
      s.ops.push_back(o);
    }
    slot_ = it->second;
    OpStat& o = s.ops[static_cast<size_t>(slot_)];
    o.flops += flops;
    o.bytes += bytes;
    prev_label_ = t_label;
    t_label = s.ops[static_cast<size_t>(slot_)].name.c_str();  // stable: names are never erased while on
  }
  t0_ = now_ns();
}

OpScope::~OpScope() {
  if (t0_ < 0) return;
  const int64_t t1 = now_ns();
  t_label = prev_label_;
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  if (slot_ >= static_cast<int>(s.ops.size())) return;  // restarted meanwhile
  OpStat& o = s.ops[static_cast<size_t>(slot_)];
  ++o.calls;
  o.ns += t1 - t0_;
  if (o.phase != Phase::Count) {
    s.phase_op_ns[static_cast<int>(o.phase)] += t1 - t0_;
    ++s.phase_calls[static_cast<int>(o.phase)];
  }
  if (tracing()) s.events.push_back({o.name, t0_, t1, tid_locked(s), 'X', 0});
}

const char* current_label() { return t_label; }

void chunk(const char* label, int64_t t0, int64_t t1) {
  if (!tracing()) return;
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  s.events.push_back({label ? label : "work", t0, t1, tid_locked(s), 'X', 0});
}

void note_memory(const char* pool, uint64_t bytes) {
  if (!on()) return;
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  uint64_t& m = s.memory[pool];
  m = std::max(m, bytes);
}

namespace {

struct Summary {
  std::vector<OpStat> ops;
  int64_t phase_ns[static_cast<int>(Phase::Count)];
  int64_t phase_op_ns[static_cast<int>(Phase::Count)];
  int64_t phase_calls[static_cast<int>(Phase::Count)];
  std::map<std::string, uint64_t> memory;
  int64_t wall_ns;
  CounterSnapshot c0, c1;
};

Summary summarize() {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  Summary r;
  r.ops = s.ops;
  std::copy(std::begin(s.phase_ns), std::end(s.phase_ns), r.phase_ns);
  std::copy(std::begin(s.phase_op_ns), std::end(s.phase_op_ns), r.phase_op_ns);
  std::copy(std::begin(s.phase_calls), std::end(s.phase_calls), r.phase_calls);
  r.memory = s.memory;
  r.wall_ns = (s.t_stop ? s.t_stop : now_ns()) - s.t_start;
  r.c0 = s.c0;
  r.c1 = s.t_stop ? s.c1 : read_counters();
  std::sort(r.ops.begin(), r.ops.end(), [](const OpStat& a, const OpStat& b) { return a.ns > b.ns; });
  return r;
}

// Phase verdict: the gap (time between kernels) decides overhead-bound when it is over a third
// of the phase; otherwise the verdict of the ops that took most of its time.
const char* phase_verdict(const Summary& r, int p, const Peaks& peaks) {
  const double t = r.phase_ns[p] * 1e-9;
  if (t <= 0) return "-";
  const double gap = (r.phase_ns[p] - r.phase_op_ns[p]) * 1e-9;
  if (gap > t / 3) return "overhead-bound";
  std::map<std::string, double> by;
  for (const OpStat& o : r.ops)
    if (static_cast<int>(o.phase) == p) by[verdict(o.name, o.flops, o.bytes, o.ns * 1e-9, peaks).what] += o.ns;
  const char* best = "-";
  double most = -1;
  for (const auto& [k, v] : by)
    if (v > most) {
      most = v;
      best = k == "compute-bound" ? "compute-bound" : k == "bandwidth-bound" ? "bandwidth-bound" : "overhead-bound";
    }
  return best;
}

}  // namespace

std::string report_text(const Peaks& peaks) {
  const Summary r = summarize();
  std::ostringstream o;
  char buf[512];
  const double wall = r.wall_ns * 1e-9;
  char amx[96] = "";
  if (peaks.bf16_gflops > 0) std::snprintf(amx, sizeof amx, "; bf16 ops: %.0f GFLOP/s", peaks.bf16_gflops);
  if (peaks.f16_gflops > 0)
    std::snprintf(amx + std::strlen(amx), sizeof amx - std::strlen(amx), "; fp16 ops: %.0f GFLOP/s", peaks.f16_gflops);
  std::snprintf(buf, sizeof buf, "profile: %.1f ms wall; roofline peaks %.0f GFLOP/s (int8 ops: %.0f GOP/s%s), DRAM %.1f GB/s (%d threads, %s)\n\n",
                wall * 1e3, peaks.gflops, peaks.int8_gops > 0 ? peaks.int8_gops : peaks.gflops, amx, peaks.dram_gbs, peaks.threads,
                peaks.source.empty() ? "no probe: run `tessera probe`" : peaks.source.c_str());
  o << buf;
  o << "| phase | ms | share | kernels ms | between kernels ms | verdict |\n|---|---|---|---|---|---|\n";
  for (int p = 0; p < static_cast<int>(Phase::Count); ++p) {
    if (r.phase_ns[p] <= 0) continue;
    std::snprintf(buf, sizeof buf, "| %s | %.1f | %.1f%% | %.1f | %.1f | %s |\n", phase_name(static_cast<Phase>(p)), r.phase_ns[p] * 1e-6,
                  100.0 * r.phase_ns[p] / std::max<int64_t>(1, r.wall_ns), r.phase_op_ns[p] * 1e-6,
                  (r.phase_ns[p] - r.phase_op_ns[p]) * 1e-6, phase_verdict(r, p, peaks));
    o << buf;
  }
  o << "\n| op | calls | ms | GFLOP | GB | GFLOP/s | GB/s | of roof | verdict |\n|---|---|---|---|---|---|---|---|---|\n";
  int shown = 0;
  for (const OpStat& op : r.ops) {
    if (++shown > 25) break;
    const double t = op.ns * 1e-9;
    const Verdict v = verdict(op.name, op.flops, op.bytes, t, peaks);
    std::snprintf(buf, sizeof buf, "| %s | %lld | %.2f | %.3f | %.3f | %.1f | %.2f | %.0f%% | %s |\n", op.name.c_str(),
                  static_cast<long long>(op.calls), t * 1e3, op.flops * 1e-9, op.bytes * 1e-9, t > 0 ? op.flops / t * 1e-9 : 0,
                  t > 0 ? op.bytes / t * 1e-9 : 0, 100 * v.frac, v.what);
    o << buf;
  }
  if (static_cast<int>(r.ops.size()) > 25) o << "(" << r.ops.size() - 25 << " more ops in --json)\n";
  o << "\nmemory: peak resident " << peak_rss_bytes() / (1 << 20) << " MiB";
  for (const auto& [k, v] : r.memory) o << "; " << k << " " << v / (1 << 20) << " MiB";
  o << "\n";
  o << "energy: " << describe_energy(r.c0, r.c1, wall) << "\n";
  return o.str();
}

std::string report_json(const Peaks& peaks) {
  const Summary r = summarize();
  std::ostringstream o;
  o << "{\"wall_ms\": " << r.wall_ns * 1e-6 << ", \"peaks\": {\"gflops\": " << peaks.gflops << ", \"int8_gops\": " << peaks.int8_gops << ", \"bf16_gflops\": " << peaks.bf16_gflops << ", \"f16_gflops\": " << peaks.f16_gflops << ", \"dram_gbs\": " << peaks.dram_gbs
    << ", \"threads\": " << peaks.threads << ", \"source\": \"" << json_escape(peaks.source) << "\"}, \"phases\": [";
  bool first = true;
  for (int p = 0; p < static_cast<int>(Phase::Count); ++p) {
    if (r.phase_ns[p] <= 0) continue;
    o << (first ? "" : ", ") << "{\"phase\": \"" << phase_name(static_cast<Phase>(p)) << "\", \"ms\": " << r.phase_ns[p] * 1e-6
      << ", \"kernels_ms\": " << r.phase_op_ns[p] * 1e-6 << ", \"between_kernels_ms\": " << (r.phase_ns[p] - r.phase_op_ns[p]) * 1e-6
      << ", \"kernel_calls\": " << r.phase_calls[p] << ", \"verdict\": \"" << phase_verdict(r, p, peaks) << "\"}";
    first = false;
  }
  o << "], \"ops\": [";
  first = true;
  for (const OpStat& op : r.ops) {
    const double t = op.ns * 1e-9;
    const Verdict v = verdict(op.name, op.flops, op.bytes, t, peaks);
    o << (first ? "" : ", ") << "{\"op\": \"" << json_escape(op.name) << "\", \"calls\": " << op.calls << ", \"ms\": " << t * 1e3
      << ", \"flops\": " << op.flops << ", \"bytes\": " << op.bytes << ", \"gflops_per_s\": " << (t > 0 ? op.flops / t * 1e-9 : 0)
      << ", \"gb_per_s\": " << (t > 0 ? op.bytes / t * 1e-9 : 0) << ", \"fraction_of_roof\": " << v.frac << ", \"verdict\": \""
      << v.what << "\"}";
    first = false;
  }
  o << "], \"memory\": {\"peak_resident_bytes\": " << peak_rss_bytes();
  for (const auto& [k, v] : r.memory) o << ", \"" << json_escape(k) << "\": " << v;
  o << "}, \"energy\": " << energy_json(r.c0, r.c1, r.wall_ns * 1e-9) << "}\n";
  return o.str();
}

std::string trace_json() {
  State& s = st();
  std::lock_guard<std::mutex> lk(s.mu);
  std::ostringstream o;
  o << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  o << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"tessera\"}}";
  for (const auto& [id, t] : s.tids)
    o << ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": " << t << ", \"args\": {\"name\": \""
      << (t == 1 ? "main" : "worker " + std::to_string(t - 1)) << "\"}}";
  char buf[64];
  for (const Event& e : s.events) {
    std::snprintf(buf, sizeof buf, "%.3f", (e.t0 - s.t_start) * 1e-3);
    if (e.ph == 'C') {
      o << ",\n{\"name\": \"" << json_escape(e.name) << "\", \"ph\": \"C\", \"pid\": 1, \"tid\": " << e.tid << ", \"ts\": " << buf
        << ", \"args\": {\"MiB\": " << e.value << "}}";
    } else {
      char dur[64];
      std::snprintf(dur, sizeof dur, "%.3f", (e.t1 - e.t0) * 1e-3);
      o << ",\n{\"name\": \"" << json_escape(e.name) << "\", \"ph\": \"X\", \"pid\": 1, \"tid\": " << e.tid << ", \"ts\": " << buf
        << ", \"dur\": " << dur << "}";
    }
  }
  o << "\n]}\n";
  return o.str();
}

}  // namespace tessera::prof
