#include "core/thread_pool.h"

#include <algorithm>

#if defined(__linux__)
#include <sched.h>
#endif

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
static constexpr int kStealAfter = 16;  // the caller's polls of a worker that has not started before it takes its chunk

// The CPU the calling thread runs on, or -1 where that cannot be asked.
static int current_cpu() {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

// A worker woken from its sleep on a CPU another thread of the pool is using moves off it, when
// its affinity allows another. The kernel may place a woken thread on its waker's CPU (measured
// on the 2-vCPU VMs here, Linux 6.18: a worker that last ran on the caller's CPU woke there, and
// for ~10 ms — hundreds of jobs — only ran when the caller was preempted, so every job ran on one
// thread, while the worker's spinning took turns on that CPU with it). Narrowing the mask to the
// other CPUs migrates the thread at once; the old mask is then put back, so it stays free to move.
static void leave_cpu_of(const int* busy, int n_busy) {
#if defined(__linux__)
  const int here = current_cpu();
  bool shared = false;
  for (int i = 0; i < n_busy; ++i) shared = shared || (busy[i] == here && here >= 0);
  if (!shared) return;
  cpu_set_t mask, other;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return;
  other = mask;
  for (int i = 0; i < n_busy; ++i)
    if (busy[i] >= 0 && busy[i] < CPU_SETSIZE) CPU_CLR(busy[i], &other);
  if (CPU_COUNT(&other) == 0) return;  // no CPU free of the pool's threads: stay
  if (sched_setaffinity(0, sizeof other, &other) == 0) sched_setaffinity(0, sizeof mask, &mask);
#else
  (void)busy, (void)n_busy;
#endif
}

// Epochs wrap; a claim is older than epoch e when it is behind it in the wrapped order.
static bool before(uint32_t a, uint32_t e) { return static_cast<int32_t>(a - e) < 0; }

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::max(1, n_threads)),
      // more threads than cores: a spinning waiter takes the core from the thread it waits for,
      // so waiters sleep (workers) or yield (the caller) at once
      oversubscribed_(n_threads_ > static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      per_(new PerThread[static_cast<size_t>(n_threads_)]) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  epoch_.fetch_add(1);
  epoch_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunk(uint32_t idx) {
  const int64_t begin = static_cast<int64_t>(idx) * chunk_;
  if (abort_ && abort_->load(std::memory_order_relaxed))
    skipped_.store(true, std::memory_order_relaxed);  // preempted: the caller throws after the join
  else
    (*fn_)(begin, std::min(n_, begin + chunk_));
}

// Thread t's home chunk for `epoch`, unless someone took it (or that job is over: a later claim).
bool ThreadPool::claim_home(int t, uint32_t epoch) {
  std::atomic<uint32_t>& h = per_[static_cast<size_t>(t)].home;
  uint32_t c = h.load();
  while (before(c, epoch))
    if (h.compare_exchange_weak(c, epoch)) return true;
  return false;
}

void ThreadPool::report(int t, uint32_t epoch, uint32_t done) {
  per_[static_cast<size_t>(t)].progress.store(static_cast<uint64_t>(epoch) << 32 | done, std::memory_order_release);
}

// Shared chunks of `epoch` until none is left; returns `done` plus the chunks run.
uint32_t ThreadPool::run_shared(uint32_t epoch, int t, uint32_t done) {
  for (;;) {
    uint64_t c = claim_.load();
    if (static_cast<uint32_t>(c >> 32) != epoch) return done;  // that job is over
    const uint32_t idx = static_cast<uint32_t>(c);
    if (idx >= chunks_.load(std::memory_order_relaxed)) return done;  // a newer job's count only makes the CAS fail
    if (!claim_.compare_exchange_weak(c, c + 1)) continue;
    run_chunk(idx);
    ++done;
    if (t > 0) report(t, epoch, done);
  }
}

void ThreadPool::worker_loop(int t) {
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
    if (spins >= kSpinIterations) {  // it slept: see that it did not wake on a CPU the pool's others use
      int busy[64], n_busy = 0;
      busy[n_busy++] = caller_cpu_.load(std::memory_order_relaxed);
      for (int u = 1; u < n_threads_ && n_busy < 64; ++u)
        if (u != t) busy[n_busy++] = per_[static_cast<size_t>(u)].cpu.load(std::memory_order_relaxed);
      leave_cpu_of(busy, n_busy);
    }
    per_[static_cast<size_t>(t)].cpu.store(current_cpu(), std::memory_order_relaxed);
    uint32_t done = 0;
    // the home chunk count comes with its epoch: a late worker must not take a newer job's
    // count for its own (its home claim for epoch e would then succeed where job e had no home
    // chunk for it, and run a chunk of the newer job twice)
    const uint64_t job = job_.load();
    if (static_cast<uint32_t>(job >> 32) != e) continue;  // job e is over: the loop sees the next
    if (static_cast<uint32_t>(t) >= static_cast<uint32_t>(job)) {
      report(t, e, 0);  // no home chunk: a progress word from 2^32 jobs ago must not match e
    } else if (claim_home(t, e)) {
      report(t, e, 0);  // started: the caller will not take this chunk over
      run_chunk(static_cast<uint32_t>(t));
      report(t, e, ++done);
    }
    run_shared(e, t, done);
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
  const int64_t want = std::min<int64_t>(blocks, static_cast<int64_t>(n_threads_) * kChunksPerThread);
  // Retire the previous job's shared claims first: a late worker's claim on them must fail
  // before the job fields below change under it.
  const uint32_t e = epoch_.load() + 1;
  caller_cpu_.store(current_cpu(), std::memory_order_relaxed);
  claim_.store((static_cast<uint64_t>(e) << 32) | 0xffffffffu);
  fn_ = &fn;
  abort_ = detail::preempt_flag;  // an armed caller's work stops between chunks when it is raised
  skipped_.store(false, std::memory_order_relaxed);
  n_ = n;
  chunk_ = (blocks + want - 1) / want * grain;
  const uint32_t chunks = static_cast<uint32_t>((n + chunk_ - 1) / chunk_);
  chunks_.store(chunks, std::memory_order_relaxed);
  const uint32_t homes = std::min<uint32_t>(chunks, static_cast<uint32_t>(n_threads_));
  job_.store(static_cast<uint64_t>(e) << 32 | homes);
  claim_.store(static_cast<uint64_t>(e) << 32 | homes);
  epoch_.store(e);
  epoch_.notify_all();
  run_chunk(0);  // the caller's home chunk: only workers' home chunks are ever taken over
  uint32_t done = run_shared(e, 0, 1);
  // What the workers finished; a worker that has not started after a few polls (descheduled)
  // has its home chunk taken over, and only chunks already being run are waited for; after a
  // short spin the caller yields its core rather than burn it.
  for (int spins = 0;;) {
    uint32_t total = done;
    for (int t = 1; t < n_threads_; ++t) {
      const uint64_t p = per_[static_cast<size_t>(t)].progress.load(std::memory_order_acquire);
      if (static_cast<uint32_t>(p >> 32) == e) total += static_cast<uint32_t>(p);
      else if (static_cast<uint32_t>(t) < homes && spins >= kStealAfter && claim_home(t, e)) {
        run_chunk(static_cast<uint32_t>(t));
        ++done, ++total;
      }
    }
    if (total == chunks) break;
    if (!oversubscribed_ && ++spins < kSpinIterations) TESSERA_PAUSE();
    else {
      ++spins;
      std::this_thread::yield();
    }
  }
  if (skipped_.load(std::memory_order_relaxed)) throw Preempted{};
}

}  // namespace tessera
