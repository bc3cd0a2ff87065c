// Dense weights (F32, F16, BF16) repacked at load for gemm(), the encoder GEMM: panels of
// kGemmPanelRows rows, k-major, in the weights' own type. Element (k, r) of panel p (rows
// [32p, 32p + 32)) sits at index p·32·K + 32·k + r; rows past the matrix are zero. The GEMM
// kernels otherwise build exactly this layout on every call (a transpose of each row block);
// stored once, it costs no more bytes than the rows it replaces (plus at most 31 zero rows),
// so the loader can drop the file's pages afterwards (TensorSource::release).
#pragma once
#include "kernels/kernels.h"

namespace tessera {

constexpr int kGemmPanelRows = 32;

constexpr bool supports_gemm_panels(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// The matrix for gemm() (its row view plus `gemm_panels`). Fails with a one-line error for other
// types or an empty matrix.
PackedWeights pack_gemm_panels(const WeightMatrix& w);

}  // namespace tessera
