#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/cpu.h"
#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/attention_bf16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/decode_panels.h"
#include "kernels/attention_f16.h"
#include "kernels/elementwise.h"
#include "kernels/f16_tiles.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "kernels/resample.h"

namespace tessera {

namespace {

// Decode (one token) streams each weight row once: one contiguous range per thread keeps each
// thread's prefetch stream unbroken. Larger batches keep 8-row ranges, balanced dynamically.
int64_t decode_grain(int64_t rows, int64_t m, const ThreadPool& pool) {
  if (m != 1 || pool.size() <= 1) return 8;
  return (rows + 8 * pool.size() - 1) / (8 * pool.size()) * 8;
}

// The scalar twins under the table's signatures where the vector kernel takes more.
void ref_gemm_bf16_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const uint16_t* xb, int64_t m, int64_t kp,
                        float* y, int64_t ys, const float* bias, uint16_t* gelu_b16, const Bf16QkvTarget* qkv) {
  if (qkv) fail("gemm_bf16: results into the attention's layouts need AMX bf16");
  ref::gemm_bf16_rows(w, r0, r1, xb, m, kp, y, ys, bias, gelu_b16);
}
void ref_attention_bf16_rows(const Bf16AttnDims& D, const Bf16AttnBuffers& b, int64_t h, int64_t i0, float* out,
                             int64_t out_stride, uint16_t*) {
  ref::attention_bf16_rows(D, b, h, i0, out, out_stride);
}

// Every level starts from the scalar twins; each vector level overrides what it has.
KernelTable scalar_table() {
  KernelTable t;
  t.isa = Isa::Scalar;
  t.matmul_rows = ref::matmul_rows;
  t.gemm_rows = ref::gemm_rows;
  t.quantize_row_q8_1 = ref::quantize_row_q8_1;
  t.matmul_q8_rows = ref::matmul_q8_rows;
  t.softmax_row = ref::softmax_row;
  t.gelu_tanh = ref::gelu_tanh;
  t.swiglu = ref::swiglu;
  t.store_f16 = ref::store_f16;
  t.load_f16 = ref::load_f16;
  t.quantize_row_q8_0 = ref::quantize_row_q8_0;
  t.rms_norm = ref::rms_norm;
  t.add_rms_norm = ref::add_rms_norm;
  t.layer_norm = ref::layer_norm;
  t.add_layer_norm = ref::add_layer_norm;
  t.attention_block = ref::attention_block;
  t.attention_merge = ref::attention_merge;
  t.attention_name = "scalar";
  t.combine_rows_u8 = ref::combine_rows_u8;
  t.bf16_tiles = false;
  t.round_rows_bf16 = tessera::round_rows_bf16;
  t.f16_tiles = false;
  t.round_rows_f16 = tessera::round_rows_f16;
  t.gemm_f16_rows = ref::gemm_f16_rows;
  t.pack_kv_f16 = ref::pack_kv_f16;
  t.softmax_rows_f16 = ref::softmax_rows_f16;
  t.gemm_bf16_rows = ref_gemm_bf16_rows;
  t.pack_attn_bf16 = ref::pack_attn_bf16;
  t.attention_bf16_rows = ref_attention_bf16_rows;
  t.decode_panels = nullptr;
  return t;
}

#if defined(TESSERA_HAVE_AVX512)
// The VNNI level: vpdpbusd for the weight types it covers, else the 256-bit maddubs kernel.
void vnni_matmul_q8_rows(const WeightMatrix& w, int64_t r0, int64_t r1, const BlockQ8_1* xq, int64_t m,
                         int64_t xq_stride, float* y, int64_t ys) {
  if (!avx512::matmul_q8_rows_vnni(w, r0, r1, xq, m, xq_stride, y, ys))
    avx512::matmul_q8_rows(w, r0, r1, xq, m, xq_stride, y, ys);
}
#endif

KernelTable make_table(Isa level) {
  KernelTable t = scalar_table();
  switch (level) {  // every level listed (no default): -Wswitch flags one added to Isa but not here
    case Isa::Scalar: break;
    case Isa::Neon:
#if defined(__aarch64__)
      t.isa = Isa::Neon;
      t.matmul_rows = neon::matmul_rows;
      t.gemm_rows = neon::gemm_rows;
      if (cpu_features().dotprod) t.matmul_q8_rows = neon::matmul_q8_rows_dotprod;
#if defined(TESSERA_HAVE_SME)
      if (cpu_features().sme) t.gemm_rows = neon::gemm_rows_sme;
#endif
      t.swiglu = neon::swiglu;
      t.store_f16 = neon::store_f16;
      t.load_f16 = neon::load_f16;
      t.quantize_row_q8_0 = neon::quantize_row_q8_0;
      t.pack_kv_f16 = neon::pack_kv_f16;
      t.softmax_rows_f16 = neon::softmax_rows_f16;
      if (cpu_features().fp16_arith) {  // the fp16 GEMM by FMLA .8h (every Apple Silicon core)
        t.f16_tiles = true;
        t.round_rows_f16 = neon::round_rows_f16;
        t.gemm_f16_rows = neon::gemm_f16_rows;
      }
      t.softmax_row = neon::softmax_row_v16;
      t.gelu_tanh = neon::gelu_tanh_v16;
      t.rms_norm = neon::rms_norm;
      t.add_rms_norm = neon::add_rms_norm;
      t.layer_norm = neon::layer_norm;
      t.add_layer_norm = neon::add_layer_norm;
      t.attention_block = neon::attention_block;
      t.attention_merge = neon::attention_merge;
      t.attention_name = "neon";
      // the V16 decode kernel reads them as on AVX2 (bitwise, kernel_check under qemu); its speed
      // on Apple's cores is not measured here
      t.decode_panels = [](DType d) { return v16_decode_panels(d); };
#endif
      break;
    case Isa::Avx2:
    case Isa::Avx512:
    case Isa::Avx512Vnni:
    case Isa::Amx:
#if defined(TESSERA_HAVE_AVX512)
      t.isa = Isa::Avx2;
      t.matmul_rows = avx2::matmul_rows;
      t.gemm_rows = avx2::gemm_rows;
      t.quantize_row_q8_1 = avx2::quantize_row_q8_1;
      t.matmul_q8_rows = avx2::matmul_q8_rows;
      t.swiglu = avx2::swiglu;
      t.store_f16 = avx2::store_f16;
      t.load_f16 = avx2::load_f16;
      t.quantize_row_q8_0 = avx2::quantize_row_q8_0;
      t.rms_norm = avx2::rms_norm;
      t.add_rms_norm = avx2::add_rms_norm;
      t.layer_norm = avx2::layer_norm;
      t.add_layer_norm = avx2::add_layer_norm;
      t.softmax_row = avx2::softmax_row_v16;
      t.gelu_tanh = avx2::gelu_tanh_v16;
      t.attention_block = avx2::attention_block;
      t.attention_merge = avx2::attention_merge;
      t.attention_name = "avx2";
      t.combine_rows_u8 = avx2::combine_rows_u8;
      t.decode_panels = [](DType d) { return v16_decode_panels(d); };
      if (level == Isa::Avx2) break;
      t.isa = Isa::Avx512;
      t.matmul_rows = avx512::matmul_rows;
      t.gemm_rows = avx512::gemm_rows;
      t.quantize_row_q8_1 = avx512::quantize_row_q8_1;
      t.matmul_q8_rows = avx512::matmul_q8_rows;
      t.softmax_row = avx512::softmax_row;
      t.gelu_tanh = avx512::gelu_tanh;
      t.swiglu = avx512::swiglu;
      t.store_f16 = avx512::store_f16;
      t.load_f16 = avx512::load_f16;
      t.quantize_row_q8_0 = avx512::quantize_row_q8_0;
      t.rms_norm = avx512::rms_norm;
      t.add_rms_norm = avx512::add_rms_norm;
      t.layer_norm = avx512::layer_norm;
      t.add_layer_norm = avx512::add_layer_norm;
      t.attention_block = avx512::attention_block;
      t.attention_merge = avx512::attention_merge;
      t.attention_name = "avx512";
      t.combine_rows_u8 = avx512::combine_rows_u8;
      t.pack_kv_f16 = avx512::pack_kv_f16;
      t.softmax_rows_f16 = avx512::softmax_rows_f16;
      t.decode_panels = [](DType d) { return supports_decode_panels(d); };
      if (level == Isa::Avx512) break;
      t.isa = Isa::Avx512Vnni;
      t.matmul_q8_rows = vnni_matmul_q8_rows;
      if (cpu_features().avx512bf16) {  // the bf16 GEMM and attention by VDPBF16PS (Zen 4, Cooper Lake)
        t.bf16_tiles = true;
        t.round_rows_bf16 = avx512::round_rows_bf16_avx512;
        t.gemm_bf16_rows = avx512::gemm_bf16_rows_vdp;
        t.pack_attn_bf16 = avx512::pack_attn_bf16;
        t.attention_bf16_rows = avx512::attention_bf16_rows_vdp;
      }
      if (cpu_features().avx512fp16) {  // the fp16 GEMM by VFMADD231PH (Sapphire Rapids and later)
        t.f16_tiles = true;
        t.round_rows_f16 = avx512::round_rows_f16;
        t.gemm_f16_rows = avx512::gemm_f16_rows;
      }
      if (level == Isa::Avx512Vnni) break;
      t.isa = Isa::Amx;
      t.bf16_tiles = true;
      t.round_rows_bf16 = avx512::round_rows_bf16_avx512;
      t.gemm_bf16_rows = avx512::gemm_bf16_rows_amx;
      t.pack_attn_bf16 = avx512::pack_attn_bf16;
      t.attention_bf16_rows = avx512::attention_bf16_rows;
#endif
      break;
  }
  return t;
}

constexpr int kLevels = static_cast<int>(Isa::Amx) + 1;

const std::array<KernelTable, kLevels>& tables() {
  static const std::array<KernelTable, kLevels> all = [] {
    std::array<KernelTable, kLevels> a;
    for (int i = 0; i < kLevels; ++i) a[static_cast<size_t>(i)] = make_table(static_cast<Isa>(i));
    return a;
  }();
  return all;
}

// A cap lowered to what this CPU and OS support: levels above the detected one give the detected
// one; Neon on x86 (or any level the build lacks) gives scalar.
Isa lower_to_cpu(Isa cap) {
  const Isa best = detected_isa();
  if (cap >= best) return best;
  return cap == Isa::Neon && best != Isa::Neon ? Isa::Scalar : cap;
}

std::atomic<const KernelTable*> g_active{nullptr};

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

void set_isa_cap(Isa cap) { g_active.store(&tables()[static_cast<size_t>(lower_to_cpu(cap))]); }

const KernelTable& kernels() {
  const KernelTable* t = g_active.load(std::memory_order_acquire);
  if (t) return *t;
  // first use without a cap: TESSERA_ISA, read once (--isa calls set_isa_cap before any kernel runs)
  const char* e = std::getenv("TESSERA_ISA");
  const Isa cap = e && *e ? isa_from_name(e, "TESSERA_ISA") : Isa::Amx;
  const KernelTable* want = &tables()[static_cast<size_t>(lower_to_cpu(cap))];
  g_active.compare_exchange_strong(t, want);  // a concurrent set_isa_cap wins
  return *g_active.load();
}

const KernelTable& kernel_table(Isa level) { return tables()[static_cast<size_t>(lower_to_cpu(level))]; }

Isa active_isa() { return kernels().isa; }

void matmul(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys,
            ThreadPool& pool) {
  const auto rows = kernels().matmul_rows;
  // Row ranges are multiples of 8 so the decode kernel runs full 8-row groups.
  pool.parallel_for(w.rows, decode_grain(w.rows, m, pool), [&](int64_t r0, int64_t r1) { rows(w, r0, r1, x, m, xs, y, ys); });
}

void gemm(const WeightMatrix& w, const float* x, int64_t m, int64_t xs, float* y, int64_t ys, ThreadPool& pool) {
  const auto rows = kernels().gemm_rows;
  parallel_row_groups(w.rows, pool, [&](int64_t r0, int64_t r1) { rows(w, r0, r1, x, m, xs, y, ys); });
}

void parallel_row_groups(int64_t n_rows, ThreadPool& pool, RangeFn fn) {
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

void softmax_row(float* x, int64_t n, float scale) { kernels().softmax_row(x, n, scale); }
void gelu_tanh(float* x, int64_t n) { kernels().gelu_tanh(x, n); }
void swiglu(float* g, const float* u, int64_t n) { kernels().swiglu(g, u, n); }
void store_f16(const float* x, int64_t n, uint16_t* y, int64_t step) { kernels().store_f16(x, n, y, step); }
void load_f16(const uint16_t* x, int64_t n, float* y) { kernels().load_f16(x, n, y); }
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) { kernels().rms_norm(x, w, y, n, eps); }
void add_rms_norm(float* x, const float* d, const float* w, float* y, int64_t n, float eps) {
  kernels().add_rms_norm(x, d, w, y, n, eps);
}
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  kernels().layer_norm(x, w, b, y, n, eps);
}
void add_layer_norm(float* x, const float* d, const float* w, const float* b, float* y, int64_t n, float eps) {
  kernels().add_layer_norm(x, d, w, b, y, n, eps);
}

void combine_rows_u8(const uint8_t* const* rows, const int32_t* k, int n, int64_t len, int precision, uint8_t* out) {
  kernels().combine_rows_u8(rows, k, n, len, precision, out);
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k) { kernels().quantize_row_q8_1(x, y, k); }

void quantize_rows_q8_1(const float* x, int64_t n, int64_t xs, BlockQ8_1* y, int64_t k, ThreadPool& pool) {
  const auto quantize = kernels().quantize_row_q8_1;
  const auto rows = [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) quantize(x + i * xs, y + i * (k / 32), k);
  };
  if (n < 8) return rows(0, n);  // a decode row: not worth waking the pool
  pool.parallel_for(n, 4, rows);
}

bool q8_vision_fast() { return kernels().isa == Isa::Avx512Vnni; }

void matmul_q8(const WeightMatrix& w, const BlockQ8_1* xq, int64_t m, int64_t xq_stride, float* y,
               int64_t ys, ThreadPool& pool) {
  const Q8Output out{&w, y, ys};
  matmul_q8_group(&out, 1, xq, m, xq_stride, pool);
}

void matmul_q8_group(const Q8Output* outs, int n_outs, const BlockQ8_1* xq, int64_t m, int64_t xq_stride, ThreadPool& pool) {
  constexpr int kMaxOuts = 8;
  if (n_outs < 1 || n_outs > kMaxOuts) fail("matmul_q8_group: %d outputs (1..%d)", n_outs, kMaxOuts);
  // each matrix's rows padded to whole 16-row panels, stacked: ranges never split a panel
  int64_t at[kMaxOuts + 1] = {0};
  for (int i = 0; i < n_outs; ++i) {
    const WeightMatrix& w = *outs[i].w;
    if (!supports_q8_activations(w.type)) fail("8-bit activations are not supported for %s weights", dtype_name(w.type));
    if (!w.panels) fail("matmul_q8: the %s weights were not repacked (pack_q8_panels)", dtype_name(w.type));
    if (w.cols != outs[0].w->cols) fail("matmul_q8_group: the matrices take rows of different lengths");
    at[i + 1] = at[i] + (w.rows + 15) / 16 * 16;
  }
  const auto rows = kernels().matmul_q8_rows;
  const int64_t total = at[n_outs];
  // Whole 16-row panels per range; a decode gets one contiguous run of panels per thread.
  const int64_t grain = m == 1 ? std::max<int64_t>(16, (decode_grain(total, m, pool) + 15) / 16 * 16) : 16;
  pool.parallel_for(total, grain, [&](int64_t a, int64_t b) {
    for (int i = 0; i < n_outs; ++i) {
      const int64_t r0 = std::max(a, at[i]) - at[i], r1 = std::min(b, at[i + 1]) - at[i];
      const WeightMatrix& w = *outs[i].w;
      if (r0 < std::min(r1, w.rows)) rows(w, r0, std::min(r1, w.rows), xq, m, xq_stride, outs[i].y, outs[i].ys);
    }
  });
}

}  // namespace tessera
