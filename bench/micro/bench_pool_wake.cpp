// The thread pool after idle time, as the screen assistant uses it: a pause long enough for the
// workers to sleep, then a burst of small jobs (3 chunks of ~8 µs each, decode attention's shape
// on 2 threads). Reports the burst's time (median, p90, max over frames) and in how many frames
// the first 20 jobs ran almost entirely on the caller (the worker not yet running). On the
// 2-vCPU VMs a woken worker could sit behind its caller on one CPU for ~10 ms
// (core/thread_pool.cpp: such a worker now moves off).
//   build-bench/bench/micro/bench_pool_wake [--idle-ms N] [--frames N] [-t THREADS]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"

using namespace tessera;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  int idle_ms = 5, frames = 60, threads = 2;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--idle-ms") && i + 1 < argc) idle_ms = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--frames") && i + 1 < argc) frames = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "-t") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else fail("bench_pool_wake: unknown argument '%s' (use --idle-ms N, --frames N, -t N)", argv[i]);
  }
  if (idle_ms < 0 || frames < 1 || threads < 2) fail("bench_pool_wake: --idle-ms >= 0, --frames >= 1, -t >= 2");
  ThreadPool pool(threads);
  constexpr int kJobs = 100, kFirst = 20;
  const auto spin = [](std::chrono::microseconds d) {
    for (const auto t0 = Clock::now(); Clock::now() - t0 < d;) {
    }
  };
  std::vector<double> ms;
  int stalled = 0;
  int64_t by_workers = 0;
  for (int f = 0; f < frames; ++f) {
    std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
    const auto t0 = Clock::now();
    int others = 0;  // chunks of the first jobs run by a worker
    for (int j = 0; j < kJobs; ++j) {
      const std::thread::id self = std::this_thread::get_id();
      std::atomic<int> by_worker{0};
      pool.parallel_for(3, 1, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) {
          if (std::this_thread::get_id() != self) by_worker.fetch_add(1, std::memory_order_relaxed);
          spin(std::chrono::microseconds(8));
        }
      });
      if (j < kFirst) others += by_worker.load();
      by_workers += by_worker.load();
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    stalled += others < kFirst / 2;  // a worker running would take ~1 chunk of 3 per job
  }
  std::sort(ms.begin(), ms.end());
  std::printf("{\"bench\":\"pool_wake\",\"threads\":%d,\"idle_ms\":%d,\"frames\":%d,\"jobs\":%d,\"burst_ms_median\":%.3f,"
              "\"burst_ms_p90\":%.3f,\"burst_ms_max\":%.3f,\"frames_first_jobs_on_one_thread\":%d,\"worker_chunk_share\":%.3f}\n",
              threads, idle_ms, frames, kJobs, ms[ms.size() / 2], ms[ms.size() * 9 / 10], ms.back(), stalled,
              static_cast<double>(by_workers) / (3.0 * kJobs * frames));
  return 0;
}
