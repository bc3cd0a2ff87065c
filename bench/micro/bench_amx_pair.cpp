// Paired, phase-matched comparison of tessera's bf16 GEMM on AMX with oneDNN's bf16 matmul.
//
// Why not Google Benchmark: on the shared VMs this project runs on, AMX throughput flips every
// few seconds between a fast and a slow phase about 4× apart (docs/measurements.md), so two
// benchmarks run a few seconds apart measure the phase, not the kernels. Here every round runs
// each contender once, back to back (a few ms each, order rotated per round), framed by two phase
// meters: the probe's bare 2×2 tile loop (no loads: the peak) and the same loop loading its two A
// and two B tiles from L1 every step (the ceiling of any kernel shaped like ours or oneDNN's).
// Reported per shape and thread count: median time per contender, the median of the per-round
// oneDNN/contender time ratios, and each contender's rate as a fraction of each meter's rate in
// the same round.
//
// Contenders:
//   tessera      gemm_bf16 on fp32 x (rounded to bf16 inside the call)
//   tessera_k    gemm_bf16_rounded on x already rounded, as the vision encoder now runs its GEMMs
//                (its producers write bf16) and as oneDNN's timing covers
//   onednn       oneDNN matmul, bf16 src and weights (weights reordered to its blocked layout
//                before timing), f32 dst
//
// Usage: bench_amx_pair [rounds (default 40)] [threads list, e.g. 1,2 (default 1,2)]
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

#include "core/thread_pool.h"
#include "kernels/bf16_tiles.h"
#include "kernels/kernels.h"
#include "random_floats.h"
#include "kernels/x86/amx_tile_config.h"

namespace tessera::probe_x86 {
double amx_bf16_loop(int64_t iters);  // src/profile/probe_x86.cpp: FLOPs done
}

namespace {

using namespace tessera;
using Clock = std::chrono::steady_clock;

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Shape {
  int64_t M, N, K;
  const char* what;
};
// SigLIP-B/16 on a 512 tile (1024 patches): q/k/v/o, fc1, fc2.
const Shape kShapes[] = {{1024, 768, 768, "qkvo"}, {1024, 3072, 768, "fc1"}, {1024, 768, 3072, "fc2"}};

// The ceiling a 2×2 tile kernel can reach: the probe's loop, but every step loads its two A and
// two B tiles (from a 4 KiB buffer that stays in L1), as a GEMM's inner loop must. FLOPs done.
double amx_loop_with_loads(int64_t iters) {
  alignas(64) static uint16_t buf[4][512] = {};
  _tile_loadconfig(&kFullTiles);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_loadd(4, buf[0], 64);
    _tile_loadd(6, buf[1], 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(7, buf[2], 64);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, buf[3], 64);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[256];  // per thread: both threads run the meter at once
  _tile_stored(0, out, 64);
  _tile_release();
  return static_cast<double>(iters) * 4 * 16 * 16 * 32 * 2;
}

struct Contender {
  std::string name;
  std::function<void()> call;
  std::vector<double> secs;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 40;
  std::vector<int> thread_list{1, 2};
  if (argc > 2) {
    thread_list.clear();
    std::stringstream ss(argv[2]);
    for (std::string tok; std::getline(ss, tok, ',');) thread_list.push_back(std::atoi(tok.c_str()));
  }
  const bool bad_threads = std::any_of(thread_list.begin(), thread_list.end(), [](int t) { return t < 1 || t > 1024; });
  if (rounds < 1 || thread_list.empty() || bad_threads) {
    std::fprintf(stderr, "bench_amx_pair: usage: bench_amx_pair [rounds >= 1] [threads, e.g. 1,2]\n");
    return 2;
  }
  if (!bf16_gemm_available()) {
    std::fprintf(stderr, "bench_amx_pair: no AMX bf16 on this CPU (or the OS did not grant it)\n");
    return 1;
  }
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);

  std::printf("| shape | M×N×K | threads | contender | ms | GFLOP/s | speed-up vs oneDNN | of bare tile loop | of tile loop with loads |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : kShapes) {
    // weights: fp32 N×K, packed for tessera; the same values as bf16 for oneDNN
    const std::vector<float> wf = random_floats(static_cast<size_t>(s.N * s.K), 99);
    const std::vector<float> xf = random_floats(static_cast<size_t>(s.M * s.K), 7);
    WeightMatrix wsrc{};
    wsrc.type = DType::F32;
    wsrc.rows = s.N;
    wsrc.cols = s.K;
    wsrc.row_stride = s.K * 4;
    wsrc.data = reinterpret_cast<const uint8_t*>(wf.data());
    const PackedWeights packed = pack_bf16_tiles(wsrc);
    const WeightMatrix& wm = packed.matrix;
    const int64_t kp = bf16_padded_k(s.K);
    std::vector<uint16_t> xb(static_cast<size_t>(bf16_act_elems(s.M, s.K)), 0);
    round_rows_bf16(xf.data(), 0, s.M, s.K, s.K, xb.data(), kp);
    std::vector<float> y(static_cast<size_t>(s.M * s.N)), yk(y.size());

    dnnl::memory::desc src_md({s.M, s.K}, dt::bf16, tag::ab);
    dnnl::memory::desc wei_any({s.K, s.N}, dt::bf16, tag::any);
    dnnl::memory::desc dst_md({s.M, s.N}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), eng);
    dnnl::memory w_f32({{s.K, s.N}, dt::f32, tag::ba}, eng, const_cast<float*>(wf.data()));
    dnnl::memory x_f32({{s.M, s.K}, dt::f32, tag::ab}, eng, const_cast<float*>(xf.data()));
    dnnl::memory w_mem(pd.weights_desc(), eng), x_mem(src_md, eng), y_mem(dst_md, eng);
    dnnl::reorder(w_f32, w_mem).execute(strm, w_f32, w_mem);
    dnnl::reorder(x_f32, x_mem).execute(strm, x_f32, x_mem);
    strm.wait();
    dnnl::matmul prim(pd);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, x_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, y_mem}};
    const std::string impl = pd.impl_info_str();

    for (int threads : thread_list) {
      ThreadPool pool(threads);
      omp_set_num_threads(threads);
      std::vector<Contender> cs;
      cs.push_back({"tessera", [&] { gemm_bf16(wm, xf.data(), s.M, s.K, y.data(), s.N, pool); }, {}});
      cs.push_back({"tessera_k", [&] { gemm_bf16_rounded(wm, xb.data(), s.M, yk.data(), s.N, pool); }, {}});
      cs.push_back({"onednn", [&] { prim.execute(strm, args); strm.wait(); }, {}});
      const size_t onednn = cs.size() - 1;
      // phase meters, on every thread, each sized to ~1 ms in the fast phase
      auto meter = [&](double (*loop)(int64_t), int64_t iters) {
        const double t0 = now_s();
        double flop = 0;
        pool.parallel_for(threads, 1, [&](int64_t a, int64_t b) {
          for (int64_t i = a; i < b; ++i) {
            const double f = loop(iters);
            if (i == 0) flop = f;
          }
        });
        return flop * threads / (now_s() - t0) / 1e9;
      };
      for (auto& c : cs) c.call();  // warm-up (and oneDNN's JIT)
      meter(probe_x86::amx_bf16_loop, 120'000);
      std::vector<double> bare, loads;
      std::vector<std::vector<double>> of_bare(cs.size()), of_loads(cs.size()), vs_dnnl(cs.size());
      for (int r = 0; r < rounds; ++r) {
        const double b0 = meter(probe_x86::amx_bf16_loop, 120'000), l0 = meter(amx_loop_with_loads, 60'000);
        for (size_t j = 0; j < cs.size(); ++j) {
          Contender& c = cs[(j + r) % cs.size()];
          const double t0 = now_s();
          c.call();
          c.secs.push_back(now_s() - t0);
        }
        const double b1 = meter(probe_x86::amx_bf16_loop, 120'000), l1 = meter(amx_loop_with_loads, 60'000);
        bare.push_back(0.5 * (b0 + b1));
        loads.push_back(0.5 * (l0 + l1));
        for (size_t j = 0; j < cs.size(); ++j) {
          const double rate = 2.0 * s.M * s.N * s.K / cs[j].secs.back() / 1e9;
          of_bare[j].push_back(rate / bare.back());
          of_loads[j].push_back(rate / loads.back());
          vs_dnnl[j].push_back(cs[onednn].secs.back() / cs[j].secs.back());
        }
      }
      for (size_t j = 0; j < cs.size(); ++j)
        std::printf("| %s | %lld×%lld×%lld | %d | %s | %.2f | %.0f | %.2f× | %.0f%% | %.0f%% |\n", s.what,
                    static_cast<long long>(s.M), static_cast<long long>(s.N), static_cast<long long>(s.K), threads,
                    cs[j].name.c_str(), 1e3 * median(cs[j].secs), 2.0 * s.M * s.N * s.K / median(cs[j].secs) / 1e9,
                    median(vs_dnnl[j]), 100 * median(of_bare[j]), 100 * median(of_loads[j]));
      std::printf("| %s | | %d | tile loop: bare %.0f GFLOP/s, with loads %.0f (medians) | | | | | |\n", s.what, threads,
                  median(bare), median(loads));
      std::fflush(stdout);
    }
    std::fprintf(stderr, "(%s: oneDNN implementation %s)\n", s.what, impl.c_str());
  }
  return 0;
}
