#include "core/dtype.h"

namespace tessera {

const DTypeInfo* dtype_info(uint32_t id) {
  static const DTypeInfo kF32{"F32", 1, 4, true}, kF16{"F16", 1, 2, true},
      kQ4_0{"Q4_0", 32, 18, true}, kQ4_1{"Q4_1", 32, 20, true}, kQ5_0{"Q5_0", 32, 22, true},
      kQ5_1{"Q5_1", 32, 24, true}, kQ8_0{"Q8_0", 32, 34, true}, kQ8_1{"Q8_1", 32, 36, false},
      kQ2_K{"Q2_K", 256, 84, false}, kQ3_K{"Q3_K", 256, 110, false},
      kQ4_K{"Q4_K", 256, 144, true}, kQ5_K{"Q5_K", 256, 176, true},
      kQ6_K{"Q6_K", 256, 210, true}, kQ8_K{"Q8_K", 256, 292, false}, kI8{"I8", 1, 1, false},
      kI16{"I16", 1, 2, false}, kI32{"I32", 1, 4, false}, kI64{"I64", 1, 8, false},
      kF64{"F64", 1, 8, false}, kBF16{"BF16", 1, 2, true},
      kA4G64{"A4G64", 64, 36, true, true};
  switch (id) {
    case 0: return &kF32;
    case 1: return &kF16;
    case 2: return &kQ4_0;
    case 3: return &kQ4_1;
    case 6: return &kQ5_0;
    case 7: return &kQ5_1;
    case 8: return &kQ8_0;
    case 9: return &kQ8_1;
    case 10: return &kQ2_K;
    case 11: return &kQ3_K;
    case 12: return &kQ4_K;
    case 13: return &kQ5_K;
    case 14: return &kQ6_K;
    case 15: return &kQ8_K;
    case 24: return &kI8;
    case 25: return &kI16;
    case 26: return &kI32;
    case 27: return &kI64;
    case 28: return &kF64;
    case 30: return &kBF16;
    case 1064: return &kA4G64;
    default: return nullptr;
  }
}

const char* dtype_name(DType t) {
  const DTypeInfo* i = dtype_info(static_cast<uint32_t>(t));
  return i ? i->name : "unknown";
}

}  // namespace tessera
