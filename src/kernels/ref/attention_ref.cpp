// Scalar twin of the attention kernel (two-pass softmax in fp32).
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/kernels.h"

namespace tessera::ref {

namespace {
inline float kv_at(const void* base, DType t, int64_t i) {
  if (t == DType::F32) return static_cast<const float*>(base)[i];
  return fp16_to_float(static_cast<const uint16_t*>(base)[i]);
}
}  // namespace

void attention(const float* q, const void* k, const void* v, DType kv_type, int64_t n_kv,
               int64_t kv_stride, int head_dim, float scale, float* out, float* scratch) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < n_kv; ++j) {
    float s = 0;
    for (int d = 0; d < head_dim; ++d) s += q[d] * kv_at(k, kv_type, j * kv_stride + d);
    scratch[j] = s * scale;
    mx = std::fmax(mx, scratch[j]);
  }
  float sum = 0;
  for (int64_t j = 0; j < n_kv; ++j) {
    scratch[j] = std::exp(scratch[j] - mx);
    sum += scratch[j];
  }
  for (int d = 0; d < head_dim; ++d) out[d] = 0;
  for (int64_t j = 0; j < n_kv; ++j)
    for (int d = 0; d < head_dim; ++d) out[d] += scratch[j] * kv_at(v, kv_type, j * kv_stride + d);
  const float inv = 1.0f / sum;
  for (int d = 0; d < head_dim; ++d) out[d] *= inv;
}

}  // namespace tessera::ref
