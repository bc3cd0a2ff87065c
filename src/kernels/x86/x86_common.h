// Small helpers shared by the AVX-512 kernel files (compiled with their ISA flags).
#pragma once
#include "kernels/x86/deq_x86.h"

namespace tessera::avx512 {
using x86::half_at;
}  // namespace tessera::avx512
