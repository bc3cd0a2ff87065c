// Fused attention: every KV type × head dim × mask × grouped-query layout against a float64
// reference computed on the values the cache holds; every ISA level and both K layouts (rows,
// tiles of 16 positions) bitwise equal to the scalar twin on rows; rows invariant to thread
// count, to decode vs prefill, and to how a prompt is chunked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"

using namespace tessera;

namespace {

// K twice, in rows and in tiles of 16 positions, holding the same values; V in rows.
struct Cache {
  int n_head_kv, head_dim;
  DType type;
  size_t row, tile;
  std::vector<uint8_t> k, k_tiles, v;
  KvView view(bool tiles) const {
    KvView w{k.data(), v.data(), type, static_cast<int64_t>(row * n_head_kv), static_cast<int64_t>(row)};
    if (tiles) {
      w.k = k_tiles.data();
      w.k_tiles = true;
      w.k_tile_stride = static_cast<int64_t>(tile * n_head_kv);
      w.k_head_stride = static_cast<int64_t>(tile);
    }
    return w;
  }
  std::vector<float> at(const std::vector<uint8_t>& b, int64_t pos, int g) const {
    std::vector<float> out(static_cast<size_t>(head_dim));
    kv_load_row(type, b.data() + (pos * n_head_kv + g) * row, head_dim, out.data());
    return out;
  }
};

Cache make_cache(DType t, int n_head_kv, int hd, int64_t n_pos, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Cache c{n_head_kv, hd, t, kv_row_bytes(t, hd), kv_tile_bytes(t, hd), {}, {}, {}};
  c.k.resize(c.row * n_head_kv * n_pos);
  c.k_tiles.resize(c.tile * n_head_kv * static_cast<size_t>((n_pos + 15) / 16));
  c.v.resize(c.k.size());
  std::vector<float> tmp(static_cast<size_t>(hd));
  for (int64_t p = 0; p < n_pos * n_head_kv; ++p) {
    for (auto& e : tmp) e = nd(rng);
    kv_store_row(t, tmp.data(), hd, c.k.data() + p * c.row);
    const int64_t pos = p / n_head_kv, g = p % n_head_kv;
    kv_store_k_at(t, tmp.data(), hd, c.k_tiles.data() + g * c.tile, n_head_kv * c.tile, pos);
    for (auto& e : tmp) e = nd(rng);
    kv_store_row(t, tmp.data(), hd, c.v.data() + p * c.row);
  }
  return c;
}

std::vector<float> random_q(int64_t n, int64_t width, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> q(static_cast<size_t>(n * width));
  for (auto& e : q) e = nd(rng);
  return q;
}

std::vector<float> run(const AttentionShape& s, const std::vector<float>& q, int64_t n_q, const Cache& c, int threads,
                       Isa isa, bool tiles = false) {
  ThreadPool pool(threads);
  const Isa before = active_isa();
  set_isa_cap(isa);
  const int64_t width = static_cast<int64_t>(s.n_head) * s.head_dim;
  std::vector<float> out(static_cast<size_t>(n_q * width));
  flash_attention(s, q.data(), n_q, width, c.view(tiles), out.data(), width, pool);
  set_isa_cap(before);
  return out;
}

// Row (query i, head h) over keys [0, end) in float64; *vmax: the largest |v| it weighs.
std::vector<double> exact_row(const AttentionShape& s, const std::vector<float>& q, const Cache& c, int64_t i, int h,
                              int64_t end, double* vmax) {
  const int hd = s.head_dim, g = h / (s.n_head / s.n_head_kv);
  const float* qi = &q[static_cast<size_t>((i * s.n_head + h) * hd)];
  std::vector<double> sc(static_cast<size_t>(end));
  double mx = -1e300, sum = 0;
  for (int64_t j = 0; j < end; ++j) {
    const std::vector<float> kj = c.at(c.k, j, g);
    double d = 0;
    for (int e = 0; e < hd; ++e) d += static_cast<double>(qi[e]) * kj[static_cast<size_t>(e)];
    sc[static_cast<size_t>(j)] = d * s.scale;
    mx = std::max(mx, sc[static_cast<size_t>(j)]);
  }
  for (auto& e : sc) sum += e = std::exp(e - mx);
  std::vector<double> want(static_cast<size_t>(hd), 0.0);
  *vmax = 0;
  for (int64_t j = 0; j < end; ++j) {
    const std::vector<float> vj = c.at(c.v, j, g);
    for (int e = 0; e < hd; ++e) {
      want[static_cast<size_t>(e)] += sc[static_cast<size_t>(j)] / sum * vj[static_cast<size_t>(e)];
      *vmax = std::max(*vmax, std::fabs(static_cast<double>(vj[static_cast<size_t>(e)])));
    }
  }
  return want;
}

// Each ISA level reaches its own block kernel (every level gives the same bits, so the bitwise
// tests alone cannot see a level that silently runs the scalar one).
TEST(Attention, EveryLevelUsesItsOwnKernel) {
  const Isa before = active_isa();
  for (int l = 0; l <= static_cast<int>(detected_isa()); ++l) {
    const Isa level = static_cast<Isa>(l);
    set_isa_cap(level);
    if (active_isa() != level) continue;  // a level this CPU lacks (Neon on x86)
    const std::string want = level >= Isa::Avx512 ? "avx512" : isa_name(level);
    EXPECT_EQ(attention_kernel_name(), want) << "at " << isa_name(level);
  }
  set_isa_cap(before);
}

std::vector<Isa> levels() {
  std::vector<Isa> l = {Isa::Scalar};
  const Isa best = detected_isa();
  if (best == Isa::Neon) l.push_back(Isa::Neon);
  if (best >= Isa::Avx2) l.push_back(Isa::Avx2);
  if (best >= Isa::Avx512) l.push_back(Isa::Avx512);
  return l;
}

}  // namespace

// Tolerance (docs/numerics.md): softmax weights and the weighted sum in fp32 with a polynomial
// exp (2 ulp): |out - exact| <= 2e-6 * (1 + max |v|) for these sizes, against float64 on the
// cached (already rounded) K/V values.
TEST(Attention, MatchesFloat64AndEveryIsaBitwise) {
  int checked = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::Q4_0}) {
    // Q4_0 needs head_dim a multiple of 32 (its blocks): 32 and 96 stand in for the odd sizes
    const std::vector<int> dims = t == DType::Q4_0 ? std::vector<int>{64, 32, 96, 128} : std::vector<int>{64, 72, 80, 128, 8};
    for (int hd : dims) {
      for (int group : {1, 3}) {
        for (bool causal : {false, true}) {
          for (int64_t n_kv : {1, 17, 300, 1100})
          for (bool many : {false, true}) {  // few rows (one partial 16-row group), many (several groups)
            const int n_head_kv = 2, n_head = n_head_kv * group;
            const int64_t n_q = std::min<int64_t>(n_kv, many ? 37 : causal ? 5 : 3);
            AttentionShape s;
            s.n_head = n_head;
            s.n_head_kv = n_head_kv;
            s.head_dim = hd;
            s.scale = 1.0f / std::sqrt(static_cast<float>(hd));
            s.causal = causal;
            s.q_pos0 = causal ? n_kv - n_q : 0;
            s.n_kv = n_kv;
            const Cache c = make_cache(t, n_head_kv, hd, n_kv, static_cast<uint32_t>(hd * 7 + n_kv));
            const std::vector<float> q = random_q(n_q, static_cast<int64_t>(n_head) * hd, static_cast<uint32_t>(n_kv + hd));
            const std::vector<float> base = run(s, q, n_q, c, 2, Isa::Scalar);
            for (Isa isa : levels())
              for (bool tiles : {false, true}) {  // few rows on tiles take the keys-in-lanes path
                const std::vector<float> o = run(s, q, n_q, c, 2, isa, tiles);
                ASSERT_EQ(std::memcmp(o.data(), base.data(), o.size() * 4), 0)
                    << isa_name(isa) << (tiles ? " (K tiles)" : "") << " differs from scalar on K rows: " << dtype_name(t)
                    << " hd=" << hd << " n_kv=" << n_kv << " rows " << n_q * group;
              }
            for (int64_t i = 0; i < n_q; i += many ? 9 : 1) {  // float64 on every 9th of many rows
              const int64_t end = causal ? s.q_pos0 + i + 1 : n_kv;
              for (int h = 0; h < n_head; ++h) {
                double vmax = 0;
                const std::vector<double> want = exact_row(s, q, c, i, h, end, &vmax);
                for (int e = 0; e < hd; ++e)
                  ASSERT_NEAR(base[static_cast<size_t>((i * n_head + h) * hd + e)], want[static_cast<size_t>(e)], 2e-6 * (1 + vmax))
                      << dtype_name(t) << " hd=" << hd << " group=" << group << " causal=" << causal << " n_kv=" << n_kv
                      << " i=" << i << " h=" << h << " d=" << e;
              }
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, (4 * 5 + 4) * 2 * 2 * 4 * 2);
}

// Gemma 3's head_dim 256 (4 query heads on 1 kv head): the SIMD kernels take it too (16 chunks
// of 16; it fell to the scalar twin before), bitwise with the twin on every ISA level, K rows and
// K tiles (decode's keys-in-lanes path with 4 rows), past a segment; and within the float64 bound.
TEST(Attention, HeadDim256MatchesFloat64AndEveryIsaBitwise) {
  int checked = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::Q4_0})
    for (bool causal : {false, true})
      for (int64_t n_kv : {1, 17, 300, 700})
        for (bool many : {false, true}) {
          constexpr int hd = 256, n_head_kv = 1, n_head = 4;
          const int64_t n_q = std::min<int64_t>(n_kv, many ? 21 : 1);
          AttentionShape s;
          s.n_head = n_head, s.n_head_kv = n_head_kv, s.head_dim = hd, s.scale = 0.0625f, s.causal = causal;
          s.q_pos0 = causal ? n_kv - n_q : 0;
          s.n_kv = n_kv;
          const Cache c = make_cache(t, n_head_kv, hd, n_kv, static_cast<uint32_t>(31 + n_kv));
          const std::vector<float> q = random_q(n_q, static_cast<int64_t>(n_head) * hd, static_cast<uint32_t>(n_kv + 5));
          const std::vector<float> base = run(s, q, n_q, c, 2, Isa::Scalar);
          for (Isa isa : levels())
            for (bool tiles : {false, true}) {
              const std::vector<float> o = run(s, q, n_q, c, 2, isa, tiles);
              ASSERT_EQ(std::memcmp(o.data(), base.data(), o.size() * 4), 0)
                  << isa_name(isa) << (tiles ? " (K tiles)" : "") << " differs from scalar: " << dtype_name(t) << " n_kv=" << n_kv
                  << " rows " << n_q * n_head;
            }
          for (int64_t i = 0; i < n_q; i += 5)
            for (int h = 0; h < n_head; ++h) {
              double vmax = 0;
              const std::vector<double> want = exact_row(s, q, c, i, h, causal ? s.q_pos0 + i + 1 : n_kv, &vmax);
              for (int e = 0; e < hd; ++e)
                ASSERT_NEAR(base[static_cast<size_t>((i * n_head + h) * hd + e)], want[static_cast<size_t>(e)], 2e-6 * (1 + vmax))
                    << dtype_name(t) << " causal=" << causal << " n_kv=" << n_kv << " i=" << i << " h=" << h << " d=" << e;
            }
          ++checked;
        }
  EXPECT_EQ(checked, 5 * 2 * 4 * 2);
}

// One query at a time (decode, split over the KV length) equals the same rows in one prefill
// call and in uneven chunks, with 1, 2 or 3 threads, bit for bit.
TEST(Attention, DecodePrefillChunkingAndThreadsGiveTheSameBits) {
  for (DType t : {DType::F16, DType::I8, DType::Q4_0})
  for (bool tiles : {false, true}) {
    const int n_head_kv = 3, n_head = 9, hd = 64;
    const int64_t n = 1200;  // three segments
    const Cache c = make_cache(t, n_head_kv, hd, n, 5);
    const int64_t width = static_cast<int64_t>(n_head) * hd;
    const std::vector<float> q = random_q(n, width, 6);
    AttentionShape s;
    s.n_head = n_head;
    s.n_head_kv = n_head_kv;
    s.head_dim = hd;
    s.scale = 0.125f;
    s.causal = true;
    s.q_pos0 = 0;
    s.n_kv = n;
    const std::vector<float> all = run(s, q, n, c, 2, active_isa(), tiles);
    ASSERT_EQ(run(s, q, n, c, 1, active_isa(), tiles), all);
    ASSERT_EQ(run(s, q, n, c, 3, active_isa(), tiles), all);
    ThreadPool pool(2);
    std::vector<float> out(static_cast<size_t>(width));
    for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{511}, int64_t{512}, int64_t{700}, n - 1}) {  // decode
      AttentionShape d = s;
      d.q_pos0 = i;
      d.n_kv = i + 1;
      flash_attention(d, q.data() + i * width, 1, width, c.view(tiles), out.data(), width, pool);
      ASSERT_EQ(std::memcmp(out.data(), all.data() + i * width, width * 4), 0) << "decode row " << i << " tiles " << tiles;
    }
    std::vector<float> chunked(all.size());
    for (int64_t i0 = 0; i0 < n;) {  // prefill in uneven chunks, the cache filled up to the chunk
      const int64_t len = std::min<int64_t>(n - i0, 1 + (i0 * 7) % 300);
      AttentionShape p = s;
      p.q_pos0 = i0;
      p.n_kv = i0 + len;
      flash_attention(p, q.data() + i0 * width, len, width, c.view(tiles), chunked.data() + i0 * width, width, pool);
      i0 += len;
    }
    ASSERT_EQ(chunked, all) << dtype_name(t) << (tiles ? " K tiles" : " K rows");
  }
}

TEST(Attention, KvRowFormats) {
  EXPECT_EQ(kv_row_bytes(DType::F32, 64), 256u);
  EXPECT_EQ(kv_row_bytes(DType::BF16, 72), 144u);
  EXPECT_EQ(kv_row_bytes(DType::I8, 72), 76u);
  EXPECT_EQ(kv_row_bytes(DType::I8, 70), 76u);  // padded to 4 bytes, then the fp32 scale
  std::vector<float> x(70), y(70);
  for (int i = 0; i < 70; ++i) x[static_cast<size_t>(i)] = std::sin(0.3f * i) * 4.0f;
  std::vector<uint8_t> row(kv_row_bytes(DType::I8, 70));
  kv_store_row(DType::I8, x.data(), 70, row.data());
  kv_load_row(DType::I8, row.data(), 70, y.data());
  for (int i = 0; i < 70; ++i) EXPECT_NEAR(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)], 4.0 / 127 / 2 + 1e-6);
  EXPECT_FALSE(kv_type_supported(DType::Q4_1));
  // a tile slot holds the row's values: the same rounding, the same I8 scale
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8}) {
    std::vector<uint8_t> tile(kv_tile_bytes(t, 70), 0xAB), r(kv_row_bytes(t, 70));
    kv_store_row(t, x.data(), 70, r.data());
    kv_load_row(t, r.data(), 70, y.data());
    kv_store_tile_slot(t, x.data(), 70, tile.data(), 5);
    std::vector<float> z(70);
    kv_load_tile_slot(t, tile.data(), 70, 5, z.data());
    EXPECT_EQ(z, y) << dtype_name(t);
  }
  EXPECT_EQ(kv_tile_bytes(DType::I8, 70), 70u * 16 + 64);
  EXPECT_EQ(kv_tile_bytes(DType::F16, 64), 64u * 16 * 2);
}

namespace {

// llama.cpp's quantize_row_q4_0_ref (ggml-quants.c), written out again here from its source, with
// its fp16 conversion (round to nearest even): the bytes tessera's q4 KV rows must equal.
std::vector<uint8_t> ggml_q4_0(const float* x, int n) {
  std::vector<uint8_t> out(static_cast<size_t>(n / 32 * 18));
  for (int i = 0; i < n / 32; ++i) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float v = x[i * 32 + j];
      if (amax < std::fabs(v)) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const float d = max / -8, id = d ? 1.0f / d : 0.0f;
    const _Float16 h = static_cast<_Float16>(d);
    std::memcpy(&out[static_cast<size_t>(i * 18)], &h, 2);
    for (int j = 0; j < 16; ++j) {
      const float x0 = x[i * 32 + j] * id, x1 = x[i * 32 + 16 + j] * id;
      const uint8_t xi0 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x0 + 8.5f)));
      const uint8_t xi1 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x1 + 8.5f)));
      out[static_cast<size_t>(i * 18 + 2 + j)] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
  return out;
}

}  // namespace

// The 4-bit cache ("q4"): rows are llama.cpp's q4_0 blocks byte for byte; a tile slot holds the
// same values; round trip within |d| / 2 of each value (|d| = amax / 8 of its 32-element block),
// |d| at the clamped top level, plus the fp16 rounding of d; head_dim must be a multiple of 32.
TEST(Attention, Q4KvRowsAreLlamaCppQ4_0) {
  EXPECT_TRUE(kv_type_supported(DType::Q4_0));
  EXPECT_EQ(kv_row_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(kv_row_bytes(DType::Q4_0, 128), 72u);
  EXPECT_EQ(kv_tile_bytes(DType::Q4_0, 128), 72u * 16);  // a tile is the bytes of 16 rows
  EXPECT_THROW(kv_row_bytes(DType::Q4_0, 72), Error);
  EXPECT_THROW(kv_row_bytes(DType::Q4_0, 16), Error);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int hd : {32, 64, 128, 256}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> x(static_cast<size_t>(hd)), y(x.size()), z(x.size());
      for (auto& e : x) e = nd(rng) * (trial % 5 == 0 ? 1e-3f : trial % 7 == 0 ? 300.0f : 2.0f);
      if (trial == 1) std::fill(x.begin(), x.begin() + 32, 0.0f);  // an all-zero block
      if (trial == 2) x[5] = -x[5] * 100;                            // one large negative extreme
      std::vector<uint8_t> row(kv_row_bytes(DType::Q4_0, hd));
      kv_store_row(DType::Q4_0, x.data(), hd, row.data());
      ASSERT_EQ(row, ggml_q4_0(x.data(), hd)) << "hd " << hd << " trial " << trial;
      kv_load_row(DType::Q4_0, row.data(), hd, y.data());
      for (int b = 0; b < hd / 32; ++b) {
        double mx = 0;  // the larger-magnitude extreme: d = mx / -8
        for (int j = 0; j < 32; ++j)
          if (std::fabs(x[static_cast<size_t>(b * 32 + j)]) > std::fabs(mx)) mx = x[static_cast<size_t>(b * 32 + j)];
        const double d = mx / -8, step = std::fabs(d), fp16 = std::fabs(mx) * std::ldexp(1.0, -11);  // d's fp16 rounding
        for (int j = 0; j < 32; ++j) {
          const size_t i = static_cast<size_t>(b * 32 + j);
          const bool top = d != 0 && x[i] / d > 7.5;  // clamped to q = 15: value 7d
          const double bound = (top ? step : step / 2) * (1 + 1e-6) + fp16;
          ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound) << "hd " << hd << " element " << i;
        }
      }
      std::vector<uint8_t> tile(kv_tile_bytes(DType::Q4_0, hd), 0xAB);
      for (int slot : {0, 5, 15}) {
        kv_store_tile_slot(DType::Q4_0, x.data(), hd, tile.data(), slot);
        kv_load_tile_slot(DType::Q4_0, tile.data(), hd, slot, z.data());
        ASSERT_EQ(std::memcmp(z.data(), y.data(), z.size() * 4), 0) << "hd " << hd << " slot " << slot;
      }
    }
  }
  // attention over a q4 cache refuses a head_dim that is not whole blocks
  const Cache c = make_cache(DType::F16, 1, 72, 4, 1);
  Cache bad = c;
  bad.type = DType::Q4_0;
  AttentionShape s;
  s.n_head = s.n_head_kv = 1;
  s.head_dim = 72;
  s.n_kv = 4;
  s.q_pos0 = 3;
  const std::vector<float> q = random_q(1, 72, 2);
  std::vector<float> out(72);
  ThreadPool pool(1);
  EXPECT_THROW(flash_attention(s, q.data(), 1, 72, bad.view(false), out.data(), 72, pool), Error);
}

// llama.cpp's rotation for quantized caches: the orthonormal Sylvester Walsh-Hadamard matrix
// (ggml_gen_hadamard in llama-kv-cache.cpp, built here the same way), applied per block; H·H = I.
TEST(Attention, HadamardRotationIsLlamaCppsMatrix) {
  EXPECT_EQ(kv_rotation_k(64), 64);
  EXPECT_EQ(kv_rotation_k(128), 128);
  EXPECT_EQ(kv_rotation_k(192), 64);
  EXPECT_EQ(kv_rotation_k(256), 256);
  EXPECT_EQ(kv_rotation_k(96), 0);  // llama.cpp: head_dim % 64 != 0, no rotation
  EXPECT_EQ(kv_rotation_k(72), 0);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int n : {64, 128}) {
    std::vector<double> H(static_cast<size_t>(n * n));
    H[0] = 1.0 / std::sqrt(static_cast<double>(n));
    for (int s = 1; s < n; s *= 2)
      for (int i = 0; i < s; ++i)
        for (int j = 0; j < s; ++j) {
          const double v = H[static_cast<size_t>(i * n + j)];
          H[static_cast<size_t>((i + s) * n + j)] = v;
          H[static_cast<size_t>(i * n + j + s)] = v;
          H[static_cast<size_t>((i + s) * n + j + s)] = -v;
        }
    std::vector<float> x(static_cast<size_t>(3 * n));  // three blocks
    for (auto& e : x) e = nd(rng);
    std::vector<float> y = x;
    hadamard_rotate(y.data(), n, static_cast<int64_t>(y.size()));
    for (int b = 0; b < 3; ++b)
      for (int i = 0; i < n; ++i) {
        double want = 0;
        for (int j = 0; j < n; ++j) want += H[static_cast<size_t>(i * n + j)] * x[static_cast<size_t>(b * n + j)];
        ASSERT_NEAR(y[static_cast<size_t>(b * n + i)], want, 1e-5) << "n " << n << " block " << b << " row " << i;
      }
    hadamard_rotate(y.data(), n, static_cast<int64_t>(y.size()));  // back: H^2 = I
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], x[i], 1e-5);
  }
}

// A prefill from position 0 longer than a segment: the first rows end before the second
// segment, so their items there have no keys (the driver writes them off without a kernel call).
TEST(Attention, CausalPrefillPastASegmentMatchesFloat64) {
  AttentionShape s;
  s.n_head_kv = 1;
  s.n_head = 3;
  s.head_dim = 64;
  s.scale = 0.125f;
  s.causal = true;
  s.q_pos0 = 0;
  s.n_kv = kAttnSegment + 150;
  const int64_t n_q = s.n_kv;
  const Cache c = make_cache(DType::F16, s.n_head_kv, s.head_dim, s.n_kv, 11);
  const std::vector<float> q = random_q(n_q, static_cast<int64_t>(s.n_head) * s.head_dim, 12);
  const std::vector<float> base = run(s, q, n_q, c, 2, Isa::Scalar, true);
  for (Isa isa : levels()) {
    const std::vector<float> o = run(s, q, n_q, c, 2, isa, true);
    ASSERT_EQ(std::memcmp(o.data(), base.data(), o.size() * 4), 0) << isa_name(isa);
  }
  for (int64_t i : {int64_t{0}, int64_t{5}, int64_t{300}, kAttnSegment - 1, kAttnSegment, n_q - 1})
    for (int h = 0; h < s.n_head; ++h) {
      double vmax = 0;
      const std::vector<double> want = exact_row(s, q, c, i, h, i + 1, &vmax);
      for (int e = 0; e < s.head_dim; ++e)
        ASSERT_NEAR(base[static_cast<size_t>((i * s.n_head + h) * s.head_dim + e)], want[static_cast<size_t>(e)], 2e-6 * (1 + vmax))
            << "i=" << i << " h=" << h << " d=" << e;
    }
}
