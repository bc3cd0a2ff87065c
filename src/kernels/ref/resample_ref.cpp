// Scalar twin of the resampling row combination (kernels/resample.h).
#include "kernels/resample.h"

namespace tessera::ref {

namespace {
inline uint8_t clip8(int32_t v, int precision) {
  if (v <= 0) return 0;
  v >>= precision;
  return v > 255 ? 255 : static_cast<uint8_t>(v);
}
}  // namespace

void combine_rows_u8_from(const uint8_t* const* rows, const int32_t* k, int n, int64_t len, int precision, uint8_t* out,
                          int64_t i) {
  const int32_t bias = 1 << (precision - 1);
  for (; i < len; ++i) {
    int32_t s = bias;
    for (int t = 0; t < n; ++t) s += rows[t][i] * k[t];
    out[i] = clip8(s, precision);
  }
}

void combine_rows_u8(const uint8_t* const* rows, const int32_t* k, int n, int64_t len, int precision, uint8_t* out) {
  combine_rows_u8_from(rows, k, n, len, precision, out, 0);
}

}  // namespace tessera::ref
