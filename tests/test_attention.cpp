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
    kv_store_tile_slot(t, tmp.data(), hd, c.k_tiles.data() + (pos / 16 * n_head_kv + g) * c.tile, static_cast<int>(pos % 16));
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
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8}) {
    for (int hd : {64, 72, 80, 128, 8}) {
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
                const int g = h / group;
                const float* qi = &q[static_cast<size_t>((i * n_head + h) * hd)];
                std::vector<double> sc(static_cast<size_t>(end));
                double mx = -1e300, sum = 0, vmax = 0;
                for (int64_t j = 0; j < end; ++j) {
                  const std::vector<float> kj = c.at(c.k, j, g);
                  double d = 0;
                  for (int e = 0; e < hd; ++e) d += static_cast<double>(qi[e]) * kj[static_cast<size_t>(e)];
                  sc[static_cast<size_t>(j)] = d * s.scale;
                  mx = std::max(mx, sc[static_cast<size_t>(j)]);
                }
                for (auto& e : sc) sum += e = std::exp(e - mx);
                std::vector<double> want(static_cast<size_t>(hd), 0.0);
                for (int64_t j = 0; j < end; ++j) {
                  const std::vector<float> vj = c.at(c.v, j, g);
                  for (int e = 0; e < hd; ++e) {
                    want[static_cast<size_t>(e)] += sc[static_cast<size_t>(j)] / sum * vj[static_cast<size_t>(e)];
                    vmax = std::max(vmax, std::fabs(static_cast<double>(vj[static_cast<size_t>(e)])));
                  }
                }
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
  EXPECT_EQ(checked, 4 * 5 * 2 * 2 * 4 * 2);
}

// One query at a time (decode, split over the KV length) equals the same rows in one prefill
// call and in uneven chunks, with 1, 2 or 3 threads, bit for bit.
TEST(Attention, DecodePrefillChunkingAndThreadsGiveTheSameBits) {
  for (DType t : {DType::F16, DType::I8})
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
  EXPECT_FALSE(kv_type_supported(DType::Q4_0));
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
