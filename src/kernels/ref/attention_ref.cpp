// Scalar twin of the fused attention block kernel: the specification every ISA level matches
// bit for bit (see kernels/attention.h for the recipe).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/exp_poly.h"

namespace tessera::ref {

namespace {

// Element d of a K/V row, as the SIMD loaders produce it.
float kv_at(DType t, const uint8_t* row, int head_dim, int d) {
  switch (t) {
    case DType::F32: { float v; std::memcpy(&v, row + 4 * d, 4); return v; }
    case DType::F16: { uint16_t h; std::memcpy(&h, row + 2 * d, 2); return fp16_to_float(h); }
    case DType::BF16: { uint16_t h; std::memcpy(&h, row + 2 * d, 2); return bf16_to_float(h); }
    case DType::Q4_0: {  // ggml q4_0 blocks: fp16 d, nibbles (element j low, j + 16 high)
      const uint8_t* b = row + 18 * (d / 32);
      uint16_t h; std::memcpy(&h, b, 2);
      const int j = d % 32, q = (b[2 + j % 16] >> (j < 16 ? 0 : 4)) & 15;
      return fp16_to_float(h) * static_cast<float>(q - 8);
    }
    default: {  // I8
      float s; std::memcpy(&s, row + (head_dim + 3) / 4 * 4, 4);
      return s * static_cast<float>(static_cast<int8_t>(row[d]));
    }
  }
}

float reduce16(float a[16]) {
  for (int s = 8; s >= 1; s /= 2)
    for (int i = 0; i < s; ++i) a[i] = a[i] + a[i + s];
  return a[0];
}

// Element d of key j: a row, or slot j % 16 of a tile.
float k_at(const KvSpan& kv, int head_dim, int64_t j, int d) {
  if (!kv.k_tiles) return kv_at(kv.type, kv.k + j * kv.k_stride, head_dim, d);
  const uint8_t* tile = kv.k + j / kKvTile * kv.k_stride;
  const int slot = static_cast<int>(j % kKvTile);
  if (kv.type == DType::Q4_0) {  // nibble of byte (d / 2) * 16 + slot; fp16 scales per block and slot
    uint16_t h;
    std::memcpy(&h, tile + static_cast<size_t>(head_dim) * 8 + 32 * (d / 32) + 2 * slot, 2);
    const int q = (tile[(d / 2) * kKvTile + slot] >> (d % 2 ? 4 : 0)) & 15;
    return fp16_to_float(h) * static_cast<float>(q - 8);
  }
  if (kv.type != DType::I8) return kv_at(kv.type, tile, head_dim, d * kKvTile + slot);
  float s;
  std::memcpy(&s, tile + static_cast<size_t>(head_dim) * kKvTile + 4 * slot, 4);
  return s * static_cast<float>(static_cast<int8_t>(tile[d * kKvTile + slot]));
}

}  // namespace

void attention_block(const AttnRows& rows, int head_dim, float scale, const KvSpan& kv, int64_t j0, int64_t j1) {
  for (int r = 0; r < rows.n; ++r) {
    const float* q = rows.q[r];
    float* part = rows.part[r];
    float m = -INFINITY, l = 0.0f;
    float* o = part + 2;
    std::fill(o, o + head_dim, 0.0f);
    const int64_t end = std::min(j1, rows.end[r]);
    for (int64_t jb = j0; jb < end; jb += 16) {
      const int nv = static_cast<int>(std::min<int64_t>(16, end - jb));
      float s[16], p[16];
      for (int i = 0; i < 16; ++i) {
        if (i >= nv) { s[i] = -INFINITY; continue; }
        float acc = 0.0f;  // one FMA chain over the head dimension
        for (int d = 0; d < head_dim; ++d) acc = std::fma(q[d], k_at(kv, head_dim, jb + i, d), acc);
        s[i] = acc * scale;
      }
      float bm = s[0];
      for (int i = 1; i < 16; ++i) bm = std::max(bm, s[i]);
      const float m_new = std::max(m, bm);
      const float alpha = m == -INFINITY ? 0.0f : exp_nonpos(m - m_new);
      for (int i = 0; i < 16; ++i) p[i] = i < nv ? exp_nonpos(s[i] - m_new) : 0.0f;
      float psum[16];
      std::memcpy(psum, p, sizeof psum);
      l = l * alpha + reduce16(psum);
      for (int d = 0; d < head_dim; ++d) o[d] = o[d] * alpha;
      for (int i = 0; i < nv; ++i) {
        const uint8_t* vr = kv.v + (jb + i) * kv.v_stride;
        for (int d = 0; d < head_dim; ++d) o[d] = std::fma(p[i], kv_at(kv.type, vr, head_dim, d), o[d]);
      }
      m = m_new;
    }
    part[0] = m;
    part[1] = l;
  }
}

void attention_merge(const float* parts, int64_t t0, int64_t t1, int n_head, int64_t n_seg, int64_t part_len, int head_dim,
                     float* out, int64_t out_stride) {
  for (int64_t t = t0; t < t1; ++t) {
    const float* pr = parts + t * n_seg * part_len;
    float M = -INFINITY;
    for (int64_t sg = 0; sg < n_seg; ++sg) M = std::max(M, pr[sg * part_len]);
    float* o = out + t / n_head * out_stride + t % n_head * head_dim;
    std::fill(o, o + head_dim, 0.0f);
    if (M == -INFINITY) continue;  // no visible keys
    float L = 0.0f;
    for (int64_t sg = 0; sg < n_seg; ++sg) {
      const float* ps = pr + sg * part_len;
      if (ps[0] == -INFINITY) continue;
      const float e = exp_nonpos(ps[0] - M);
      L = L + ps[1] * e;
      for (int d = 0; d < head_dim; ++d) o[d] = o[d] + ps[2 + d] * e;
    }
    for (int d = 0; d < head_dim; ++d) o[d] = o[d] / L;
  }
}

}  // namespace tessera::ref
