// A small fork-join pool for data-parallel kernels. Work is cut into chunks that threads
// claim from a shared counter, so the calling thread finishes everything itself when a worker
// is descheduled (a laptop's cores are shared with the user's apps): no waiting on a sleeper.
// Chunk boundaries depend only on the range, never on timing, and each output is computed by
// exactly one thread, so results are identical whoever runs which chunk.
// Workers spin briefly on an epoch counter, then sleep on it (C++20 atomic wait); with more
// threads than cores they sleep at once.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tessera {

// A watcher of the chunks a pool runs, installed by a layer above the pool (the profiler draws
// them as per-thread slices in its trace). `active` is asked once per parallel_for; when it is
// true, `context` is read on the calling thread and `chunk` is told each chunk's times on the
// thread that ran it. The pool itself knows nothing of profiling.
struct ChunkObserver {
  bool (*active)();
  const void* (*context)();
  int64_t (*now_ns)();
  void (*chunk)(const void* context, int64_t t0_ns, int64_t t1_ns);
};
void set_chunk_observer(const ChunkObserver* observer);  // null: none

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end) over chunks covering [0, n); chunk sizes are multiples of `grain`
  // (except the last). Returns when every chunk is done.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  void worker_loop();
  void run_chunks(uint32_t epoch);

  int n_threads_;
  bool oversubscribed_;  // more threads than the machine has cores
  std::vector<std::thread> workers_;
  // the current job, valid while claim_ carries its epoch
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  uint32_t chunks_ = 0;
  std::atomic<uint64_t> claim_{0};  // epoch << 32 | next chunk index
  std::atomic<uint32_t> epoch_{0};
  std::atomic<uint32_t> done_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tessera
