// The one operation of Pillow-exact image resampling (image/resize.cpp): both passes combine
// whole rows of bytes, out[i] = clip8(2^(precision-1) + sum_t rows[t][i] * k[t]) >> precision,
// over len bytes (the vertical pass: source rows; the horizontal pass: source columns of the
// transposed image). Integer sums, so every order and vector width gives Pillow's bytes.
#pragma once
#include <cstdint>

namespace tessera {

// Picks the ISA's version (AVX-512, AVX2: 64 or 32 bytes at a time in int32 lanes; else scalar).
void combine_rows_u8(const uint8_t* const* rows, const int32_t* k, int n, int64_t len, int precision, uint8_t* out);

#define TESSERA_RESAMPLE_DECLS \
  void combine_rows_u8(const uint8_t* const* rows, const int32_t* k, int n, int64_t len, int precision, uint8_t* out);
namespace ref {
TESSERA_RESAMPLE_DECLS
// outputs from i on (the SIMD versions' tail)
void combine_rows_u8_from(const uint8_t* const* rows, const int32_t* k, int n, int64_t len, int precision, uint8_t* out,
                          int64_t i);
}  // namespace ref
namespace avx2 {
TESSERA_RESAMPLE_DECLS
}  // namespace avx2
namespace avx512 {
TESSERA_RESAMPLE_DECLS
}  // namespace avx512
#undef TESSERA_RESAMPLE_DECLS

}  // namespace tessera
