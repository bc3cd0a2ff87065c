#include "core/dtype.h"

namespace tessera {

const DTypeInfo* dtype_info(uint32_t id) {
  static const DTypeInfo kF32{"F32", 1, 4, true}, kF16{"F16", 1, 2, true},
      kQ4_0{"Q4_0", 32, 18, true}, kQ4_1{"Q4_1", 32, 20, true}, kQ5_0{"Q5_0", 32, 22, true},
      kQ5_1{"Q5_1", 32, 24, true}, kQ8_0{"Q8_0", 32, 34, true}, kQ8_1{"Q8_1", 32, 36, false},
      kQ2_K{"Q2_K", 256, 84, true}, kQ3_K{"Q3_K", 256, 110, false},
      kQ4_K{"Q4_K", 256, 144, true}, kQ5_K{"Q5_K", 256, 176, true},
      kQ6_K{"Q6_K", 256, 210, true}, kQ8_K{"Q8_K", 256, 292, false}, kIQ4_NL{"IQ4_NL", 32, 18, true}, kI8{"I8", 1, 1, false},
      kI16{"I16", 1, 2, false}, kI32{"I32", 1, 4, false}, kI64{"I64", 1, 8, false},
      kF64{"F64", 1, 8, false}, kBF16{"BF16", 1, 2, true},
      kA4G64{"A4G64", 64, 36, true, true},
      // ggml's types without kernels here, named so that a file holding one is refused by name
      // (block sizes from ggml-common.h, so such a file still parses and its sizes are checked)
      kIQ2_XXS{"IQ2_XXS", 256, 66, false}, kIQ2_XS{"IQ2_XS", 256, 74, false}, kIQ3_XXS{"IQ3_XXS", 256, 98, false},
      kIQ1_S{"IQ1_S", 256, 50, false}, kIQ3_S{"IQ3_S", 256, 110, false}, kIQ2_S{"IQ2_S", 256, 82, false},
      kIQ4_XS{"IQ4_XS", 256, 136, true}, kIQ1_M{"IQ1_M", 256, 56, false}, kTQ1_0{"TQ1_0", 256, 54, false},
      kTQ2_0{"TQ2_0", 256, 66, false}, kMXFP4{"MXFP4", 32, 17, false};
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
    case 16: return &kIQ2_XXS;
    case 17: return &kIQ2_XS;
    case 18: return &kIQ3_XXS;
    case 19: return &kIQ1_S;
    case 20: return &kIQ4_NL;
    case 21: return &kIQ3_S;
    case 22: return &kIQ2_S;
    case 23: return &kIQ4_XS;
    case 24: return &kI8;
    case 25: return &kI16;
    case 26: return &kI32;
    case 27: return &kI64;
    case 28: return &kF64;
    case 29: return &kIQ1_M;
    case 30: return &kBF16;
    case 34: return &kTQ1_0;
    case 35: return &kTQ2_0;
    case 39: return &kMXFP4;
    case 1064: return &kA4G64;
    default: return nullptr;
  }
}

const char* dtype_name(DType t) {
  const DTypeInfo* i = dtype_info(static_cast<uint32_t>(t));
  return i ? i->name : "unknown";
}

}  // namespace tessera
