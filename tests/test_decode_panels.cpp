// Decode panels (kernels/decode_panels.h): the same weights in 8-row groups for the AVX-512 and
// AVX2/NEON (V16) fp32-activation matmul. Rows rebuilt from the panels are the GGUF bytes; matmul over the
// panels gives the bits of matmul over the rows, for one token (the panel kernel) and several
// (prefill, which rebuilds rows), at 1 and 2 threads, whatever the ISA level; other types and
// shapes are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/huge_page_arena.h"
#include "kernel_cases.h"
#include "kernels/decode_panels.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "kernels/q8_panels.h"

namespace tessera {
namespace {

TEST(DecodePanels, SameBytesAndSameBits) {
  ThreadPool one(1), two(2);
  // columns: one block, a chunk of 16 blocks plus 2 (SmolLM2's 576), 3 whole chunks, 17 blocks
  // Q4_K, Q5_K, Q6_K: one super-block, a chunk of 2 plus 1, 3 whole chunks
  // A4G64: one 64-group, then as above with 20 blocks in place of 17
  using Shapes = std::vector<std::pair<int64_t, int64_t>>;
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::A4G64, DType::Q5_0, DType::Q5_1, DType::Q5_K, DType::Q6_K})
    for (auto [rows, cols] : t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K ? Shapes{{8, 256}, {64, 768}, {200, 1536}}
                             : t == DType::A4G64 ? Shapes{{8, 64}, {64, 576}, {200, 1536}, {48, 640}}
                                                 : Shapes{{8, 32}, {64, 576}, {200, 1536}, {48, 544}}) {
      const test::RandomMatrix M = test::make_matrix(t, rows, cols, static_cast<uint32_t>(rows + cols));
      size_t consumed = 0;  // reported as packing goes: growing prefixes of the GGUF bytes, all at the end
      const PackedWeights P = pack_decode_panels(M.w, [&](const uint8_t* p, size_t n) {
        EXPECT_EQ(p, M.w.data);
        EXPECT_GT(n, consumed);
        consumed = n;
      });
      ASSERT_NE(P.matrix.row_panels, nullptr);
      EXPECT_EQ(consumed, static_cast<size_t>(rows) * M.w.row_stride);
      std::vector<uint8_t> row(M.w.row_stride);
      for (int64_t r = 0; r < rows; ++r) {
        decode_panel_row(P.matrix, r, row.data());
        ASSERT_EQ(std::memcmp(row.data(), M.w.data + r * M.w.row_stride, row.size()), 0) << dtype_name(t) << " row " << r;
      }
      for (int64_t m : {1, 3, 17}) {
        const std::vector<float> x = test::random_x(m, cols, 5);
        std::vector<float> want(static_cast<size_t>(m * rows));
        matmul(M.w, x.data(), m, cols, want.data(), rows, one);
        for (ThreadPool* pool : {&one, &two}) {
          std::vector<float> got(want.size(), -1.0f);
          matmul(P.matrix, x.data(), m, cols, got.data(), rows, *pool);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0)
              << dtype_name(t) << " " << rows << "x" << cols << " m " << m << ", " << pool->size() << " threads, "
              << isa_name(active_isa());
        }
      }
      // every vector level this CPU has, over the panels, gives the scalar twin's bits; row ranges
      // that do not start on a group read the GGUF rows instead: the same bits
      const std::vector<float> x = test::random_x(1, cols, 6);
      std::vector<float> want(static_cast<size_t>(rows));
      ref::matmul_rows(M.w, 0, rows, x.data(), 1, cols, want.data(), rows);
      for (Isa level : {Isa::Neon, Isa::Avx2, Isa::Avx512}) {
        const auto rows_fn = kernel_table(level).matmul_rows;
        if (kernel_table(level).isa != level) continue;  // not on this CPU
        std::vector<float> got(want.size(), -1.0f);
        rows_fn(P.matrix, 0, rows, x.data(), 1, cols, got.data(), rows);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << isa_name(level) << " " << dtype_name(t);
        if (rows <= 8) continue;
        std::fill(got.begin(), got.end(), -1.0f);
        rows_fn(P.matrix, 0, 3, x.data(), 1, cols, got.data(), rows);
        rows_fn(P.matrix, 3, rows, x.data(), 1, cols, got.data(), rows);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << isa_name(level) << " split " << dtype_name(t);
      }
    }
  const test::RandomMatrix f16 = test::make_matrix(DType::F16, 8, 256, 1);
  EXPECT_THROW(pack_decode_panels(f16.w), Error);
  const test::RandomMatrix odd = test::make_matrix(DType::Q4_1, 12, 64, 2);
  EXPECT_THROW(pack_decode_panels(odd.w), Error);
}

// The huge-page arena a Session packs into (core/huge_page_arena.h): zeroed, 64-byte aligned,
// disjoint allocations, one past a chunk's size included; an overflowed size is a one-line error;
// panels packed into it are the same bytes as in their own allocation.
TEST(DecodePanels, ArenaHoldsTheSamePanels) {
  HugePageArena arena;
  std::vector<std::pair<uint8_t*, size_t>> got;
  for (size_t n : {size_t{1}, size_t{100}, size_t{5} << 20, size_t{70} << 20, size_t{64}, size_t{3} << 20}) {
    uint8_t* p = arena.allocate(n, "test");
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    EXPECT_TRUE(std::all_of(p, p + n, [](uint8_t b) { return b == 0; })) << n;
    std::memset(p, 0xab, n);
    for (auto [q, m] : got) EXPECT_TRUE(p + n <= q || q + m <= p) << "overlap at " << n;
    got.emplace_back(p, n);
  }
  EXPECT_GE(arena.mapped_bytes(), (size_t{70} << 20) + (size_t{64} << 20));
  EXPECT_THROW(arena.allocate(~size_t{0} - 8, "test"), Error);

  for (DType t : {DType::Q4_1, DType::Q4_K}) {
    const int64_t cols = t == DType::Q4_K ? 768 : 576;
    const test::RandomMatrix M = test::make_matrix(t, 64, cols, 7);
    const PackedWeights own = pack_decode_panels(M.w), in = pack_decode_panels(M.w, {}, &arena);
    ASSERT_EQ(own.bytes, in.bytes);
    EXPECT_EQ(std::memcmp(own.data.get(), in.data.get(), own.bytes), 0) << dtype_name(t);
    const PackedWeights own8 = pack_q8_panels(M.w), in8 = pack_q8_panels(M.w, {}, &arena);
    ASSERT_EQ(own8.bytes, in8.bytes);
    EXPECT_EQ(std::memcmp(own8.data.get(), in8.data.get(), own8.bytes), 0) << dtype_name(t);
  }
}

}  // namespace
}  // namespace tessera
