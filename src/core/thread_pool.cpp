#include "core/thread_pool.h"

#include <algorithm>

#include "core/preempt.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TESSERA_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define TESSERA_PAUSE() asm volatile("yield")
#else
#define TESSERA_PAUSE() ((void)0)
#endif

namespace tessera {

static std::atomic<const ChunkObserver*> g_chunk_observer{nullptr};

void set_chunk_observer(const ChunkObserver* observer) { g_chunk_observer.store(observer, std::memory_order_release); }

static constexpr int kSpinIterations = 20000;  // ~100 µs of spinning before sleeping
static constexpr int kChunksPerThread = 4;

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::max(1, n_threads)),
      // more threads than cores: a spinning waiter takes the core from the thread it waits for,
      // so waiters sleep (workers) or yield (the caller) at once
      oversubscribed_(n_threads_ > static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  epoch_.fetch_add(1);
  epoch_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(uint32_t epoch) {
  for (;;) {
    uint64_t c = claim_.load();
    if (static_cast<uint32_t>(c >> 32) != epoch) return;  // that job is over
    const uint32_t idx = static_cast<uint32_t>(c);
    if (idx >= chunks_) return;
    if (!claim_.compare_exchange_weak(c, c + 1)) continue;
    const int64_t begin = static_cast<int64_t>(idx) * chunk_;
    if (abort_ && abort_->load(std::memory_order_relaxed))
      skipped_.store(true, std::memory_order_relaxed);  // preempted: the caller throws after the join
    else
      (*fn_)(begin, std::min(n_, begin + chunk_));
    done_.fetch_add(1);
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    uint32_t e;
    int spins = 0;
    while ((e = epoch_.load()) == seen) {
      if (!oversubscribed_ && ++spins < kSpinIterations) TESSERA_PAUSE();
      else epoch_.wait(seen);
    }
    seen = e;
    if (stop_.load()) return;
    run_chunks(e);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, RangeFn fn) {
  const ChunkObserver* o = g_chunk_observer.load(std::memory_order_acquire);
  if (o && o->active()) {  // each chunk is reported from the thread that ran it
    const void* context = o->context();
    const auto observed = [&fn, o, context](int64_t a, int64_t b) {
      const int64_t t0 = o->now_ns();
      fn(a, b);
      o->chunk(context, t0, o->now_ns());
    };
    return run(n, grain, RangeFn(observed));
  }
  run(n, grain, fn);
}

void ThreadPool::run(int64_t n, int64_t grain, const RangeFn& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t blocks = (n + grain - 1) / grain;
  if (n_threads_ == 1 || blocks == 1) {
    fn(0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(blocks, static_cast<int64_t>(n_threads_) * kChunksPerThread);
  // Retire the previous job's claim word first: a late worker's claim on it must fail before
  // the job fields below change under it.
  const uint32_t e = epoch_.load() + 1;
  claim_.store((static_cast<uint64_t>(e) << 32) | 0xffffffffu);
  fn_ = &fn;
  abort_ = detail::preempt_flag;  // an armed caller's work stops between chunks when it is raised
  skipped_.store(false, std::memory_order_relaxed);
  n_ = n;
  chunk_ = (blocks + chunks - 1) / chunks * grain;
  chunks_ = static_cast<uint32_t>((n + chunk_ - 1) / chunk_);
  done_.store(0);
  claim_.store(static_cast<uint64_t>(e) << 32);
  epoch_.store(e);
  epoch_.notify_all();
  run_chunks(e);
  // only chunks already being run remain; their thread may have been descheduled, so after a
  // short spin the caller yields its core rather than burn it
  for (int spins = 0; done_.load() != chunks_;) {
    if (!oversubscribed_ && ++spins < kSpinIterations) TESSERA_PAUSE();
    else std::this_thread::yield();
  }
  if (skipped_.load(std::memory_order_relaxed)) throw Preempted{};
}

}  // namespace tessera
