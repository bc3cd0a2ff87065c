// Cooperative preemption of background work. Long passes (a decoder forward, a vision tile's
// encode) call preemption_point() between layers and between a layer's parts; a background
// worker arms its own thread with a flag that foreground work raises, and the next point then
// throws Preempted, so a question waits for at most one part of a layer of the background work
// in front of it; ThreadPool::parallel_for on an armed thread also stops between chunks. Unarmed
// threads pay one thread-local load per point.
#pragma once
#include <atomic>

namespace tessera {

struct Preempted {};

namespace detail {
extern thread_local const std::atomic<bool>* preempt_flag;
}

inline void preemption_point() {
  const std::atomic<bool>* f = detail::preempt_flag;
  if (f && f->load(std::memory_order_relaxed)) throw Preempted{};
}

// Arms the calling thread for its lifetime.
class PreemptionScope {
 public:
  explicit PreemptionScope(const std::atomic<bool>* flag) : prev_(detail::preempt_flag) { detail::preempt_flag = flag; }
  ~PreemptionScope() { detail::preempt_flag = prev_; }
  PreemptionScope(const PreemptionScope&) = delete;
  PreemptionScope& operator=(const PreemptionScope&) = delete;

 private:
  const std::atomic<bool>* prev_;
};

}  // namespace tessera
