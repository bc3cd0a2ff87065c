// The vision encoder's GEMM on Apple's CPU matrix unit (SME, M4 and later): FMOPA outer products
// into the four 32-bit ZA tiles, a block of 2·SVL tokens × 2·SVL weight rows per pass over k.
// FMOPA's fp32 products are fused into the accumulator, one step per k in order, so each output is
// ref::gemm_rows' FMA chain and the results are bitwise the scalar twin's (kernel_check under
// qemu-aarch64 -cpu max). Built by clang-19 (GCC 12 has no SME intrinsics); weights and tokens are
// packed k-major in normal mode, then one streaming call per block. Float weight types only (the
// encoder's F32/F16/BF16, read from their gemm panels when present); the others take the NEON GEMM.
#include <arm_sme.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"

namespace tessera::neon {

namespace {

// y[t][r] for tokens [0, nt) × rows [0, nr) of the block (nt, nr <= 2·SVL), from xT[k][2·SVL] and
// wT[k][2·SVL] (zero-padded); tile 0: tokens 0..SVL-1 × rows 0..SVL-1, 1: × rows SVL.., 2 and 3 the
// second half of the tokens.
__arm_locally_streaming __arm_new("za") void sme_block(const float* xT, const float* wT, int64_t K, int nt, int nr,
                                                        float* y, int64_t ys) {
  const int n = static_cast<int>(svcntw());
  const svbool_t all = svptrue_b32();
  const svbool_t t0 = svwhilelt_b32(0, nt), t1 = svwhilelt_b32(n, nt);
  const svbool_t q0 = svwhilelt_b32(0, nr), q1 = svwhilelt_b32(n, nr);
  svzero_za();
  for (int64_t k = 0; k < K; ++k) {
    const float* xk = xT + k * 2 * n;
    const float* wk = wT + k * 2 * n;
    const svfloat32_t xa = svld1_f32(all, xk), xb = svld1_f32(all, xk + n);
    const svfloat32_t wa = svld1_f32(all, wk), wb = svld1_f32(all, wk + n);
    svmopa_za32_f32_m(0, t0, q0, xa, wa);
    svmopa_za32_f32_m(1, t0, q1, xa, wb);
    svmopa_za32_f32_m(2, t1, q0, xb, wa);
    svmopa_za32_f32_m(3, t1, q1, xb, wb);
  }
  for (int i = 0; i < n && i < nt; ++i) {  // horizontal slice i of a tile: token i's results
    svst1_hor_za32(0, i, q0, y + i * ys);
    svst1_hor_za32(1, i, q1, y + i * ys + n);
  }
  for (int i = 0; i < n && n + i < nt; ++i) {
    svst1_hor_za32(2, i, q0, y + (n + i) * ys);
    svst1_hor_za32(3, i, q1, y + (n + i) * ys + n);
  }
}

float half_to_float(uint16_t h) {
  __fp16 v;
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

// Row r's weight k, from the gemm panels (32 rows, k-major, in the weights' own type) or the rows.
struct RowReader {
  const WeightMatrix& w;
  std::vector<float> row;
  void into(int64_t r, float* dst, int64_t stride) {  // dst[k * stride] for k < K
    const int64_t K = w.cols;
    if (w.gemm_panels) {
      const int64_t base = (r / 32) * 32 * K + r % 32;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t at = base + 32 * k;
        if (w.type == DType::F32) {
          std::memcpy(dst + k * stride, w.gemm_panels + 4 * at, 4);
        } else {
          uint16_t h;
          std::memcpy(&h, w.gemm_panels + 2 * at, 2);
          uint32_t b = static_cast<uint32_t>(h) << 16;
          float bf;
          std::memcpy(&bf, &b, 4);
          dst[k * stride] = w.type == DType::F16 ? half_to_float(h) : bf;
        }
      }
      return;
    }
    row.resize(static_cast<size_t>(K));
    dequantize_row(w.type, w.data + r * w.row_stride, row.data(), K);
    for (int64_t k = 0; k < K; ++k) dst[k * stride] = row[static_cast<size_t>(k)];
  }
};

}  // namespace

uint64_t sme_vector_words() { return svcntsw(); }

void gemm_rows_sme(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t m, int64_t xs, float* y,
                   int64_t ys) {
  if (w.type != DType::F32 && w.type != DType::F16 && w.type != DType::BF16) return gemm_rows(w, r0, r1, x, m, xs, y, ys);
  const int64_t K = w.cols, n = static_cast<int64_t>(svcntsw()), B = 2 * n;
  const int64_t mB = (m + B - 1) / B * B;
  thread_local std::vector<float> wT, xT;
  wT.resize(static_cast<size_t>(K * B));
  xT.resize(static_cast<size_t>(K * mB));
  for (int64_t tb = 0; tb < mB; tb += B)  // every token block once: xT[block][k][B], zero-padded
    for (int i = 0; i < B; ++i)
      for (int64_t k = 0; k < K; ++k)
        xT[static_cast<size_t>(tb * K + k * B + i)] = tb + i < m ? x[(tb + i) * xs + k] : 0.0f;
  RowReader rows{w, {}};
  for (int64_t rb = r0; rb < r1; rb += B) {
    const int nr = static_cast<int>(std::min(B, r1 - rb));
    for (int j = 0; j < B; ++j) {
      if (j < nr) rows.into(rb + j, wT.data() + j, B);
      else for (int64_t k = 0; k < K; ++k) wT[static_cast<size_t>(k * B + j)] = 0.0f;
    }
    for (int64_t tb = 0; tb < m; tb += B)
      sme_block(xT.data() + tb * K, wT.data(), K, static_cast<int>(std::min(B, m - tb)), nr, y + tb * ys + rb, ys);
  }
}

}  // namespace tessera::neon

// The SME ABI's lazy-save support routine, which GCC 12's libgcc lacks (compiler-rt and GCC 14
// have it) and which a function with new ZA state calls on entry: nothing in this process arms a
// lazy ZA save, so TPIDR2_EL0 is zero here; a nonzero one traps rather than losing another
// owner's ZA contents. Weak, so a runtime that has the real routine wins; touches only x16.
asm(R"(
  .text
  .weak __arm_tpidr2_save
  .type __arm_tpidr2_save, %function
__arm_tpidr2_save:
  mrs x16, S3_3_C13_C0_5
  cbz x16, 1f
  brk #0xf000
1:
  ret
  .size __arm_tpidr2_save, .-__arm_tpidr2_save
)");
