#include "profile/probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "core/cpu.h"
#include "core/error.h"
#include "core/huge_page_arena.h"

namespace tessera {

#if defined(TESSERA_HAVE_AVX512)
namespace probe_x86 {
double fma_loop(int64_t iters);
double vnni_loop(int64_t iters);
double bf16_dot_loop(int64_t iters);
double fp16_fma_loop(int64_t iters);
double amx_bf16_loop(int64_t iters);
double amx_bf16_loads_loop(int64_t iters);
double amx_int8_loop(int64_t iters);
double read_loop(const float* p, size_t n_floats, int passes);
}  // namespace probe_x86
namespace probe_avx2 {
double fma_loop(int64_t iters);
double int8_dot_loop(int64_t iters);
double read_loop(const float* p, size_t n_floats, int passes);
}  // namespace probe_avx2
#elif defined(__aarch64__)
namespace probe_neon {
double fma_loop(int64_t iters);
double sdot_loop(int64_t iters);
double smmla_loop(int64_t iters);
double read_loop(const float* p, size_t n_floats, int passes);
}  // namespace probe_neon
#endif

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Runs work(thread) on `threads` threads at once, `reps` times; rate = total units / wall time.
ProbeResult measure(const std::string& name, const std::string& unit, double scale, int threads, int reps,
                    const std::function<double(int)>& work) {
  ProbeResult r{name, unit, threads, 0, {}};
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up (frequency, page faults)
    // real threads started together (not the work-claiming pool, which may run chunks serially)
    std::vector<double> units(static_cast<size_t>(threads), 0.0);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        units[static_cast<size_t>(t)] = work(t);
      });
    while (ready.load() != threads) std::this_thread::yield();
    const double t0 = now();
    go.store(true);
    for (auto& th : ts) th.join();
    const double dt = now() - t0;
    double total = 0;
    for (double u : units) total += u;
    if (rep >= 0) r.samples.push_back(total / dt / scale);
  }
  r.value = median(r.samples);
  return r;
}

}  // namespace

namespace {

// One compute figure: a loop run on each thread, returning the units it did.
struct ComputeLoop {
  const char* name;
  const char* unit;
  int64_t iters;
  double (*loop)(int64_t);
};
using ReadLoop = double (*)(const float*, size_t, int);

// The loops this CPU (and OS, for AMX) can run, every vector level it has: on an AVX-512 machine
// the AVX2 figures too, the roofs of the `--isa avx2` cap.
std::vector<ComputeLoop> compute_loops() {
  std::vector<ComputeLoop> v;
#if defined(TESSERA_HAVE_AVX512)
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.os_avx && f.avx2 && f.fma;
  const bool avx512 = avx2 && f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  if (avx512) {
    v.push_back({"fp32_fma_avx512", "GFLOP/s", 20'000'000, probe_x86::fma_loop});
    if (f.avx512vnni) v.push_back({"int8_dot_vnni", "GOP/s", 20'000'000, probe_x86::vnni_loop});
    if (f.avx512bf16) v.push_back({"bf16_dot_avx512", "GFLOP/s", 10'000'000, probe_x86::bf16_dot_loop});
    if (f.avx512fp16) v.push_back({"fp16_fma_avx512", "GFLOP/s", 20'000'000, probe_x86::fp16_fma_loop});
  }
  if (avx2) {
    v.push_back({"fp32_fma_avx2", "GFLOP/s", 20'000'000, probe_avx2::fma_loop});
    v.push_back({"int8_dot_avx2", "GOP/s", 10'000'000, probe_avx2::int8_dot_loop});
  }
  if (avx512 && amx_granted()) {
    if (f.amx_bf16) {
      v.push_back({"amx_bf16", "GFLOP/s", 2'000'000, probe_x86::amx_bf16_loop});
      v.push_back({"amx_bf16_loads", "GFLOP/s", 2'000'000, probe_x86::amx_bf16_loads_loop});
    }
    if (f.amx_int8) v.push_back({"amx_int8", "GOP/s", 2'000'000, probe_x86::amx_int8_loop});
  }
#elif defined(__aarch64__)
  const CpuFeatures& f = cpu_features();
  v.push_back({"fp32_fma_neon", "GFLOP/s", 20'000'000, probe_neon::fma_loop});
  if (f.dotprod) v.push_back({"int8_dot_sdot", "GOP/s", 20'000'000, probe_neon::sdot_loop});
  if (f.i8mm) v.push_back({"int8_mmla_i8mm", "GOP/s", 10'000'000, probe_neon::smmla_loop});
#endif
  return v;
}

ReadLoop read_loop() {
#if defined(TESSERA_HAVE_AVX512)
  const CpuFeatures& f = cpu_features();
  if (f.os_avx512 && f.avx512f) return probe_x86::read_loop;
  if (f.os_avx && f.avx2) return probe_avx2::read_loop;
  return nullptr;
#elif defined(__aarch64__)
  return probe_neon::read_loop;
#else
  return nullptr;
#endif
}

}  // namespace

std::vector<ProbeResult> run_probe(const ProbeOptions& opt) {
  const int all = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> counts = {1};
  if (all > 1) counts.push_back(all);
  const ReadLoop reader = read_loop();
  const std::vector<ComputeLoop> loops = compute_loops();
  if (!reader || loops.empty()) fail("the probe needs AVX2+FMA (x86-64) or NEON (AArch64); this CPU has neither");
  const auto scaled = [&](int64_t n) { return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(n) * opt.scale)); };
  std::vector<ProbeResult> out;
  if (opt.read_bytes <= 0)
    for (const ComputeLoop& c : loops)
      for (int t : counts) {
        const int64_t iters = scaled(c.iters);
        out.push_back(measure(c.name, c.unit, 1e9, t, opt.repetitions, [&](int) { return c.loop(iters); }));
      }
  // read bandwidth: per-thread buffers of L2, L3 and DRAM size; a set of read_bytes in all
  struct Level {
    const char* name;
    size_t bytes;  // per thread; 0: read_bytes split across the threads
    int passes;
  };
  std::vector<Level> levels = {{"read_l2", size_t{512} << 10, 4000}, {"read_l3", size_t{16} << 20, 60}, {"read_dram", size_t{512} << 20, 2}};
  if (opt.read_bytes > 0) {
    if (opt.read_bytes > (int64_t{64} << 30)) fail("probe: --read-bytes %lld is over 64 GiB", static_cast<long long>(opt.read_bytes));
    // at least 2 passes and about 1 GB read per timed run
    levels.push_back({"read_set", 0, static_cast<int>(std::max<int64_t>(2, (int64_t{1} << 30) / opt.read_bytes))});
  }
  for (const Level& lv : levels) {
    const int passes = static_cast<int>(std::max<int64_t>(1, scaled(lv.passes)));
    for (int t : counts) {
      const size_t want = lv.bytes ? lv.bytes : static_cast<size_t>(opt.read_bytes / t);
      const size_t bytes = std::max<size_t>(size_t{64} << 10, static_cast<size_t>(static_cast<double>(want) * std::min(1.0, opt.scale * 100)) / 64 * 64);
      // in huge pages, as a Session keeps the weights it streams (core/huge_page_arena.h)
      HugePageArena arena;
      std::vector<float*> bufs;
      for (int i = 0; i < t; ++i) {
        float* p = reinterpret_cast<float*>(arena.allocate(bytes, "probe's read buffer"));
        std::memset(p, 1, bytes);
        bufs.push_back(p);
      }
      out.push_back(measure(lv.name, "GB/s", 1e9, t, opt.repetitions,
                            [&](int i) { return reader(bufs[static_cast<size_t>(i)], bytes / 4, passes); }));
    }
  }
  return out;
}

std::string probe_to_json(const std::vector<ProbeResult>& r) {
  std::string s = "{\"probe\": [";
  for (size_t i = 0; i < r.size(); ++i) {
    s += format("%s\n  {\"name\": \"%s\", \"unit\": \"%s\", \"threads\": %d, \"median\": %.2f, \"samples\": [", i ? "," : "",
                r[i].name.c_str(), r[i].unit.c_str(), r[i].threads, r[i].value);
    for (size_t k = 0; k < r[i].samples.size(); ++k) s += format("%s%.2f", k ? ", " : "", r[i].samples[k]);
    s += "]}";
  }
  return s + "\n]}\n";
}

std::vector<std::string> probe_contended(const std::vector<ProbeResult>& r) {
  std::vector<std::string> out;
  for (const ProbeResult& one : r) {
    if (one.threads != 1 || one.unit == "GB/s" || one.value <= 0) continue;  // bandwidth need not scale
    for (const ProbeResult& all : r)
      if (all.name == one.name && all.threads > 1 && all.value < 0.75 * all.threads * one.value)
        out.push_back(format("%s on %d threads is %.2fx its 1-thread figure (idle cores give about %dx): other work "
                             "shared the cores; rerun the probe on a quiet machine",
                             one.name.c_str(), all.threads, all.value / one.value, all.threads));
  }
  return out;
}

double probe_read_pass(const float* p, size_t bytes) {
  const ReadLoop reader = read_loop();
  return reader ? reader(p, bytes / 4, 1) : 0;
}

double probe_lookup(const std::string& json, const std::string& name, int threads) {
  const std::string key = "\"name\": \"" + name + "\", ";
  size_t pos = 0;
  while ((pos = json.find(key, pos)) != std::string::npos) {
    const size_t th = json.find("\"threads\": ", pos);
    const size_t md = json.find("\"median\": ", pos);
    if (th == std::string::npos || md == std::string::npos) break;
    if (std::atoi(json.c_str() + th + 11) == threads) return std::atof(json.c_str() + md + 10);
    pos += key.size();
  }
  return 0;
}

}  // namespace tessera
