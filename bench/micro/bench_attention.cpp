// Fused attention on a vision tile beside the encoder GEMM, in one run: the target is
// attention at >= 50% of the matmul rate. Shapes: SigLIP on a 512x512 tile (1024 tokens, 12
// heads x 64, bidirectional, f32 K/V) and its 1024x768x768 attention projection (f32 weights).
// Rounds alternate the two kernels; each line is one kernel's median over the rounds, and the
// last line the median of the per-round ratios (attention GFLOP/s over GEMM GFLOP/s).
//   build-bench/bench/micro/bench_attention [-t THREADS] [--rounds N] [--kv f32|f16|bf16|i8]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"

using namespace tessera;

namespace {

double seconds_of(const std::function<void()>& f, int reps) {
  std::vector<double> ts;
  for (int i = -1; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 0) ts.push_back(dt);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, rounds = 7;
  DType kv_type = DType::F32;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-t") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--kv") && i + 1 < argc) {
      const std::string k = argv[++i];
      kv_type = k == "f16" ? DType::F16 : k == "bf16" ? DType::BF16 : k == "i8" ? DType::I8 : DType::F32;
    } else {
      fail("bench_attention: unknown argument '%s' (use -t N, --rounds N, --kv f32|f16|bf16|i8)", argv[i]);
    }
  }
  if (threads < 1 || rounds < 1) fail("bench_attention: -t and --rounds must be positive");
  ThreadPool pool(threads);
  constexpr int kTokens = 1024, kHeads = 12, kHeadDim = 64, kWidth = kHeads * kHeadDim;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(kTokens) * kWidth), kf(q.size()), vf(q.size()), out(q.size());
  for (auto* v : {&q, &kf, &vf})
    for (auto& e : *v) e = nd(rng);
  // the cache in the chosen K/V type: position p, head h at p * pos_stride + h * head_stride
  const size_t row = kv_row_bytes(kv_type, kHeadDim);
  std::vector<uint8_t> kc(row * kHeads * kTokens), vc(kc.size());
  for (int p = 0; p < kTokens; ++p)
    for (int h = 0; h < kHeads; ++h) {
      const size_t off = (static_cast<size_t>(p) * kHeads + h) * row;
      kv_store_row(kv_type, &kf[static_cast<size_t>(p) * kWidth + h * kHeadDim], kHeadDim, kc.data() + off);
      kv_store_row(kv_type, &vf[static_cast<size_t>(p) * kWidth + h * kHeadDim], kHeadDim, vc.data() + off);
    }
  const KvView view{kc.data(), vc.data(), kv_type, static_cast<int64_t>(row * kHeads), static_cast<int64_t>(row)};
  AttentionShape s;
  s.n_head = s.n_head_kv = kHeads;
  s.head_dim = kHeadDim;
  s.scale = 0.125f;
  s.causal = false;
  s.n_kv = kTokens;
  // the projection GEMM: y = x W^T with W 768 x 768 f32
  std::vector<float> w(static_cast<size_t>(kWidth) * kWidth), y(q.size());
  for (auto& e : w) e = nd(rng) * 0.03f;
  const WeightMatrix wm{DType::F32, kWidth, kWidth, reinterpret_cast<const uint8_t*>(w.data()), kWidth * sizeof(float)};
  const double attn_flops = 4.0 * kTokens * kTokens * kWidth;  // QK^T and PV
  const double gemm_flops = 2.0 * kTokens * kWidth * kWidth;
  std::vector<double> a_rate, g_rate, ratio;
  for (int r = 0; r < rounds; ++r) {
    const double ta = seconds_of([&] { flash_attention(s, q.data(), kTokens, kWidth, view, out.data(), kWidth, pool); }, 3);
    const double tg = seconds_of([&] { gemm(wm, q.data(), kTokens, kWidth, y.data(), kWidth, pool); }, 3);
    a_rate.push_back(attn_flops / ta * 1e-9);
    g_rate.push_back(gemm_flops / tg * 1e-9);
    ratio.push_back(a_rate.back() / g_rate.back());
  }
  std::printf("{\"kernel\":\"flash_attention\",\"shape\":\"1024 tokens x 12 heads x 64, bidirectional\",\"kv\":\"%s\","
              "\"threads\":%d,\"gflops\":%.1f}\n", dtype_name(kv_type), threads, median(a_rate));
  std::printf("{\"kernel\":\"gemm\",\"shape\":\"1024x768x768 f32\",\"threads\":%d,\"gflops\":%.1f}\n", threads, median(g_rate));
  std::printf("{\"attention_over_gemm\":%.3f,\"rounds\":%d,\"threads\":%d}\n", median(ratio), rounds, threads);
  return 0;
}
