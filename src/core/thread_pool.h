// A small fork-join pool for data-parallel kernels. Work is cut into chunks: each thread's
// home chunk first (chunk t for thread t, the caller being 0), then the rest claimed from a
// shared counter. A home chunk whose worker has not started is taken over by the caller, so
// the calling thread finishes everything itself when a worker is descheduled (a laptop's cores
// are shared with the user's apps): no waiting on a sleeper.
// Chunk boundaries depend only on the range, never on timing, and each output is computed by
// exactly one thread, so results are identical whoever runs which chunk.
// Workers spin briefly on an epoch counter, then sleep on it (C++20 atomic wait); with more
// threads than cores they sleep at once.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
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

// What parallel_for runs: a non-owning reference to a callable taking a range [begin, end).
// Unlike std::function it never allocates (a lambda capturing eight references would, once per
// call), so a decode step allocates nothing (tests/decode_allocs.cpp). The callable must outlive
// the call, as an argument temporary does.
class RangeFn {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(F&& f)  // NOLINT: converts from any callable, like std::function
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, int64_t a, int64_t b) { (*static_cast<std::remove_reference_t<F>*>(o))(a, b); }) {}
  void operator()(int64_t a, int64_t b) const { call_(obj_, a, b); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end) over chunks covering [0, n); chunk sizes are multiples of `grain`
  // (except the last). Returns when every chunk is done. On a thread armed for preemption
  // (core/preempt.h), a raised flag skips the chunks not yet started and the call throws
  // Preempted once the running ones finish: a question waits for one chunk, not a whole GEMM.
  void parallel_for(int64_t n, int64_t grain, RangeFn fn);

 private:
  void run(int64_t n, int64_t grain, const RangeFn& fn);
  void worker_loop(int t);
  bool claim_home(int t, uint32_t epoch);
  uint32_t run_shared(uint32_t epoch, int t, uint32_t done);
  void run_chunk(uint32_t idx);
  void report(int t, uint32_t epoch, uint32_t done);

  int n_threads_;
  bool oversubscribed_;  // more threads than the machine has cores
  std::vector<std::thread> workers_;
  // A job's first n_threads chunks are home chunks, chunk t for thread t (0: the caller); the
  // rest are shared, claimed from a counter. Each home claim and each worker's progress has a
  // cache line of its own, written by its thread, so a fork-join of one chunk per thread moves
  // two lines between cores (the job to the worker, its progress back) where one shared claim
  // counter and done counter moved five; the caller takes a home chunk over only when its
  // worker has not started (descheduled), so a sleeper is still never waited for.
  struct PerThread {
    alignas(64) std::atomic<uint32_t> home{0};      // epoch of the last claim of this worker's home chunk (unused for the caller's, never contested)
    alignas(64) std::atomic<uint64_t> progress{0};  // epoch << 32 | chunks this thread finished in it
    std::atomic<int> cpu{-1};                       // the CPU this worker ran its last job on
  };
  std::unique_ptr<PerThread[]> per_;
  // The current job, valid while a claim for its epoch succeeds:
  alignas(64) std::atomic<uint32_t> epoch_{0};
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  std::atomic<uint32_t> chunks_{0};  // read by late workers while the next job sets it
  std::atomic<uint64_t> job_{0};  // epoch << 32 | home chunks (min(chunks, threads))
  std::atomic<bool> stop_{false};
  std::atomic<int> caller_cpu_{-1};  // the CPU the last job's caller ran on
  const std::atomic<bool>* abort_ = nullptr;  // the caller's preemption flag (core/preempt.h)
  alignas(64) std::atomic<uint64_t> claim_{0};  // epoch << 32 | next shared chunk index
  std::atomic<bool> skipped_{false};            // a chunk was skipped for the preemption flag
  char pad_[64 - sizeof(std::atomic<uint64_t>) - sizeof(std::atomic<bool>)];
};

}  // namespace tessera
