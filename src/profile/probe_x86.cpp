// Peak-compute loops for the probe; compiled with AVX-512/VNNI/AMX flags, called only when
// the CPU (and, for AMX, the OS) supports them.
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/x86/amx_tile_config.h"

namespace tessera::probe_x86 {

// 16 independent FMA chains; returns FLOPs done.
double fma_loop(int64_t iters) {
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(1.0f + i * 1e-7f);
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  __m512 s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, a[i]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return static_cast<double>(iters) * 16 * 16 * 2;
}

// 16 independent vpdpbusd chains; returns int8 ops (multiply + add) done.
double vnni_loop(int64_t iters) {
  __m512i a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_epi32(i);
  const __m512i b = _mm512_set1_epi8(3), c = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) a[i] = _mm512_dpbusd_epi32(a[i], b, c);
  __m512i s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_epi32(s, a[i]);
  volatile int sink = _mm512_reduce_add_epi32(s);
  (void)sink;
  return static_cast<double>(iters) * 16 * 64 * 2;
}

// 16 independent vdpbf16ps chains (AVX512_BF16: 16 fp32 lanes, each += two bf16 products);
// returns FLOPs done. On this repository's Sapphire Rapids-class VM it runs at about half the
// fp32 FMA rate, which is why bf16 weights are widened to fp32 for the GEMM rather than dotted.
double bf16_dot_loop(int64_t iters) {
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(1.0f + i * 1e-7f);
  const __m512bh b = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3f803f80));  // (1, 1)
  const __m512bh c = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x33d633d6));  // (1e-7, 1e-7)
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) a[i] = _mm512_dpbf16_ps(a[i], b, c);
  __m512 s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, a[i]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return static_cast<double>(iters) * 16 * 32 * 2;
}

// 16 independent vfmadd231ph chains (AVX512-FP16: 32 fp16 lanes); returns FLOPs done. Twice the
// fp32 FMA rate where the FMA units take both (Sapphire Rapids): the fp16 GEMM's roof.
double fp16_fma_loop(int64_t iters) {
  __m512h a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ph(static_cast<_Float16>(1.0f + i * 1e-3f));
  const __m512h b = _mm512_set1_ph(static_cast<_Float16>(0.999f)), c = _mm512_set1_ph(static_cast<_Float16>(1e-3f));
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ph(a[i], b, c);
  __m512h s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ph(s, a[i]);
  volatile float sink = static_cast<float>(_mm512_reduce_add_ph(s));
  (void)sink;
  return static_cast<double>(iters) * 16 * 32 * 2;
}

// 4 accumulator tiles, A/B tiles reused; returns FLOPs (bf16) or ops (int8) done.
template <bool Bf16>
double amx_loop(int64_t iters) {
  alignas(64) static uint8_t buf[1024] = {};
  _tile_loadconfig(&kFullTiles);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  _tile_loadd(4, buf, 64); _tile_loadd(5, buf, 64); _tile_loadd(6, buf, 64); _tile_loadd(7, buf, 64);
  for (int64_t it = 0; it < iters; ++it) {
    if constexpr (Bf16) {
      _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    } else {
      _tile_dpbusd(0, 4, 6); _tile_dpbusd(1, 4, 7); _tile_dpbusd(2, 5, 6); _tile_dpbusd(3, 5, 7);
    }
  }
  alignas(64) static int32_t out[256];
  _tile_stored(0, out, 64);
  _tile_release();
  return static_cast<double>(iters) * 4 * 16 * 16 * (Bf16 ? 32 : 64) * 2;  // K per tile op: 32 bf16 pairs / 64 int8
}

double amx_bf16_loop(int64_t iters) { return amx_loop<true>(iters); }

// The ceiling a GEMM can reach: each step loads its tiles as a 2×2-blocked kernel does (two A
// tiles of activations from an L1-resident 16 KiB ring, two B tiles of weights from a 512 KiB
// L2-resident ring) and runs 4 TDPBF16PS. On the 2-vCPU Xeon VM this is several times below the
// register-only loop above, so targets for AMX kernels are stated against this one.
double amx_bf16_loads_loop(int64_t iters) {
  constexpr size_t kA = 16 << 10, kB = 512 << 10;
  static uint8_t* a = static_cast<uint8_t*>(std::aligned_alloc(64, kA));
  static uint8_t* b = static_cast<uint8_t*>(std::aligned_alloc(64, kB));
  static const bool filled = [] {
    std::memset(a, 0x3f, kA);
    std::memset(b, 0x3f, kB);
    return true;
  }();
  (void)filled;
  _tile_loadconfig(&kFullTiles);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  size_t ia = 0, ib = 0;
  for (int64_t it = 0; it < iters; ++it) {
    _tile_loadd(4, a + ia, 64); _tile_loadd(5, a + ia + 1024, 64);
    _tile_loadd(6, b + ib, 64); _tile_loadd(7, b + ib + 1024, 64);
    _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    ia = (ia + 2048) % kA;
    ib = (ib + 2048) % kB;
  }
  alignas(64) static float out[256];
  _tile_stored(0, out, 64);
  _tile_release();
  return static_cast<double>(iters) * 4 * 16 * 16 * 32 * 2;
}
double amx_int8_loop(int64_t iters) { return amx_loop<false>(iters); }

// Sums a buffer with 8 independent streams of 512-bit loads; returns bytes read.
double read_loop(const float* p, size_t n_floats, int passes) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const size_t per = n_floats / 8 / 16 * 16;
  for (int r = 0; r < passes; ++r)
    for (size_t i = 0; i < per; i += 16)
      for (int s = 0; s < 8; ++s) acc[s] = _mm512_add_ps(acc[s], _mm512_load_ps(p + s * per + i));
  __m512 t = acc[0];
  for (int s = 1; s < 8; ++s) t = _mm512_add_ps(t, acc[s]);
  volatile float sink = _mm512_reduce_add_ps(t);
  (void)sink;
  return static_cast<double>(per) * 8 * 4 * passes;
}

}  // namespace tessera::probe_x86
