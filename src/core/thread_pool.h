// A small fork-join pool. Workers spin briefly on an epoch counter and then sleep on it
// (C++20 atomic wait), so back-to-back kernels pay no syscall while short gaps pay no spin.
// The calling thread is worker 0. Tasks are split statically by index, so results never
// depend on scheduling.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tessera {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index) once on each of size() threads and waits for all.
  void run(const std::function<void(int)>& fn);

  // Splits [0, n) into size() contiguous ranges aligned to `grain` and calls
  // fn(begin, end) for each non-empty range.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tessera
