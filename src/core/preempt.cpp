#include "core/preempt.h"

namespace tessera::detail {
thread_local const std::atomic<bool>* preempt_flag = nullptr;
}
