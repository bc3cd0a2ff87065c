// Fused attention driver: KV row formats, the work split (split-KV for decode, query blocks
// for prefill and vision) and the in-order merge of segment partials.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/exp_poly.h"
#include "kernels/kernels.h"

namespace tessera {

bool kv_type_supported(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::I8;
}

size_t kv_row_bytes(DType t, int head_dim) {
  switch (t) {
    case DType::F32: return static_cast<size_t>(head_dim) * 4;
    case DType::F16:
    case DType::BF16: return static_cast<size_t>(head_dim) * 2;
    case DType::I8: return static_cast<size_t>((head_dim + 3) / 4 * 4 + 4);
    default: fail("KV cache type %s is not supported (f32, f16, bf16, q8)", dtype_name(t));
  }
}

namespace {

// I8 rows: symmetric, one scale per row; value d goes to dst[d * step].
float quantize_i8(const float* src, int head_dim, uint8_t* dst, int step) {
  float amax = 0.0f;
  for (int d = 0; d < head_dim; ++d) amax = std::max(amax, std::fabs(src[d]));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int d = 0; d < head_dim; ++d) dst[d * step] = static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(src[d] * inv)));
  return amax / 127.0f;
}

// One element of type t (not I8) from float, at dst.
void store_elem(DType t, float x, uint8_t* dst) {
  switch (t) {
    case DType::F32: std::memcpy(dst, &x, 4); return;
    case DType::F16: { const uint16_t h = float_to_fp16(x); std::memcpy(dst, &h, 2); return; }
    default: { const uint16_t h = float_to_bf16(x); std::memcpy(dst, &h, 2); return; }  // BF16
  }
}

float load_elem(DType t, const uint8_t* src) {
  float x;
  uint16_t h;
  switch (t) {
    case DType::F32: std::memcpy(&x, src, 4); return x;
    case DType::F16: std::memcpy(&h, src, 2); return fp16_to_float(h);
    default: std::memcpy(&h, src, 2); return bf16_to_float(h);  // BF16
  }
}

}  // namespace

void kv_store_row(DType t, const float* src, int head_dim, uint8_t* dst) {
  if (t != DType::I8) {
    const size_t e = kv_row_bytes(t, 1);
    for (int d = 0; d < head_dim; ++d) store_elem(t, src[d], dst + e * d);
    return;
  }
  const float scale = quantize_i8(src, head_dim, dst, 1);
  std::memset(dst + head_dim, 0, static_cast<size_t>((head_dim + 3) / 4 * 4 - head_dim));
  std::memcpy(dst + (head_dim + 3) / 4 * 4, &scale, 4);
}

void kv_load_row(DType t, const uint8_t* src, int head_dim, float* dst) {
  if (t != DType::I8) {
    const size_t e = kv_row_bytes(t, 1);
    for (int d = 0; d < head_dim; ++d) dst[d] = load_elem(t, src + e * d);
    return;
  }
  float s;
  std::memcpy(&s, src + (head_dim + 3) / 4 * 4, 4);
  for (int d = 0; d < head_dim; ++d) dst[d] = s * static_cast<float>(static_cast<int8_t>(src[d]));
}

size_t kv_tile_bytes(DType t, int head_dim) {
  if (t == DType::I8) return static_cast<size_t>(head_dim) * kKvTile + 4 * kKvTile;
  return static_cast<size_t>(head_dim) * kKvTile * kv_row_bytes(t, 1);
}

void kv_store_tile_slot(DType t, const float* src, int head_dim, uint8_t* tile, int slot) {
  if (t != DType::I8) {
    const size_t e = kv_row_bytes(t, 1);
    for (int d = 0; d < head_dim; ++d) store_elem(t, src[d], tile + e * (static_cast<size_t>(d) * kKvTile + slot));
    return;
  }
  const float scale = quantize_i8(src, head_dim, tile + slot, kKvTile);
  std::memcpy(tile + static_cast<size_t>(head_dim) * kKvTile + 4 * slot, &scale, 4);
}

void kv_load_tile_slot(DType t, const uint8_t* tile, int head_dim, int slot, float* dst) {
  if (t != DType::I8) {
    const size_t e = kv_row_bytes(t, 1);
    for (int d = 0; d < head_dim; ++d) dst[d] = load_elem(t, tile + e * (static_cast<size_t>(d) * kKvTile + slot));
    return;
  }
  float s;
  std::memcpy(&s, tile + static_cast<size_t>(head_dim) * kKvTile + 4 * slot, 4);
  for (int d = 0; d < head_dim; ++d) dst[d] = s * static_cast<float>(static_cast<int8_t>(tile[d * kKvTile + slot]));
}

namespace {

using BlockFn = void (*)(const AttnRows&, int, float, const KvSpan&, int64_t, int64_t);

BlockFn pick_block() {
  switch (active_isa()) {
#if defined(TESSERA_HAVE_AVX512)
    case Isa::Avx512Vnni:
    case Isa::Avx512: return &avx512::attention_block;
    case Isa::Avx2: return &avx2::attention_block;
#endif
#if defined(__aarch64__)
    case Isa::Neon: return &neon::attention_block;
#endif
    default: return &ref::attention_block;
  }
}

}  // namespace

void flash_attention(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, const KvView& kv,
                     float* out, int64_t out_stride, ThreadPool& pool) {
  const int hd = s.head_dim;
  if (hd <= 0 || hd > 256 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0)
    fail("attention: unsupported shape (head_dim %d, %d heads, %d kv heads)", hd, s.n_head, s.n_head_kv);
  if (!kv_type_supported(kv.type)) fail("attention: KV type %s is not supported", dtype_name(kv.type));
  if (n_q <= 0) return;
  const int group = s.n_head / s.n_head_kv;
  const int64_t visible = s.causal ? std::min(s.n_kv, s.q_pos0 + n_q) : s.n_kv;
  const int64_t n_seg = std::max<int64_t>(1, (visible + kAttnSegment - 1) / kAttnSegment);
  const int64_t rows_per_kv = n_q * group, blocks = (rows_per_kv + kAttnRows - 1) / kAttnRows;
  const int64_t part_len = hd + 2;

  thread_local std::vector<float> parts;  // grows to the largest call, then stays
  const size_t need = static_cast<size_t>(n_q * s.n_head * n_seg * part_len);
  if (parts.size() < need) parts.resize(need);
  float* P = parts.data();
  const BlockFn block = pick_block();

  auto row_end = [&](int64_t i) { return s.causal ? std::min(s.n_kv, s.q_pos0 + i + 1) : s.n_kv; };
  // items: (kv head g, block of rows, segment); a row is (query i, head h) with h in g's group
  pool.parallel_for(s.n_head_kv * blocks * n_seg, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t seg = t % n_seg, b = (t / n_seg) % blocks, g = t / (n_seg * blocks);
      AttnRows rows;
      for (int64_t r = kAttnRows * b; r < std::min(rows_per_kv, kAttnRows * (b + 1)); ++r) {
        const int64_t i = r / group, h = g * group + r % group;
        rows.q[rows.n] = q + i * q_stride + h * hd;
        rows.end[rows.n] = row_end(i);
        rows.part[rows.n] = P + ((i * s.n_head + h) * n_seg + seg) * part_len;
        ++rows.n;
      }
      const int64_t j0 = seg * kAttnSegment, j1 = std::min(visible, j0 + kAttnSegment);
      KvSpan span;
      span.k = kv.k + g * (kv.k_tiles ? kv.k_head_stride : kv.head_stride);
      span.v = kv.v + g * kv.head_stride;
      span.type = kv.type;
      span.k_stride = kv.k_tiles ? kv.k_tile_stride : kv.pos_stride;
      span.v_stride = kv.pos_stride;
      span.k_tiles = kv.k_tiles;
      block(rows, hd, s.scale, span, j0, j1);
    }
  });
  // merge the segments of each row in order (log-sum-exp)
  pool.parallel_for(n_q * s.n_head, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / s.n_head, h = t % s.n_head;
      const float* pr = P + t * n_seg * part_len;
      float M = -INFINITY;
      for (int64_t sg = 0; sg < n_seg; ++sg) M = std::max(M, pr[sg * part_len]);
      float* o = out + i * out_stride + h * hd;
      std::fill(o, o + hd, 0.0f);
      if (M == -INFINITY) continue;  // no visible keys
      float L = 0.0f;
      for (int64_t sg = 0; sg < n_seg; ++sg) {
        const float* ps = pr + sg * part_len;
        if (ps[0] == -INFINITY) continue;
        const float e = exp_nonpos(ps[0] - M);
        L = L + ps[1] * e;
        for (int d = 0; d < hd; ++d) o[d] = o[d] + ps[2 + d] * e;
      }
      for (int d = 0; d < hd; ++d) o[d] = o[d] / L;
    }
  });
}

}  // namespace tessera
