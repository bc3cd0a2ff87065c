// Dense matmul microbenchmarks: tessera's kernels next to oneDNN and OpenBLAS on the shapes the
// engine runs (SmolLM2/SmolVLM prefill, SigLIP-B vision tiles, one-token decode).
//
//   prefill/<kernel>/<M>x<N>x<K>/t:<threads>   GFLOP/s = 2MNK / s, frac_peak vs probe fp32_fma × t
//                                              (AMX bf16 kernels: vs probe amx_bf16 × t, peak=amx_bf16)
//   decode/<kernel>/<N>x<K>/t:<threads>        GB/s of weight bytes, frac_peak vs probe read_dram
//
// y[M×N] = x[M×K] · W^T with W stored N×K row-major (the engine's layout) for every library.
// Threading: tessera uses its own ThreadPool(threads); oneDNN (Debian build: OpenMP runtime) gets
// omp_set_num_threads(threads) before its primitives are created; OpenBLAS (pthread build) gets
// openblas_set_num_threads(threads). OpenBLAS picks its kernels when it loads, so main() re-execs
// the binary with OPENBLAS_CORETYPE=Cooperlake when the variable is unset.
// Peaks come from `tessera probe` output: $TESSERA_PROBE or <repo>/models/probe.json.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/bf16_tiles.h"
#include "kernels/gemm_panels.h"
#include "kernels/kernels.h"
#include "random_floats.h"
#include "profile/probe.h"

namespace {

using namespace tessera;
using Clock = std::chrono::steady_clock;

// ---- peaks -------------------------------------------------------------------------------
std::string g_probe_json;

// Compute peak: the probe's 1-thread fp32 FMA rate × threads (each vCPU is its own core here;
// the probe's all-thread compute figure can be dragged down by whatever else runs on the VM).
// Bandwidth peak: the probe's aggregate read rate at `threads` (bandwidth does not scale with
// cores), else the 1-thread figure. 0 when there is no probe file.
// AMX bf16 kernels (tessera's gemm_bf16, oneDNN's brg:avx512_core_amx_bf16) are measured
// against the probe's 1-thread AMX bf16 tile rate × threads instead.
enum class Peak { Fp32Fma, AmxBf16 };
double compute_peak(int threads, Peak kind = Peak::Fp32Fma) {
  if (g_probe_json.empty()) return 0;
  return probe_lookup(g_probe_json, kind == Peak::AmxBf16 ? "amx_bf16" : "fp32_fma_avx512", 1) * threads;
}
double dram_peak(int threads) {
  if (g_probe_json.empty()) return 0;
  const double v = probe_lookup(g_probe_json, "read_dram", threads);
  return v > 0 ? v : probe_lookup(g_probe_json, "read_dram", 1);
}

// ---- data --------------------------------------------------------------------------------
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buf = std::unique_ptr<uint8_t, AlignedFree>;
Buf alloc(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, std::max<size_t>(rounded, 64)));
  if (!p) std::abort();
  std::memset(p, 0, rounded);
  return Buf(p);
}

void put16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// One row of K floats into `type` at dst (row_bytes(type, K) bytes).
void encode_row(DType type, const float* src, int64_t K, uint8_t* dst) {
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(K) * 4); break;
    case DType::F16: for (int64_t k = 0; k < K; ++k) put16(dst + 2 * k, float_to_fp16(src[k])); break;
    case DType::BF16: for (int64_t k = 0; k < K; ++k) put16(dst + 2 * k, float_to_bf16(src[k])); break;
    case DType::Q8_0:  // fp16 d, 32 × int8
      for (int64_t b = 0; b < K / 32; ++b) {
        const float* s = src + 32 * b;
        uint8_t* o = dst + 34 * b;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(s[j]));
        const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        put16(o, float_to_fp16(d));
        for (int j = 0; j < 32; ++j) o[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(s[j] * id)));
      }
      break;
    case DType::Q4_1:  // fp16 d, fp16 m, 16 bytes: element j<16 low nibble of byte j, j>=16 high nibble of j-16
      for (int64_t b = 0; b < K / 32; ++b) {
        const float* s = src + 32 * b;
        uint8_t* o = dst + 20 * b;
        float lo = s[0], hi = s[0];
        for (int j = 1; j < 32; ++j) lo = std::min(lo, s[j]), hi = std::max(hi, s[j]);
        const float d = (hi - lo) / 15.0f, id = d > 0 ? 1.0f / d : 0.0f;
        put16(o, float_to_fp16(d));
        put16(o + 2, float_to_fp16(lo));
        for (int j = 0; j < 16; ++j) {
          const int q0 = std::clamp(static_cast<int>(std::lround((s[j] - lo) * id)), 0, 15);
          const int q1 = std::clamp(static_cast<int>(std::lround((s[j + 16] - lo) * id)), 0, 15);
          o[4 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
      }
      break;
    default: std::fprintf(stderr, "bench_dense: no encoder for %s\n", dtype_name(type)); std::abort();
  }
}

// N×K weights in `type`, `copies` identical copies laid out back to back (one allocation each,
// so cycling through them streams distinct memory).
struct Weights {
  DType type;
  int64_t N, K;
  size_t stride, bytes;  // per row, per copy
  std::vector<Buf> copies;
  WeightMatrix matrix(size_t i) const {
    return WeightMatrix{type, N, K, copies[i % copies.size()].get(), stride};
  }
};

Weights make_weights(DType type, int64_t N, int64_t K, size_t copies) {
  Weights w{type, N, K, row_bytes(type, static_cast<uint64_t>(K)), 0, {}};
  w.bytes = w.stride * static_cast<size_t>(N);
  const std::vector<float> f = random_floats(static_cast<size_t>(N * K), 1234u + static_cast<uint32_t>(N + K));
  Buf first = alloc(w.bytes);
  for (int64_t r = 0; r < N; ++r) encode_row(type, f.data() + r * K, K, first.get() + r * w.stride);
  w.copies.push_back(std::move(first));
  for (size_t c = 1; c < copies; ++c) {
    Buf b = alloc(w.bytes);
    std::memcpy(b.get(), w.copies[0].get(), w.bytes);
    w.copies.push_back(std::move(b));
  }
  return w;
}

// Google Benchmark calls a benchmark function several times (iteration estimate, repetitions):
// keep the last weight set so it is built once per benchmark, not once per call.
std::shared_ptr<Weights> cached_weights(DType type, int64_t N, int64_t K, size_t copies) {
  static std::shared_ptr<Weights> last;
  if (!last || last->type != type || last->N != N || last->K != K || last->copies.size() != copies) {
    last.reset();  // free first: decode sets are large
    last = std::make_shared<Weights>(make_weights(type, N, K, copies));
  }
  return last;
}

size_t decode_bytes_target() {
  // Default 512 MiB: above twice the 260 MiB L3 this VM reports (and what the probe's
  // read_dram uses), so every decode iteration streams its weights from DRAM.
  const char* e = std::getenv("TESSERA_BENCH_DECODE_MIB");
  const size_t mib = e ? static_cast<size_t>(std::atol(e)) : 512;
  return std::max<size_t>(mib, 65) << 20;
}

size_t decode_copies(DType type, int64_t N, int64_t K) {
  const size_t one = row_bytes(type, static_cast<uint64_t>(K)) * static_cast<size_t>(N);
  return std::max<size_t>(2, (decode_bytes_target() + one - 1) / one);
}

// ---- reporting ---------------------------------------------------------------------------
struct Timer {
  Clock::time_point t0 = Clock::now();
  double seconds() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }
};

void report_compute(benchmark::State& st, double flop_per_iter, double seconds, int threads, Peak kind = Peak::Fp32Fma) {
  const double gflops = flop_per_iter * static_cast<double>(st.iterations()) / seconds / 1e9;
  st.counters["GFLOP/s"] = gflops;
  const double p = compute_peak(threads, kind);
  if (p > 0) st.counters["frac_peak"] = gflops / p;
  if (kind == Peak::AmxBf16) st.counters["peak=amx_bf16"] = 1;
}

void report_decode(benchmark::State& st, double bytes_per_iter, double flop_per_iter, double seconds,
                   int threads) {
  const double it = static_cast<double>(st.iterations());
  const double gbs = bytes_per_iter * it / seconds / 1e9;
  st.counters["GB/s"] = gbs;
  st.counters["GFLOP/s"] = flop_per_iter * it / seconds / 1e9;
  const double p = dram_peak(threads);
  if (p > 0) st.counters["frac_peak"] = gbs / p;
}

// OpenBLAS's pthread workers spin ~2^28 cycles after a call before sleeping; let them settle so
// they do not steal one of the two vCPUs from the next benchmark.
void settle_openblas(int threads) {
  if (threads > 1) std::this_thread::sleep_for(std::chrono::milliseconds(150));
}

// ---- prefill / vision GEMM ---------------------------------------------------------------
struct Shape {
  int64_t M, N, K;
};
const Shape kPrefill[] = {{512, 576, 576},   {512, 1536, 576},  {512, 576, 1536},
                          {1024, 768, 768},  {1024, 3072, 768}, {1024, 768, 3072}};
const int kThreads[] = {1, 2};

// GemmPacked: gemm on weights repacked at load (gemm_panels.h), as the vision encoder runs it.
enum class TesseraOp { Gemm, GemmPacked, Matmul, GemmBf16 };

void bm_tessera_prefill(benchmark::State& st, TesseraOp op, DType type, Shape s, int threads) {
  auto w = cached_weights(type, s.N, s.K, 1);
  const std::vector<float> x = random_floats(static_cast<size_t>(s.M * s.K), 7);
  std::vector<float> y(static_cast<size_t>(s.M * s.N));
  ThreadPool pool(threads);
  const PackedWeights panels = op == TesseraOp::GemmPacked  ? pack_gemm_panels(w->matrix(0))
                               : op == TesseraOp::GemmBf16 ? pack_bf16_tiles(w->matrix(0))
                                                           : PackedWeights{};
  const WeightMatrix wm = op == TesseraOp::GemmPacked || op == TesseraOp::GemmBf16 ? panels.matrix : w->matrix(0);
  if (op == TesseraOp::GemmBf16 && !bf16_gemm_available()) {
    st.SkipWithError("no AMX bf16 on this CPU (the scalar twin is not benchmarked)");
    return;
  }
  auto call = [&] {
    if (op == TesseraOp::GemmBf16) gemm_bf16(wm, x.data(), s.M, s.K, y.data(), s.N, pool);  // rounds x inside
    else if (op != TesseraOp::Matmul) gemm(wm, x.data(), s.M, s.K, y.data(), s.N, pool);
    else matmul(wm, x.data(), s.M, s.K, y.data(), s.N, pool);
  };
  call();  // warm-up
  Timer t;
  for (auto _ : st) {
    call();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report_compute(st, 2.0 * s.M * s.N * s.K, t.seconds(), threads, op == TesseraOp::GemmBf16 ? Peak::AmxBf16 : Peak::Fp32Fma);
}

dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// oneDNN matmul primitive. weights_as_stored: N×K row-major used in place (tag ba on a K×N
// logical tensor); otherwise format_tag::any and a reorder into oneDNN's blocked layout before
// timing (what an engine that prepacks at load time would do). in_t is the type of src and
// weights (bf16/f16: x converted outside the timed loop), dst is f32. oneDNN 2.6 (Debian) has no
// f16 matmul on this CPU (the benchmark reports that as an error row).
void bm_dnnl_prefill(benchmark::State& st, dnnl::memory::data_type in_t, bool weights_as_stored, Shape s, int threads) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  omp_set_num_threads(threads);
  dnnl::engine& eng = dnnl_engine();
  dnnl::stream strm(eng);
  dnnl::memory::desc src_md({s.M, s.K}, in_t, tag::ab);
  dnnl::memory::desc wei_any({s.K, s.N}, in_t, weights_as_stored ? tag::ba : tag::any);
  dnnl::memory::desc dst_md({s.M, s.N}, dt::f32, tag::ab);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_any, dst_md), eng);  // oneDNN 2.x API
  } catch (const dnnl::error&) {
    st.SkipWithError("oneDNN has no matmul for this type on this CPU");
    return;
  }
  st.SetLabel(pd.impl_info_str());

  // data: weights N×K (ba on K×N), converted to bf16 if asked
  const std::vector<float> wf = random_floats(static_cast<size_t>(s.N * s.K), 99);
  const std::vector<float> xf = random_floats(static_cast<size_t>(s.M * s.K), 7);
  dnnl::memory w_f32({{s.K, s.N}, dt::f32, tag::ba}, eng, const_cast<float*>(wf.data()));
  dnnl::memory x_f32({{s.M, s.K}, dt::f32, tag::ab}, eng, const_cast<float*>(xf.data()));
  dnnl::memory w_plain({{s.K, s.N}, in_t, tag::ba}, eng);
  dnnl::memory x_mem(src_md, eng);
  dnnl::reorder(w_f32, w_plain).execute(strm, w_f32, w_plain);
  dnnl::reorder(x_f32, x_mem).execute(strm, x_f32, x_mem);
  dnnl::memory w_mem = w_plain;
  if (pd.weights_desc() != w_plain.get_desc()) {
    w_mem = dnnl::memory(pd.weights_desc(), eng);
    dnnl::reorder(w_plain, w_mem).execute(strm, w_plain, w_mem);
  }
  dnnl::memory y_mem(dst_md, eng);
  strm.wait();
  dnnl::matmul prim(pd);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, x_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, y_mem}};
  prim.execute(strm, args);  // warm-up
  strm.wait();
  Timer t;
  for (auto _ : st) {
    prim.execute(strm, args);
    strm.wait();
    benchmark::ClobberMemory();
  }
  report_compute(st, 2.0 * s.M * s.N * s.K, t.seconds(), threads,
                 std::string(pd.impl_info_str()).find("amx") != std::string::npos ? Peak::AmxBf16 : Peak::Fp32Fma);
}

void bm_openblas_prefill(benchmark::State& st, Shape s, int threads) {
  openblas_set_num_threads(threads);
  const std::vector<float> w = random_floats(static_cast<size_t>(s.N * s.K), 99);
  const std::vector<float> x = random_floats(static_cast<size_t>(s.M * s.K), 7);
  std::vector<float> y(static_cast<size_t>(s.M * s.N));
  auto call = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(s.M), static_cast<int>(s.N),
                static_cast<int>(s.K), 1.0f, x.data(), static_cast<int>(s.K), w.data(), static_cast<int>(s.K),
                0.0f, y.data(), static_cast<int>(s.N));
  };
  call();
  Timer t;
  for (auto _ : st) {
    call();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report_compute(st, 2.0 * s.M * s.N * s.K, t.seconds(), threads);
  settle_openblas(threads);
}

// ---- decode (M = 1) ----------------------------------------------------------------------
struct DecodeShape {
  int64_t N, K;
};
const DecodeShape kDecode[] = {{1536, 576}, {576, 1536}, {49152, 576}};

void bm_tessera_decode(benchmark::State& st, DType type, DecodeShape s, int threads) {
  const size_t copies = decode_copies(type, s.N, s.K);
  auto w = cached_weights(type, s.N, s.K, copies);
  const std::vector<float> x = random_floats(static_cast<size_t>(s.K), 7);
  std::vector<float> y(static_cast<size_t>(s.N));
  ThreadPool pool(threads);
  st.SetLabel(std::to_string(copies) + " copies, " + std::to_string((copies * w->bytes) >> 20) + " MiB");
  size_t i = 0;
  matmul(w->matrix(i++), x.data(), 1, s.K, y.data(), s.N, pool);
  Timer t;
  for (auto _ : st) {
    matmul(w->matrix(i++), x.data(), 1, s.K, y.data(), s.N, pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report_decode(st, static_cast<double>(w->bytes), 2.0 * s.N * s.K, t.seconds(), threads);
}

enum class Peer { Dnnl, OpenBlas };

// f32 GEMV y = W x: oneDNN through dnnl_sgemm (M=1, B = W transposed), OpenBLAS cblas_sgemv.
void bm_peer_decode(benchmark::State& st, Peer peer, DecodeShape s, int threads) {
  const size_t copies = decode_copies(DType::F32, s.N, s.K);
  auto w = cached_weights(DType::F32, s.N, s.K, copies);
  const std::vector<float> x = random_floats(static_cast<size_t>(s.K), 7);
  std::vector<float> y(static_cast<size_t>(s.N));
  if (peer == Peer::Dnnl) omp_set_num_threads(threads);
  else openblas_set_num_threads(threads);
  st.SetLabel(std::to_string(copies) + " copies, " + std::to_string((copies * w->bytes) >> 20) + " MiB");
  const int N = static_cast<int>(s.N), K = static_cast<int>(s.K);
  auto call = [&](size_t i) {
    const float* wp = reinterpret_cast<const float*>(w->copies[i % copies].get());
    if (peer == Peer::Dnnl) {
      if (dnnl_sgemm('N', 'T', 1, N, K, 1.0f, x.data(), K, wp, K, 0.0f, y.data(), N) != dnnl_success) std::abort();
    } else {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, wp, K, x.data(), 1, 0.0f, y.data(), 1);
    }
  };
  size_t i = 0;
  call(i++);
  Timer t;
  for (auto _ : st) {
    call(i++);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report_decode(st, static_cast<double>(w->bytes), 2.0 * s.N * s.K, t.seconds(), threads);
  if (peer == Peer::OpenBlas) settle_openblas(threads);
}


// ---- self-check --------------------------------------------------------------------------
// The layouts and strides above, checked once on a small problem: every kernel against
// cblas_sgemm on the dequantized weights. Returns a one-line summary.
std::string self_check() {
  const int64_t M = 5, N = 40, K = 96;
  const std::vector<float> x = random_floats(static_cast<size_t>(M * K), 3);
  ThreadPool pool(2);
  double worst = 0;
  std::string bad;
  auto compare = [&](const char* what, const std::vector<float>& got, const std::vector<float>& ref) {
    double err = 0;
    for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::fabs(static_cast<double>(got[i]) - ref[i]) / (1.0 + std::fabs(ref[i])));
    worst = std::max(worst, err);
    if (!(err < 1e-3)) bad += std::string(" ") + what;
  };
  for (DType ty : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_1}) {
    const Weights w = make_weights(ty, N, K, 1);
    std::vector<float> wf(static_cast<size_t>(N * K));
    for (int64_t r = 0; r < N; ++r) dequantize_row(ty, w.copies[0].get() + r * w.stride, wf.data() + r * K, K);
    std::vector<float> ref(static_cast<size_t>(M * N)), got(ref.size());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x.data(), K, wf.data(), K, 0.0f, ref.data(), N);
    matmul(w.matrix(0), x.data(), M, K, got.data(), N, pool);
    compare((std::string("matmul_") + dtype_name(ty)).c_str(), got, ref);
    matmul(w.matrix(0), x.data(), 1, K, got.data(), N, pool);
    compare((std::string("matmul1_") + dtype_name(ty)).c_str(), std::vector<float>(got.begin(), got.begin() + N),
            std::vector<float>(ref.begin(), ref.begin() + N));
    if (ty == DType::F32) {
      gemm(w.matrix(0), x.data(), M, K, got.data(), N, pool);
      compare("gemm_F32", got, ref);
      std::fill(got.begin(), got.end(), 0.0f);
      dnnl_sgemm('N', 'T', M, N, K, 1.0f, x.data(), K, wf.data(), K, 0.0f, got.data(), N);
      compare("dnnl_sgemm", got, ref);
      std::vector<float> g1(static_cast<size_t>(N));
      cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, wf.data(), K, x.data(), 1, 0.0f, g1.data(), 1);
      compare("cblas_sgemv", g1, std::vector<float>(ref.begin(), ref.begin() + N));
    }
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s (max rel err %.2g)%s", bad.empty() ? "ok" : "FAILED", worst, bad.c_str());
  return buf;
}

// ---- registration ------------------------------------------------------------------------
std::string lower(const char* s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

template <class F>
void add(const std::string& name, F&& fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<F>(fn))->UseRealTime()->Unit(benchmark::kMillisecond);
}

void register_all() {
  for (const Shape& s : kPrefill) {
    const std::string shape = std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
    for (int t : kThreads) {
      const std::string suf = "/" + shape + "/t:" + std::to_string(t);
      add("prefill/tessera_gemm_f32" + suf, [=](benchmark::State& st) { bm_tessera_prefill(st, TesseraOp::Gemm, DType::F32, s, t); });
      for (DType ty : {DType::F32, DType::F16, DType::BF16})  // the encoder's path for each weight type
        add("prefill/tessera_gemm_" + lower(dtype_name(ty)) + "_packed" + suf,
            [=](benchmark::State& st) { bm_tessera_prefill(st, TesseraOp::GemmPacked, ty, s, t); });
      for (DType ty : {DType::F32, DType::F16, DType::BF16})  // the opt-in bf16 GEMM on AMX
        add("prefill/tessera_gemm_bf16_amx_" + lower(dtype_name(ty)) + suf,
            [=](benchmark::State& st) { bm_tessera_prefill(st, TesseraOp::GemmBf16, ty, s, t); });
      for (DType ty : {DType::F32, DType::F16, DType::BF16})
        add("prefill/tessera_matmul_" + lower(dtype_name(ty)) + suf,
            [=](benchmark::State& st) { bm_tessera_prefill(st, TesseraOp::Matmul, ty, s, t); });
      using ddt = dnnl::memory::data_type;
      add("prefill/dnnl_f32" + suf, [=](benchmark::State& st) { bm_dnnl_prefill(st, ddt::f32, true, s, t); });
      add("prefill/dnnl_f32_packed" + suf, [=](benchmark::State& st) { bm_dnnl_prefill(st, ddt::f32, false, s, t); });
      add("prefill/dnnl_f16_packed" + suf, [=](benchmark::State& st) { bm_dnnl_prefill(st, ddt::f16, false, s, t); });
      add("prefill/dnnl_bf16_packed" + suf, [=](benchmark::State& st) { bm_dnnl_prefill(st, ddt::bf16, false, s, t); });
      add("prefill/openblas_f32" + suf, [=](benchmark::State& st) { bm_openblas_prefill(st, s, t); });
    }
  }
  for (const DecodeShape& s : kDecode) {
    const std::string shape = std::to_string(s.N) + "x" + std::to_string(s.K);
    // dtype outer, threads inner: the cached weight set is reused by both thread counts
    for (DType ty : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_1})
      for (int t : kThreads)
        add("decode/tessera_matmul_" + lower(dtype_name(ty)) + "/" + shape + "/t:" + std::to_string(t),
            [=](benchmark::State& st) { bm_tessera_decode(st, ty, s, t); });
    for (int t : kThreads) {
      const std::string suf = "/" + shape + "/t:" + std::to_string(t);
      add("decode/dnnl_f32" + suf, [=](benchmark::State& st) { bm_peer_decode(st, Peer::Dnnl, s, t); });
      add("decode/openblas_f32" + suf, [=](benchmark::State& st) { bm_peer_decode(st, Peer::OpenBlas, s, t); });
    }
  }
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS reads OPENBLAS_CORETYPE when the library is loaded, before main: re-exec with it set.
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    setenv("OPENBLAS_CORETYPE", "Cooperlake", 1);
    execv("/proc/self/exe", argv);
    std::perror("bench_dense: re-exec with OPENBLAS_CORETYPE failed, continuing");
  }
  const char* probe_env = std::getenv("TESSERA_PROBE");
  const std::string probe_path = probe_env ? probe_env : std::string(TESSERA_SOURCE_DIR) + "/models/probe.json";
  g_probe_json = read_file(probe_path);
  if (g_probe_json.empty()) std::fprintf(stderr, "bench_dense: no probe at %s, frac_peak not reported\n", probe_path.c_str());

  const dnnl_version_t* v = dnnl_version();
  char buf[256];
  benchmark::AddCustomContext("tessera_isa", isa_name(active_isa()));
  std::snprintf(buf, sizeof buf, "%d.%d.%d (%s, cpu runtime %s)", v->major, v->minor, v->patch, v->hash,
                v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
  benchmark::AddCustomContext("onednn", buf);
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  benchmark::AddCustomContext("openblas_corename", openblas_get_corename());
  benchmark::AddCustomContext("openblas_coretype_env", std::getenv("OPENBLAS_CORETYPE"));
  benchmark::AddCustomContext("probe", g_probe_json.empty() ? "absent" : probe_path);
  for (int t : {1, 2}) {
    std::snprintf(buf, sizeof buf, "fp32_fma %.2f GFLOP/s (1-thread x %d), read_dram %.2f GB/s", compute_peak(t), t,
                  dram_peak(t));
    benchmark::AddCustomContext("peak_t" + std::to_string(t), buf);
  }
  std::snprintf(buf, sizeof buf, "%zu", decode_bytes_target() >> 20);
  benchmark::AddCustomContext("decode_working_set_mib", buf);

  const std::string check = self_check();
  std::fprintf(stderr, "bench_dense: self-check %s\n", check.c_str());
  benchmark::AddCustomContext("self_check", check);

  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
