// Small helpers shared by the AVX-512 kernel files (compiled with their ISA flags).
#pragma once
#include "kernels/simd/deq16.h"

namespace tessera::avx512 {
using simd::half_at;
}  // namespace tessera::avx512
