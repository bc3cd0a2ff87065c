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

namespace tessera {

#if defined(TESSERA_HAVE_AVX512)
namespace probe_x86 {
double fma_loop(int64_t iters);
double vnni_loop(int64_t iters);
double bf16_dot_loop(int64_t iters);
double amx_bf16_loop(int64_t iters);
double amx_int8_loop(int64_t iters);
double read_loop(const float* p, size_t n_floats, int passes);
}  // namespace probe_x86
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

std::vector<ProbeResult> run_probe(const ProbeOptions& opt) {
  const int all = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> counts = {1};
  if (all > 1) counts.push_back(all);
  std::vector<ProbeResult> out;
#if defined(TESSERA_HAVE_AVX512)
  const CpuFeatures& f = cpu_features();
  const bool avx512 = f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  if (!avx512) fail("the probe's compute loops need AVX-512 (not available on this CPU)");
  for (int t : counts) {
    out.push_back(measure("fp32_fma_avx512", "GFLOP/s", 1e9, t, opt.repetitions, [](int) { return probe_x86::fma_loop(20'000'000); }));
    if (f.avx512vnni)
      out.push_back(measure("int8_dot_vnni", "GOP/s", 1e9, t, opt.repetitions, [](int) { return probe_x86::vnni_loop(20'000'000); }));
    if (f.avx512bf16)
      out.push_back(measure("bf16_dot_avx512", "GFLOP/s", 1e9, t, opt.repetitions, [](int) { return probe_x86::bf16_dot_loop(10'000'000); }));
  }
  if (amx_granted()) {
    for (int t : counts) {
      if (f.amx_bf16)
        out.push_back(measure("amx_bf16", "GFLOP/s", 1e9, t, opt.repetitions, [](int) { return probe_x86::amx_bf16_loop(2'000'000); }));
      if (f.amx_int8)
        out.push_back(measure("amx_int8", "GOP/s", 1e9, t, opt.repetitions, [](int) { return probe_x86::amx_int8_loop(2'000'000); }));
    }
  }
  // read bandwidth: per-thread buffers of L2, L3 and DRAM size
  struct Level {
    const char* name;
    size_t bytes;
    int passes;
  };
  for (const Level& lv : {Level{"read_l2", size_t{512} << 10, 4000}, Level{"read_l3", size_t{16} << 20, 60}, Level{"read_dram", size_t{512} << 20, 2}}) {
    for (int t : counts) {
      std::vector<std::unique_ptr<float, decltype(&std::free)>> bufs;
      for (int i = 0; i < t; ++i) {
        float* p = static_cast<float*>(std::aligned_alloc(64, lv.bytes));
        if (!p) fail("probe: out of memory");
        std::memset(p, 1, lv.bytes);
        bufs.emplace_back(p, &std::free);
      }
      out.push_back(measure(lv.name, "GB/s", 1e9, t, opt.repetitions,
                            [&](int i) { return probe_x86::read_loop(bufs[static_cast<size_t>(i)].get(), lv.bytes / 4, lv.passes); }));
    }
  }
#else
  (void)counts;
  fail("the probe is implemented for x86-64 with AVX-512 only so far");
#endif
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

double probe_read_pass(const float* p, size_t bytes) {
#if defined(TESSERA_HAVE_AVX512)
  const CpuFeatures& f = cpu_features();
  if (f.os_avx512 && f.avx512f) return probe_x86::read_loop(p, bytes / 4, 1);
  return 0;
#else
  (void)p;
  (void)bytes;
  return 0;
#endif
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
