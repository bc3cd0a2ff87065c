#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/cpu.h"
#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/kernels.h"
#include "kernels/resample.h"

namespace tessera {

namespace {

std::atomic<int> g_cap{-1};

Isa cap_from_env() {
  const char* e = std::getenv("TESSERA_ISA");
  if (!e || !*e) return Isa::Amx;
  return isa_from_name(e, "TESSERA_ISA");
}

// Decode (one token) streams each weight row once: one contiguous range per thread keeps each
// thread's prefetch stream unbroken. Larger batches keep 8-row ranges, balanced dynamically.
int64_t decode_grain(int64_t rows, int64_t m, const ThreadPool& pool) {
  if (m != 1 || pool.size() <= 1) return 8;
  return (rows + 8 * pool.size() - 1) / (8 * pool.size()) * 8;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Neon: return "neon";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Vnni: return "avx512vnni";
    case Isa::Amx: return "amx";
  }
  return "unknown";
}

Isa isa_from_name(const std::string& name, const char* what) {
  for (Isa i : {Isa::Scalar, Isa::Neon, Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni, Isa::Amx})
    if (name == isa_name(i)) return i;
  fail("%s='%s' is not one of: %s", what, name.c_str(), kIsaNames);
}

Isa detected_isa() {
#if defined(__x86_64__) && defined(TESSERA_HAVE_AVX512)
  static const Isa best = [] {
    const CpuFeatures& f = cpu_features();
    const bool avx2 = f.os_avx && f.avx2 && f.fma && f.f16c;
    if (avx2 && f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) {
      if (!f.avx512vnni) return Isa::Avx512;
      return f.avx512bf16 && f.amx_bf16 && amx_granted() ? Isa::Amx : Isa::Avx512Vnni;
    }
    return avx2 ? Isa::Avx2 : Isa::Scalar;
  }();
  return best;
#elif defined(__aarch64__)
  return Isa::Neon;  // every ARMv8-A core has Advanced SIMD
#else
  return Isa::Scalar;
#endif
}

void set_isa_cap(Isa cap) { g_cap.store(static_cast<int>(cap)); }

Isa active_isa() {
  int cap = g_cap.load();
  if (cap < 0) {
    cap = static_cast<int>(cap_from_env());
    g_cap.store(cap);
  }
  const Isa best = detected_isa();
  if (cap >= static_cast<int>(best)) return best;
  return cap == static_cast<int>(Isa::Neon) && best != Isa::Neon ? Isa::Scalar : static_cast<Isa>(cap);
}

// The kernel table entry for the active ISA level.
#if defined(TESSERA_HAVE_AVX512)
#define TESSERA_PICK(fn) \
  (active_isa() >= Isa::Avx512 ? &avx512::fn : active_isa() == Isa::Avx2 ? &avx2::fn : &ref::fn)
#elif defined(__aarch64__)
#define TESSERA_PICK(fn) (active_isa() == Isa::Neon ? &neon::fn : &ref::fn)
#else
#define TESSERA_PICK(fn) (&ref::fn)
#endif

void matmul(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys,
            ThreadPool& pool) {
  auto rows = TESSERA_PICK(matmul_rows);
  // Row ranges are multiples of 8 so the decode kernel runs full 8-row groups.
  pool.parallel_for(w.rows, decode_grain(w.rows, m, pool), [&](int64_t r0, int64_t r1) { rows(w, r0, r1, x, m, xs, y, ys); });
}

void gemm(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys, ThreadPool& pool) {
  auto rows = TESSERA_PICK(gemm_rows);
  parallel_row_groups(w.rows, pool, [&](int64_t r0, int64_t r1) { rows(w, r0, r1, x, m, xs, y, ys); });
}

void parallel_row_groups(int64_t n_rows, ThreadPool& pool, const std::function<void(int64_t, int64_t)>& fn) {
  // Each range streams every token past its rows, so fewer, larger ranges reread x less; two per
  // thread still let a thread slowed by a neighbour hand one over. Ranges differ by at most one
  // group, the larger first, so that the ones claimed last are the short ones (equal-size chunks
  // left 576-row matrices split 320/256 between two threads).
  const int64_t groups = (n_rows + 31) / 32;
  const int64_t ranges = pool.size() == 1 ? 1 : std::min<int64_t>(groups, 2 * pool.size());
  const auto start = [&](int64_t i) {
    return std::min(n_rows, 32 * (i * (groups / ranges) + std::min(i, groups % ranges)));
  };
  pool.parallel_for(ranges, 1, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) fn(start(i), start(i + 1));
  });
}

void softmax_row(float* x, int64_t n, float scale) { TESSERA_PICK(softmax_row)(x, n, scale); }
void gelu_tanh(float* x, int64_t n) { TESSERA_PICK(gelu_tanh)(x, n); }
void swiglu(float* g, const float* u, int64_t n) { TESSERA_PICK(swiglu)(g, u, n); }

void combine_rows_u8(const uint8_t* const* rows, const int32_t* k, int n, int64_t len, int precision, uint8_t* out) {
#if defined(TESSERA_HAVE_AVX512)
  if (active_isa() >= Isa::Avx512) return avx512::combine_rows_u8(rows, k, n, len, precision, out);
  if (active_isa() == Isa::Avx2) return avx2::combine_rows_u8(rows, k, n, len, precision, out);
#endif
  ref::combine_rows_u8(rows, k, n, len, precision, out);
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k) {
#if defined(TESSERA_HAVE_AVX512)
  if (active_isa() >= Isa::Avx512) return avx512::quantize_row_q8_1(x, y, k);
#endif
  ref::quantize_row_q8_1(x, y, k);
}

void quantize_rows_q8_1(const float* x, int64_t n, int64_t xs, BlockQ8_1* y, int64_t k, ThreadPool& pool) {
  const auto rows = [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) quantize_row_q8_1(x + i * xs, y + i * (k / 32), k);
  };
  if (n < 8) return rows(0, n);  // a decode row: not worth waking the pool
  pool.parallel_for(n, 4, rows);
}

void matmul_q8(const WeightMatrix& w, const BlockQ8_1* xq, int64_t m, int64_t xq_stride, float* y,
               int64_t ys, ThreadPool& pool) {
  if (!supports_q8_activations(w.type)) fail("8-bit activations are not supported for %s weights", dtype_name(w.type));
  if (!w.panels) fail("matmul_q8: the %s weights were not repacked (pack_q8_panels)", dtype_name(w.type));
  auto rows = TESSERA_PICK(matmul_q8_rows);
  // Whole 16-row panels per range; a decode gets one contiguous run of panels per thread.
  const int64_t grain = m == 1 ? std::max<int64_t>(16, (decode_grain(w.rows, m, pool) + 15) / 16 * 16) : 16;
  pool.parallel_for(w.rows, grain, [&](int64_t r0, int64_t r1) { rows(w, r0, r1, xq, m, xq_stride, y, ys); });
}

}  // namespace tessera
