// Fused attention driver: KV row formats, the work split (split-KV for decode, query blocks
// for prefill and vision) and the in-order merge of segment partials.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/elementwise.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "kernels/quantize.h"

namespace tessera {

bool kv_type_supported(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::I8 || t == DType::Q4_0;
}

size_t kv_row_bytes(DType t, int head_dim) {
  switch (t) {
    case DType::F32: return static_cast<size_t>(head_dim) * 4;
    case DType::F16:
    case DType::BF16: return static_cast<size_t>(head_dim) * 2;
    case DType::I8: return static_cast<size_t>((head_dim + 3) / 4 * 4 + 4);
    case DType::Q4_0:
      if (head_dim <= 0 || head_dim % 32 != 0)
        fail("KV cache type q4 needs a head dimension that is a multiple of 32 (got %d); use q8 or f16", head_dim);
      return static_cast<size_t>(head_dim / 32) * 18;
    default: fail("KV cache type %s is not supported (f32, f16, bf16, q8, q4)", dtype_name(t));
  }
}

namespace {

// One head's values, element d at dst + d * step elements: I8 (int8 values, one symmetric scale,
// returned) or F32/F16/BF16. Rows use step 1, tile slots step 16: the same values either way.
float store_values(DType t, const float* src, int head_dim, uint8_t* dst, size_t step) {
  if (t == DType::I8) {
    float amax = 0.0f;
    for (int d = 0; d < head_dim; ++d) amax = std::max(amax, std::fabs(src[d]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int d = 0; d < head_dim; ++d) dst[d * step] = static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(src[d] * inv)));
    return amax / 127.0f;
  }
  if (t == DType::F16) {  // the dispatched conversion (F16C, NEON): decode stores 2 rows per kv head and layer
    store_f16(src, head_dim, reinterpret_cast<uint16_t*>(dst), static_cast<int64_t>(step));
    return 1.0f;
  }
  const size_t e = kv_row_bytes(t, 1) * step;
  for (int d = 0; d < head_dim; ++d) {
    uint8_t* p = dst + e * d;
    if (t == DType::F32) { std::memcpy(p, &src[d], 4); continue; }
    const uint16_t h = t == DType::F16 ? float_to_fp16(src[d]) : float_to_bf16(src[d]);
    std::memcpy(p, &h, 2);
  }
  return 1.0f;
}

void load_values(DType t, const uint8_t* src, int head_dim, size_t step, float scale, float* dst) {
  if (t == DType::I8) {
    for (int d = 0; d < head_dim; ++d) dst[d] = scale * static_cast<float>(static_cast<int8_t>(src[d * step]));
    return;
  }
  const size_t e = kv_row_bytes(t, 1) * step;
  for (int d = 0; d < head_dim; ++d) {
    const uint8_t* p = src + e * d;
    uint16_t h;
    if (t == DType::F32) { std::memcpy(&dst[d], p, 4); continue; }
    std::memcpy(&h, p, 2);
    dst[d] = t == DType::F16 ? fp16_to_float(h) : bf16_to_float(h);
  }
}

size_t i8_scale_at(int head_dim) { return static_cast<size_t>((head_dim + 3) / 4 * 4); }  // in a row

// Q4_0 rows are ggml's blocks: per 32 elements an fp16 scale d, then 16 bytes, byte j holding
// element j (low nibble) and element j + 16 (high nibble); value = d * (q - 8).
float q4_value(const uint8_t* row, int d) {
  const uint8_t* b = row + 18 * (d / 32);
  uint16_t h;
  std::memcpy(&h, b, 2);
  const int j = d % 32, q = (b[2 + j % 16] >> (j < 16 ? 0 : 4)) & 15;
  return fp16_to_float(h) * static_cast<float>(q - 8);
}

// Q4_0 tiles: element d of slot s is a nibble of byte (d / 2) * 16 + s (d even: low, odd: high);
// then per 32-element block b the 16 slots' fp16 scales at head_dim * 8 + b * 32 + 2 * s.
size_t q4_tile_scales(int head_dim) { return static_cast<size_t>(head_dim) * 8; }

}  // namespace

void kv_store_row(DType t, const float* src, int head_dim, uint8_t* dst) {
  if (t == DType::Q4_0) {
    kv_row_bytes(t, head_dim);  // checks head_dim
    quantize_row(t, src, head_dim, dst);
    return;
  }
  const float scale = store_values(t, src, head_dim, dst, 1);
  if (t != DType::I8) return;
  std::memset(dst + head_dim, 0, i8_scale_at(head_dim) - static_cast<size_t>(head_dim));
  std::memcpy(dst + i8_scale_at(head_dim), &scale, 4);
}

void kv_load_row(DType t, const uint8_t* src, int head_dim, float* dst) {
  if (t == DType::Q4_0) {
    for (int d = 0; d < head_dim; ++d) dst[d] = q4_value(src, d);
    return;
  }
  float scale = 1.0f;
  if (t == DType::I8) std::memcpy(&scale, src + i8_scale_at(head_dim), 4);
  load_values(t, src, head_dim, 1, scale, dst);
}

size_t kv_tile_bytes(DType t, int head_dim) {
  if (t == DType::Q4_0) return kv_row_bytes(t, head_dim) * kKvTile;  // the same bytes as 16 rows
  if (t == DType::I8) return static_cast<size_t>(head_dim) * kKvTile + 4 * kKvTile;
  return static_cast<size_t>(head_dim) * kKvTile * kv_row_bytes(t, 1);
}

void kv_store_tile_slot(DType t, const float* src, int head_dim, uint8_t* tile, int slot) {
  if (t == DType::Q4_0) {  // the row's blocks, scattered
    uint8_t row[8 * 18];
    kv_store_row(t, src, head_dim, row);
    for (int b = 0; b < head_dim / 32; ++b) std::memcpy(tile + q4_tile_scales(head_dim) + 32 * b + 2 * slot, row + 18 * b, 2);
    for (int d = 0; d < head_dim; ++d) {
      const int j = d % 32, q = (row[18 * (d / 32) + 2 + j % 16] >> (j < 16 ? 0 : 4)) & 15;
      uint8_t& byte = tile[(d / 2) * kKvTile + slot];
      byte = static_cast<uint8_t>(d % 2 ? (byte & 0x0f) | (q << 4) : (byte & 0xf0) | q);
    }
    return;
  }
  const size_t e = t == DType::I8 ? 1 : kv_row_bytes(t, 1);
  const float scale = store_values(t, src, head_dim, tile + e * slot, kKvTile);
  if (t == DType::I8) std::memcpy(tile + static_cast<size_t>(head_dim) * kKvTile + 4 * slot, &scale, 4);
}

void kv_store_k_at(DType t, const float* src, int head_dim, uint8_t* head_tiles, size_t tile_stride, int64_t pos) {
  kv_store_tile_slot(t, src, head_dim, head_tiles + static_cast<size_t>(pos / kKvTile) * tile_stride, static_cast<int>(pos % kKvTile));
}

void kv_load_tile_slot(DType t, const uint8_t* tile, int head_dim, int slot, float* dst) {
  if (t == DType::Q4_0) {
    for (int d = 0; d < head_dim; ++d) {
      uint16_t h;
      std::memcpy(&h, tile + q4_tile_scales(head_dim) + 32 * (d / 32) + 2 * slot, 2);
      const int q = (tile[(d / 2) * kKvTile + slot] >> (d % 2 ? 4 : 0)) & 15;
      dst[d] = fp16_to_float(h) * static_cast<float>(q - 8);
    }
    return;
  }
  const size_t e = t == DType::I8 ? 1 : kv_row_bytes(t, 1);
  float scale = 1.0f;
  if (t == DType::I8) std::memcpy(&scale, tile + static_cast<size_t>(head_dim) * kKvTile + 4 * slot, 4);
  load_values(t, tile + e * slot, head_dim, kKvTile, scale, dst);
}

int kv_rotation_k(int head_dim) {
  if (head_dim <= 0 || head_dim % 64 != 0) return 0;
  int n = 64;
  while (head_dim % (2 * n) == 0) n *= 2;
  return n;
}

void hadamard_rotate(float* x, int n, int64_t len) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t b = 0; b + n <= len; b += n) {
    float* v = x + b;
    for (int h = 1; h < n; h *= 2)  // the butterflies of H_2n = [[H_n, H_n], [H_n, -H_n]]
      for (int i = 0; i < n; i += 2 * h)
        for (int j = i; j < i + h; ++j) {
          const float a = v[j], c = v[j + h];
          v[j] = a + c;
          v[j + h] = a - c;
        }
    for (int i = 0; i < n; ++i) v[i] = v[i] * norm;
  }
}

const char* attention_kernel_name() { return kernels().attention_name; }

void flash_attention(const AttentionShape& s, const float* q, int64_t n_q, int64_t q_stride, const KvView& kv,
                     float* out, int64_t out_stride, ThreadPool& pool) {
  const int hd = s.head_dim;
  if (hd <= 0 || hd > 256 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0)
    fail("attention: unsupported shape (head_dim %d, %d heads, %d kv heads)", hd, s.n_head, s.n_head_kv);
  if (!kv_type_supported(kv.type)) fail("attention: KV type %s is not supported", dtype_name(kv.type));
  if (kv.type == DType::Q4_0) kv_row_bytes(kv.type, hd);  // head_dim a multiple of 32
  if (n_q <= 0) return;
  const int group = s.n_head / s.n_head_kv;
  const int64_t visible = s.causal ? std::min(s.n_kv, s.q_pos0 + n_q) : s.n_kv;
  const int64_t n_seg = std::max<int64_t>(1, (visible + kAttnSegment - 1) / kAttnSegment);
  const int64_t rows_per_kv = n_q * group;
  // Rows per item: kAttnRows, or fewer (multiples of 16, the kernels' row groups) where that
  // would leave the threads under 4 items each: a short prompt's prefill (SmolLM2's 81 tokens: 3
  // items, one per kv head, on 2 threads) waited on its last item. A row's steps do not depend
  // on the other rows of its item, so the bits do not change.
  int64_t item_rows = kAttnRows;
  if (rows_per_kv > kFewRows) {
    const int64_t per_span = s.n_head_kv * n_seg, want = 4 * static_cast<int64_t>(pool.size());
    if (per_span * ((rows_per_kv + kAttnRows - 1) / kAttnRows) < want) {
      const int64_t split = (want + per_span - 1) / per_span;
      item_rows = std::clamp<int64_t>(((rows_per_kv + split - 1) / split + 15) / 16 * 16, 16, kAttnRows);
    }
  }
  const int64_t blocks = (rows_per_kv + item_rows - 1) / item_rows;
  // with few rows per kv head (decode), a row's part (m, l, O) on cache lines of its own:
  // neighbouring parts belong to other items, often run on the other thread, and a shared line
  // written per block of keys cost decode's attention its parallel speed-up (3 kv heads on 2
  // threads took as long as on one). Many rows (prefill, vision) keep them packed: there a part
  // is one of hundreds written by the same item, and the buffer holds every row's parts at once
  // (an 8160-patch Qwen3-VL image on the fp32 path: 551 MB; padded it would be 668).
  const int64_t part_len = rows_per_kv <= kFewRows ? (hd + 2 + 15) / 16 * 16 : hd + 2;

  thread_local std::vector<float> parts;  // grows to the largest call, then stays
  const size_t need = static_cast<size_t>(n_q * s.n_head * n_seg * part_len) + 16;
  if (parts.size() < need) parts.resize(need);
  float* P = parts.data() + (16 - reinterpret_cast<uintptr_t>(parts.data()) / 4 % 16) % 16;  // 64-byte aligned
  const auto block = kernels().attention_block;

  auto row_end = [&](int64_t i) { return s.causal ? std::min(s.n_kv, s.q_pos0 + i + 1) : s.n_kv; };
  // items: (kv head g, block of rows, segment); a row is (query i, head h) with h in g's group
  pool.parallel_for(s.n_head_kv * blocks * n_seg, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      // a kv head's items together (its K/V and rows stay in cache: cycling the heads was 10%
      // slower on 512 tokens after 512), causally its last rows' blocks (the most keys) first
      const int64_t seg = t % n_seg, bt = (t / n_seg) % blocks, g = t / (n_seg * blocks);
      const int64_t b = s.causal ? blocks - 1 - bt : bt;
      AttnRows rows;
      const int64_t j0 = seg * kAttnSegment, j1 = std::min(visible, j0 + kAttnSegment);
      int64_t end_max = j0;
      for (int64_t r = item_rows * b; r < std::min(rows_per_kv, item_rows * (b + 1)); ++r) {
        const int64_t i = r / group, h = g * group + r % group;
        rows.q[rows.n] = q + i * q_stride + h * hd;
        rows.end[rows.n] = row_end(i);
        rows.part[rows.n] = P + ((i * s.n_head + h) * n_seg + seg) * part_len;
        end_max = std::max(end_max, rows.end[rows.n]);
        ++rows.n;
      }
      if (end_max <= j0) {  // causal: these rows end before the segment (the merge skips m = -inf)
        for (int r = 0; r < rows.n; ++r) {
          rows.part[r][0] = -INFINITY;
          rows.part[r][1] = 0.0f;
        }
        continue;
      }
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
  const auto merge = kernels().attention_merge;
  pool.parallel_for(n_q * s.n_head, 16, [&](int64_t t0, int64_t t1) { merge(P, t0, t1, s.n_head, n_seg, part_len, hd, out, out_stride); });
}

}  // namespace tessera
