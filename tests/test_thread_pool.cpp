// The fork-join pool (core/thread_pool.h): every index of every job is run exactly once, with
// home chunks, shared chunks, more threads than chunks and more threads than cores; a chunk's
// boundaries depend only on the range; preemption stops a job between chunks and leaves the
// pool usable; a worker that cannot start (its core taken) is not waited for; and workers woken
// from their sleep (which may move off their caller's CPU) keep their CPU affinity.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#include <dirent.h>
#include <fstream>
#include <string>
#endif

#include "core/preempt.h"
#include "core/thread_pool.h"

namespace tessera {
namespace {

// Runs `jobs` jobs of varied sizes and grains, each index counted; checks every count.
void check_exactly_once(ThreadPool& pool, int jobs) {
  std::vector<std::atomic<int>> hits(1000);
  std::vector<int> want(hits.size(), 0);
  for (int j = 0; j < jobs; ++j) {
    const int64_t n = 1 + (j * 37) % static_cast<int64_t>(hits.size());
    const int64_t grain = 1 + (j * 13) % 64;
    pool.parallel_for(n, grain, [&](int64_t a, int64_t b) {
      ASSERT_LE(0, a);
      ASSERT_LT(a, b);
      ASSERT_LE(b, n);
      ASSERT_TRUE(a % grain == 0) << "a chunk starts inside a grain";
      for (int64_t i = a; i < b; ++i) hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
    });
    for (int64_t i = 0; i < n; ++i) ++want[static_cast<size_t>(i)];
  }
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), want[i]) << "index " << i;
}

TEST(ThreadPool, EveryIndexExactlyOnceAtEveryThreadCount) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int threads : {1, 2, 3, 5, 4 * cores}) {
    ThreadPool pool(threads);
    check_exactly_once(pool, 3000);
  }
}

TEST(ThreadPool, ChunkBoundariesDependOnlyOnTheRange) {
  // the same job twice, at 2 and 3 threads: the same set of chunks (results are identical
  // whoever runs which chunk, kernels/attention.h and the GEMMs rely on it)
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<std::pair<int64_t, int64_t>> first, again;
    std::atomic<int> lock{0};
    const auto record = [&](std::vector<std::pair<int64_t, int64_t>>& into) {
      return [&into, &lock](int64_t a, int64_t b) {
        while (lock.exchange(1)) std::this_thread::yield();
        into.emplace_back(a, b);
        lock.store(0);
      };
    };
    auto f1 = record(first);
    pool.parallel_for(1000, 8, f1);
    auto f2 = record(again);
    pool.parallel_for(1000, 8, f2);
    std::sort(first.begin(), first.end());
    std::sort(again.begin(), again.end());
    EXPECT_EQ(first, again);
    EXPECT_EQ(static_cast<int>(first.size()), 4 * threads);  // kChunksPerThread per thread
  }
}

TEST(ThreadPool, PreemptionStopsBetweenChunksAndThePoolStaysUsable) {
  ThreadPool pool(2);
  std::atomic<bool> flag{false};
  std::atomic<int> ran{0};
  {
    PreemptionScope armed(&flag);
    EXPECT_THROW(pool.parallel_for(64, 1,
                                   [&](int64_t, int64_t) {
                                     ran.fetch_add(1);
                                     flag.store(true);  // raised by the first chunk: the rest are skipped
                                   }),
                 Preempted);
  }
  EXPECT_GE(ran.load(), 1);
  EXPECT_LT(ran.load(), 8);  // 8 chunks: at most the ones already running when it was raised
  check_exactly_once(pool, 200);
}

TEST(ThreadPool, ACallerDoesNotWaitForAWorkerThatCannotStart) {
  // One core for two pool threads plus a busy thread: the pool's worker often cannot run when a
  // job is published. The caller takes its home chunk over, so jobs finish at the caller's pace.
  // (A timing bound would be flaky on shared machines; what is checked is that every job
  // completes with every index once while the worker is starved.)
  ThreadPool pool(2);
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i)
    hogs.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  check_exactly_once(pool, 500);
  stop.store(true);
  for (auto& h : hogs) h.join();
}

#if defined(__linux__)
// Cpus_allowed_list of every thread of this process.
std::vector<std::string> thread_affinities() {
  std::vector<std::string> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/status");
    for (std::string line; std::getline(f, line);)
      if (line.rfind("Cpus_allowed_list:", 0) == 0) out.push_back(line);
  }
  closedir(d);
  return out;
}

// Jobs after pauses long enough for the workers to sleep: each wake may move a worker off a CPU
// the pool's other threads use (by narrowing its mask for a moment); the jobs complete and every
// thread ends with the mask it began with, with the process's mask full or cut to one CPU.
TEST(ThreadPool, WorkersWokenFromSleepKeepTheirAffinity) {
  cpu_set_t full;
  ASSERT_EQ(sched_getaffinity(0, sizeof full, &full), 0);
  for (bool one_cpu : {false, true}) {
    if (one_cpu) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(std::max(0, sched_getcpu()), &one);
      ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    }
    {
      ThreadPool pool(2);
      for (int i = 0; i < 20; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // past the workers' spin
        check_exactly_once(pool, 3);
      }
      // a worker preempted between its two sched_setaffinity calls (a loaded host) shows the
      // narrowed mask for that moment: read again until the masks agree, for up to a second
      std::vector<std::string> masks = thread_affinities();
      const auto agree = [&] { return std::all_of(masks.begin(), masks.end(), [&](const std::string& m) { return m == masks.front(); }); };
      for (int tries = 0; tries < 100 && !agree(); ++tries) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        masks = thread_affinities();
      }
      ASSERT_GE(masks.size(), 2u);
      for (const std::string& m : masks) EXPECT_EQ(m, masks.front()) << (one_cpu ? "one CPU" : "all CPUs");
    }
    ASSERT_EQ(sched_setaffinity(0, sizeof full, &full), 0);
  }
}
#endif

}  // namespace
}  // namespace tessera
