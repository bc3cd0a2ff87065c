// tessera's quantized matmul on the shapes of bench/peers/llamacpp_matmul.cpp (SmolLM2-135M's
// decode and prefill), JSON lines in the same format, so bench/micro/quant_table.py can put the
// two side by side. Weights are random values quantized by the engine's own quantizers; decode
// cycles over enough weight copies to stream from DRAM when --cold is given.
// --q8 runs the 8-bit-activation path instead (Q8_0/Q4_0/Q4_1/Q4_K, weights repacked into panels
// before timing as at model load; the activation quantization is
// inside the timed region, as in llama.cpp's matmul); --type T limits the run to one weight type.
// Each line also gives the fraction of the probe's peak ($TESSERA_PROBE or models/probe.json):
// frac_compute of its 1-thread fp32 FMA rate (int8 VNNI rate with --q8) × threads, and for cold
// decode frac_dram of its DRAM read rate at the same thread count (-1 when there is no probe).
// --panels repacks the weights into decode panels first where the session does (supports_decode_panels: every
// quantized type on AVX-512 with fp32 activations; kernels/decode_panels.h) and skips the other types.
// --decode limits it to the M = 1 shapes. Cold decode also times, after each run, one read of as
// many bytes by the probe's read loop on the same pool (a fresh part of a separate 256 MiB
// buffer): frac_dram_paired is the median over runs of the kernel's rate over that read rate,
// the fraction of the bandwidth the machine gave at that moment (this VM's neighbours move
// the 2-thread DRAM rate by up to 2x between runs), and dram_gbs_paired the median read rate.
// --shape MxNxK (repeatable) times those shapes instead of SmolLM2's (e.g. 1x6144x2048, the 2B
// Qwen3-VL decoder's ffn_up). --l3 cycles over 32 MiB of copies instead: each call's weights
// come from the L3, as a decode of SmolLM2 (101 MB read per token) gets them on a large-L3 Xeon,
// so the per-call costs (fork-join, the prefetch stream's start) weigh as they do there.
// --quantize MxK times the activation quantizer alone (quantize_row_q8_1 of the active level, one
// thread, M rows of K; rows of 48 x 3072 stay in L2): nanoseconds per element, median of the reps.
//   build/bench_quant [-t THREADS] [--cold | --l3] [--reps N] [--q8 | --panels] [--type T] [--decode] [--shape MxNxK]
//   build/bench_quant --quantize MxK [--reps N]
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/decode_panels.h"
#include "kernels/q8_panels.h"
#include "kernels/quantize.h"
#include "core/error.h"
#include "core/huge_page_arena.h"
#include "profile/probe.h"

using namespace tessera;

int main(int argc, char** argv) {
  int threads = 1, reps = 0;
  bool cold = false, l3 = false, q8 = false, decode_only = false, panels = false;
  std::string only;
  std::vector<std::array<int64_t, 3>> only_shapes;  // --shape MxNxK (repeatable): these instead of the built-in list
  std::array<int64_t, 2> quantize_shape = {0, 0};    // --quantize MxK
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--q8")) q8 = true;
    else if (!std::strcmp(argv[i], "--panels")) panels = true;
    else if (!std::strcmp(argv[i], "--type") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "-t") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--cold")) cold = true;
    else if (!std::strcmp(argv[i], "--l3")) l3 = true;  // decode from the L3, as in a small model's decode
    else if (!std::strcmp(argv[i], "--decode")) decode_only = true;  // M = 1 shapes only
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quantize") && i + 1 < argc) {
      long long m = 0, k = 0;
      if (std::sscanf(argv[++i], "%lldx%lld", &m, &k) != 2 || m < 1 || k < 32 || k % 32 || m * k > (int64_t{1} << 28))
        fail("bench_quant: --quantize wants MxK with K a multiple of 32, e.g. 48x3072");
      quantize_shape = {m, k};
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      long long m = 0, n = 0, k = 0;
      if (std::sscanf(argv[++i], "%lldx%lldx%lld", &m, &n, &k) != 3 || m < 1 || n < 1 || k < 1)
        fail("bench_quant: --shape wants MxNxK, e.g. 1x6144x2048");
      only_shapes.push_back({m, n, k});
    }
  }
  if (quantize_shape[0] > 0) {
    const int64_t m = quantize_shape[0], k = quantize_shape[1];
    std::vector<float> x(static_cast<size_t>(m * k));
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    for (float& v : x) v = nd(rng);
    std::vector<BlockQ8_1> y(static_cast<size_t>(m * k / 32));
    std::vector<double> ts;
    for (int r = -1; r < std::max(reps, 50); ++r) {  // one warm-up pass
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < m; ++i) quantize_row_q8_1(x.data() + i * k, y.data() + i * (k / 32), k);
      const double dt = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 0) ts.push_back(dt / static_cast<double>(m * k));
    }
    std::sort(ts.begin(), ts.end());
    std::printf("{\"kernel\":\"quantize_row_q8_1\",\"isa\":\"%s\",\"M\":%lld,\"K\":%lld,\"reps\":%zu,\"ns_per_element\":%.4f,\"min\":%.4f}\n",
                isa_name(active_isa()), static_cast<long long>(m), static_cast<long long>(k), ts.size(), ts[ts.size() / 2], ts[0]);
    return 0;
  }
  ThreadPool pool(threads);
  const char* probe_env = std::getenv("TESSERA_PROBE");
  std::ifstream probe_file(probe_env ? probe_env : TESSERA_SOURCE_DIR "/models/probe.json");
  std::stringstream probe_text;
  probe_text << probe_file.rdbuf();
  const std::string probe = probe_text.str();
  const auto peak = [&](const char* name, int t) { return probe.empty() ? 0.0 : probe_lookup(probe, name, t); };
  const bool vnni = q8 && active_isa() >= Isa::Avx512Vnni;
  const double compute_peak = peak(vnni ? "int8_dot_vnni" : "fp32_fma_avx512", 1) * threads;
  const double dram_peak = peak("read_dram", threads);
  // the paired reads' buffer (cold decode only)
  constexpr size_t kReadBuf = size_t{256} << 20;
  std::unique_ptr<float, decltype(&std::free)> read_buf(nullptr, &std::free);
  if (cold) {
    read_buf.reset(static_cast<float*>(std::aligned_alloc(64, kReadBuf)));
    if (!read_buf) fail("bench_quant: out of memory");
    std::memset(read_buf.get(), 1, kReadBuf);
  }
  size_t read_at = 0;
  // Reads `bytes` of the buffer once, split over the pool; returns the seconds taken (0: no read loop).
  const auto paired_read = [&](size_t bytes) {
    bytes = bytes / 4096 * 4096;
    if (read_at + bytes > kReadBuf) read_at = 0;
    const float* base = read_buf.get() + read_at / 4;
    read_at += bytes;
    const int64_t pages = static_cast<int64_t>(bytes / 4096);
    std::atomic<int64_t> got{0};
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pages, (pages + pool.size() - 1) / pool.size(), [&](int64_t a, int64_t b) {
      got += static_cast<int64_t>(probe_read_pass(base + a * 1024, static_cast<size_t>(b - a) * 4096));
    });
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return got.load() > 0 ? std::make_pair(dt, static_cast<double>(got.load())) : std::make_pair(0.0, 0.0);
  };
  struct Shape { int64_t M, N, K; };
  std::vector<Shape> shapes = {{1, 576, 576}, {1, 192, 576}, {1, 1536, 576}, {1, 576, 1536}, {1, 49152, 576},
                               {512, 1536, 576}, {512, 576, 1536}, {512, 576, 576}};
  if (!only_shapes.empty()) {
    shapes.clear();
    for (const auto& s : only_shapes) shapes.push_back({s[0], s[1], s[2]});
  }
  const DType types[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::A4G64, DType::Q5_0,
                         DType::Q5_1, DType::Q5_K, DType::Q6_K, DType::F32, DType::F16, DType::BF16};
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (DType t : types) {
    if (q8 && !supports_q8_activations(t)) continue;
    if (!only.empty() && only != dtype_name(t)) continue;
    for (const Shape& s : shapes) {
      if (s.K % info(t).block_elems) continue;  // Q4_K needs K = 256k
      if (decode_only && s.M != 1) continue;
      const bool use_panels = panels && !q8 && fits_decode_panels(WeightMatrix{t, s.N, s.K, nullptr, 0});
      if (panels && !use_panels) continue;  // only the types and shapes that get decode panels
      const size_t rb = row_bytes(t, static_cast<uint64_t>(s.K));
      const size_t wbytes = rb * static_cast<size_t>(s.N);
      // --cold: 256 MiB of copies (past any L3 here); --l3: 32 MiB (past the L2s, inside the L3)
      const size_t cycle = cold ? size_t{256} << 20 : l3 ? size_t{32} << 20 : 0;
      const int copies = cycle && s.M == 1 ? static_cast<int>(std::max<size_t>(1, cycle / wbytes)) : 1;
      std::vector<std::vector<uint8_t>> W(static_cast<size_t>(copies), std::vector<uint8_t>(wbytes));
      std::vector<float> row(static_cast<size_t>(s.K));
      for (auto& w : W)
        for (int64_t r = 0; r < s.N; ++r) {
          for (auto& e : row) e = nd(rng);
          quantize_row(t, row.data(), s.K, w.data() + r * rb);
        }
      // --q8: repacked into panels once, as at model load (not timed)
      // in huge pages, as a Session keeps them (core/huge_page_arena.h)
      HugePageArena arena;
      std::vector<PackedWeights> packed;
      if (q8)
        for (auto& w : W) packed.push_back(pack_q8_panels(WeightMatrix{t, s.N, s.K, w.data(), rb}, {}, &arena));
      if (use_panels)
        for (auto& w : W) packed.push_back(pack_decode_panels(WeightMatrix{t, s.N, s.K, w.data(), rb}, {}, &arena));
      std::vector<float> x(static_cast<size_t>(s.M * s.K)), y(static_cast<size_t>(s.M * s.N));
      for (auto& e : x) e = nd(rng) * 20;
      const double flops = 2.0 * s.M * s.N * s.K;
      const int n = reps > 0 ? reps : std::max(5, static_cast<int>(std::min(2000.0, 3e9 / flops)));
      std::vector<BlockQ8_1> xq(static_cast<size_t>(s.M * s.K / 32));
      std::vector<double> ts, read_gbs, ratio;
      const bool paired = cold && s.M == 1;
      for (int i = -2; i < n; ++i) {
        const WeightMatrix wm{t, s.N, s.K, W[static_cast<size_t>((i + 2) % copies)].data(), rb};
        const auto t0 = std::chrono::steady_clock::now();
        if (q8) {
          quantize_rows_q8_1(x.data(), s.M, s.K, xq.data(), s.K, pool);
          matmul_q8(packed[static_cast<size_t>((i + 2) % copies)].matrix, xq.data(), s.M, s.K / 32, y.data(), s.N, pool);
        } else {
          matmul(use_panels ? packed[static_cast<size_t>((i + 2) % copies)].matrix : wm, x.data(), s.M, s.K, y.data(), s.N, pool);
        }
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 0) ts.push_back(dt);
        if (paired) {
          const auto [rt, rbytes] = paired_read(wbytes);
          if (i >= 0 && rt > 0) {
            read_gbs.push_back(rbytes / rt * 1e-9);
            ratio.push_back(wbytes / dt * 1e-9 / read_gbs.back());
          }
        }
      }
      const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? -1.0 : v[v.size() / 2];
      };
      std::sort(ts.begin(), ts.end());
      const double med = ts[ts.size() / 2];
      std::printf("{\"engine\":\"tessera\",\"type\":\"%s\",\"M\":%lld,\"N\":%lld,\"K\":%lld,\"threads\":%d,\"cold_cache\":%s,"
                  "\"l3\":%s,\"act\":\"%s\",\"reps\":%d,\"median_ms\":%.6f,\"min_ms\":%.6f,\"gflops\":%.3f,\"weight_gbs\":%.3f,"
                  "\"weight_bytes\":%zu,\"frac_compute\":%.3f,\"frac_dram\":%.3f,\"dram_gbs_paired\":%.3f,"
                  "\"frac_dram_paired\":%.3f}\n",
                  dtype_name(t), static_cast<long long>(s.M), static_cast<long long>(s.N), static_cast<long long>(s.K), threads,
                  cold && s.M == 1 ? "true" : "false", l3 && s.M == 1 ? "true" : "false", q8 ? "q8_1 (quantized in the timed region)" : use_panels ? "f32, decode panels" : "f32 (no conversion)", n, med * 1e3, ts[0] * 1e3, flops / med * 1e-9, wbytes / med * 1e-9, wbytes,
                  compute_peak > 0 ? flops / med * 1e-9 / compute_peak : -1.0,
                  cold && s.M == 1 && dram_peak > 0 ? wbytes / med * 1e-9 / dram_peak : -1.0, median(read_gbs),
                  median(ratio));
      std::fflush(stdout);
    }
  }
  return 0;
}
