#include "kernels/gemm_panels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace tessera {

PackedWeights pack_gemm_panels(const WeightMatrix& w) {
  if (!supports_gemm_panels(w.type)) fail("gemm panels: %s weights are not repacked (F32, F16, BF16 only)", dtype_name(w.type));
  if (w.rows <= 0 || w.cols <= 0) fail("gemm panels: cannot repack an empty %lldx%lld matrix", static_cast<long long>(w.rows),
                                       static_cast<long long>(w.cols));
  const int64_t K = w.cols, n_panels = (w.rows + kGemmPanelRows - 1) / kGemmPanelRows;
  const size_t es = w.type == DType::F32 ? 4 : 2;
  PackedWeights out;
  out.bytes = (static_cast<size_t>(n_panels) * kGemmPanelRows * static_cast<size_t>(K) * es + 63) / 64 * 64;
  void* mem = std::aligned_alloc(64, out.bytes);
  if (!mem) fail("out of memory repacking a %lldx%lld matrix (%zu bytes)", static_cast<long long>(w.rows),
                 static_cast<long long>(w.cols), out.bytes);
  out.data = {static_cast<uint8_t*>(mem), std::free};
  std::memset(mem, 0, out.bytes);
  // 64 columns of a whole panel at a time: the rows are read in short runs, the panel written
  // in one 8 KiB (f32) stretch.
  constexpr int64_t kCols = 64;
  for (int64_t p = 0; p < n_panels; ++p) {
    uint8_t* panel = out.data.get() + static_cast<size_t>(p) * kGemmPanelRows * static_cast<size_t>(K) * es;
    const int rows = static_cast<int>(std::min<int64_t>(kGemmPanelRows, w.rows - p * kGemmPanelRows));
    for (int64_t k0 = 0; k0 < K; k0 += kCols) {
      const int64_t kn = std::min(kCols, K - k0);
      for (int r = 0; r < rows; ++r) {
        const uint8_t* src = w.data + (p * kGemmPanelRows + r) * w.row_stride + k0 * es;
        uint8_t* dst = panel + (k0 * kGemmPanelRows + r) * es;
        if (es == 4)
          for (int64_t k = 0; k < kn; ++k) std::memcpy(dst + k * kGemmPanelRows * 4, src + 4 * k, 4);
        else
          for (int64_t k = 0; k < kn; ++k) std::memcpy(dst + k * kGemmPanelRows * 2, src + 2 * k, 2);
      }
    }
  }
  out.matrix = w;
  out.matrix.gemm_panels = out.data.get();
  return out;
}

}  // namespace tessera
