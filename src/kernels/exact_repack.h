// Weight types the engine can hold exactly in a type it has more kernels for: llama.cpp's Q3_K as
// Q6_K, IQ4_NL as Q8_0 (only the 8-bit-activation kernels take Q3_K and IQ4_NL as stored).
// Each weight is the same integers (super-block or block scale, sub-block scale, quant) in the
// wider type, so the values are the file's: Q3_K's x = d·(sc−32)·q
// with q in −4..3 and sc−32 in −32..31 is Q6_K's (d·sc')·(q' − 32) with sc' = sc − 32 and
// q' = q + 32; IQ4_NL's x = d·kvalues[nibble] is Q8_0's d·q with q = kvalues[nibble] (int8). Both
// are evaluated in the same order as ggml's dequantize_row_q3_K / _iq4_nl, so the floats are
// bitwise those (tests/fixtures/kquants). The price is memory: Q3_K takes 6.56 bits a weight as
// Q6_K instead of 3.44, IQ4_NL 8.5 as Q8_0 instead of 4.5 (only on fp32 activations, and in a
// vision tower: the text model keeps both as stored for the 8-bit kernels; docs/kernels.md).
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace tessera {

// The type a tensor of type `t` is held in: Q6_K for Q3_K, Q8_0 for IQ4_NL, else `t` itself.
DType exact_repack_type(DType t);
inline bool needs_exact_repack(DType t) { return exact_repack_type(t) != t; }
// Whether a tensor of type `t` can be loaded: kernels compute with it, or with its held type.
inline bool loadable_type(DType t) { return info(t).computable || needs_exact_repack(t); }

// Row `src` of n elements of type `from` (a type needs_exact_repack accepts; n whole blocks) into
// `dst`, row_bytes(exact_repack_type(from), n) bytes. Any bytes are valid input.
void exact_repack_row(DType from, const uint8_t* src, uint8_t* dst, int64_t n);

// The whole matrix w (a type needs_exact_repack accepts) in its held type, in memory of its own:
// for kernels that do not take w's type (IQ4_NL on fp32 activations: Session).
PackedWeights hold_exactly(const WeightMatrix& w);

}  // namespace tessera
