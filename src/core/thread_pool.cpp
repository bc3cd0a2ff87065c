#include "core/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define TESSERA_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define TESSERA_PAUSE() asm volatile("yield")
#else
#define TESSERA_PAUSE() ((void)0)
#endif

namespace tessera {

static constexpr int kSpinIterations = 20000;  // ~100 µs of spinning before sleeping

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  epoch_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t e;
    int spins = 0;
    while ((e = epoch_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinIterations) {
        TESSERA_PAUSE();
      } else {
        epoch_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = e;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  epoch_.notify_all();
  fn(0);
  while (pending_.load(std::memory_order_acquire) != 0) TESSERA_PAUSE();
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t blocks = (n + grain - 1) / grain;
  const int nt = static_cast<int>(std::min<int64_t>(n_threads_, blocks));
  if (nt <= 1) {
    fn(0, n);
    return;
  }
  run([&](int t) {
    if (t >= nt) return;
    const int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
    const int64_t begin = b0 * grain, end = std::min(n, b1 * grain);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace tessera
