// Fused attention on a vision tile beside the encoder GEMM, in one run: the target is
// attention at >= 50% of the matmul rate. Shapes: SigLIP on a 512x512 tile (1024 tokens, 12
// heads x 64, bidirectional, f32 K/V) and its 1024x768x768 attention projection (f32 weights).
// Rounds alternate the two kernels; each line is one kernel's median over the rounds, and the
// last line the median of the per-round ratios (attention GFLOP/s over GEMM GFLOP/s).
// --decode N: instead, one decode step of SmolLM2 (9 heads over 3 kv heads x 64, causal) over N
// cached positions, K in rows (rows-in-lanes kernel) vs K in tiles of 16 positions (keys in
// lanes), alternating; microseconds per call and the median ratio rows / tiles.
// --prefill N [--past P]: a short prompt's causal prefill in SmolLM2's shape, N tokens after P
// cached, K in tiles as a session holds it; microseconds per call (median over the rounds) and
// GFLOP/s over the causal pairs.
//   build-bench/bench/micro/bench_attention [-t THREADS] [--rounds N] [--kv f32|f16|bf16|i8|q4]
//                                           [--decode N [--layers L] | --prefill N [--past P]]
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

// One decode step, K rows vs K tiles (same values), alternating rounds; each kv head's positions
// contiguous, as the session keeps them (runtime/session.h). With layers > 1 each
// call reads the next of that many copies of the cache, as a model's layers do: enough copies
// (64 at 512 positions: 25 MB) and the K/V come from L3, as in SmolLM2's decode, instead of L2.
int bench_decode(int n_kv, DType kv_type, int threads, int rounds, int layers) {
  ThreadPool pool(threads);
  constexpr int kHeads = 9, kKvHeads = 3, kHeadDim = 64, kWidth = kHeads * kHeadDim;
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t row = kv_row_bytes(kv_type, kHeadDim), tile = kv_tile_bytes(kv_type, kHeadDim);
  const size_t n_tiles = (static_cast<size_t>(n_kv) + 15) / 16;
  const size_t kr_bytes = row * kKvHeads * n_kv, kt_bytes = tile * kKvHeads * n_tiles;
  std::vector<uint8_t> kr(kr_bytes * layers), kt(kt_bytes * layers), vc(kr.size());
  std::vector<float> x(kHeadDim), q(kWidth), out(kWidth);
  for (auto& e : q) e = nd(rng);
  for (int l = 0; l < layers; ++l)
    for (int p = 0; p < n_kv; ++p)
      for (int g = 0; g < kKvHeads; ++g) {
        for (auto& e : x) e = nd(rng);
        kv_store_row(kv_type, x.data(), kHeadDim, kr.data() + l * kr_bytes + (static_cast<size_t>(g) * n_kv + p) * row);
        kv_store_k_at(kv_type, x.data(), kHeadDim, kt.data() + l * kt_bytes + g * n_tiles * tile, tile, p);
        for (auto& e : x) e = nd(rng);
        kv_store_row(kv_type, x.data(), kHeadDim, vc.data() + l * kr_bytes + (static_cast<size_t>(g) * n_kv + p) * row);
      }
  const auto view = [&](bool tiled, int l) {
    KvView v{kr.data() + l * kr_bytes, vc.data() + l * kr_bytes, kv_type, static_cast<int64_t>(row), static_cast<int64_t>(row) * n_kv};
    if (tiled) {
      v.k = kt.data() + l * kt_bytes;
      v.k_tiles = true;
      v.k_tile_stride = static_cast<int64_t>(tile);
      v.k_head_stride = static_cast<int64_t>(tile * n_tiles);
    }
    return v;
  };
  AttentionShape s;
  s.n_head = kHeads;
  s.n_head_kv = kKvHeads;
  s.head_dim = kHeadDim;
  s.scale = 0.125f;
  s.q_pos0 = n_kv - 1;
  s.n_kv = n_kv;
  int layer = 0;
  const auto step = [&](bool tiled) {
    flash_attention(s, q.data(), 1, kWidth, view(tiled, layer), out.data(), kWidth, pool);
    layer = (layer + 1) % layers;
  };
  // the workers running before the clock starts (a pool's first jobs can find them asleep)
  for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(50);) step(true);
  std::vector<double> t_rows, t_tiles, ratio;
  for (int r = 0; r < rounds; ++r) {
    t_rows.push_back(seconds_of([&] { step(false); }, 50));
    t_tiles.push_back(seconds_of([&] { step(true); }, 50));
    ratio.push_back(t_rows.back() / t_tiles.back());
  }
  std::printf("{\"kernel\":\"flash_attention decode\",\"shape\":\"1 token x 9 heads (3 kv) x 64 over %d positions\","
              "\"kv\":\"%s\",\"threads\":%d,\"layers\":%d,\"us_k_rows\":%.1f,\"us_k_tiles\":%.1f,\"rows_over_tiles\":%.2f,\"rounds\":%d}\n",
              n_kv, dtype_name(kv_type), threads, layers, median(t_rows) * 1e6, median(t_tiles) * 1e6, median(ratio), rounds);
  return 0;
}

// A causal prefill of n tokens after `past` cached ones, SmolLM2's shape, K in tiles.
int bench_prefill(int n, int past, DType kv_type, int threads, int rounds) {
  ThreadPool pool(threads);
  constexpr int kHeads = 9, kKvHeads = 3, kHeadDim = 64, kWidth = kHeads * kHeadDim;
  const int n_kv = past + n;
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t row = kv_row_bytes(kv_type, kHeadDim), tile = kv_tile_bytes(kv_type, kHeadDim);
  std::vector<uint8_t> kt(tile * kKvHeads * ((n_kv + 15) / 16)), vc(row * kKvHeads * n_kv);
  std::vector<float> x(kHeadDim), q(static_cast<size_t>(n) * kWidth), out(q.size());
  for (auto& e : q) e = nd(rng);
  for (int p = 0; p < n_kv; ++p)
    for (int g = 0; g < kKvHeads; ++g) {
      for (auto& e : x) e = nd(rng);
      kv_store_k_at(kv_type, x.data(), kHeadDim, kt.data() + g * tile, kKvHeads * tile, p);
      for (auto& e : x) e = nd(rng);
      kv_store_row(kv_type, x.data(), kHeadDim, vc.data() + (static_cast<size_t>(p) * kKvHeads + g) * row);
    }
  KvView v{nullptr, vc.data(), kv_type, static_cast<int64_t>(row * kKvHeads), static_cast<int64_t>(row)};
  v.k = kt.data();
  v.k_tiles = true;
  v.k_tile_stride = static_cast<int64_t>(tile * kKvHeads);
  v.k_head_stride = static_cast<int64_t>(tile);
  AttentionShape s;
  s.n_head = kHeads, s.n_head_kv = kKvHeads, s.head_dim = kHeadDim, s.scale = 0.125f, s.causal = true;
  s.q_pos0 = past, s.n_kv = n_kv;
  const auto call = [&] { flash_attention(s, q.data(), n, kWidth, v, out.data(), kWidth, pool); };
  for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(50);) call();
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) t.push_back(seconds_of(call, 20));
  const double pairs = static_cast<double>(n) * past + static_cast<double>(n) * (n + 1) / 2;
  std::printf("{\"kernel\":\"flash_attention prefill\",\"shape\":\"%d tokens after %d x 9 heads (3 kv) x 64, causal\",\"kv\":\"%s\","
              "\"threads\":%d,\"us\":%.1f,\"gflops\":%.1f,\"rounds\":%d}\n",
              n, past, dtype_name(kv_type), threads, median(t) * 1e6, 4.0 * pairs * kWidth / median(t) * 1e-9, rounds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, rounds = 7, decode = 0, layers = 1, prefill = 0, past = 0;
  DType kv_type = DType::F32;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-t") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--decode") && i + 1 < argc) decode = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--layers") && i + 1 < argc) layers = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--prefill") && i + 1 < argc) prefill = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--past") && i + 1 < argc) past = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--kv") && i + 1 < argc) {
      const std::string k = argv[++i];
      kv_type = k == "f16" ? DType::F16 : k == "bf16" ? DType::BF16 : k == "i8" ? DType::I8 : k == "q4" ? DType::Q4_0 : DType::F32;
    } else {
      fail("bench_attention: unknown argument '%s' (use -t N, --rounds N, --kv f32|f16|bf16|i8|q4, --decode N, --layers L, --prefill N, --past P)", argv[i]);
    }
  }
  if (threads < 1 || rounds < 1 || decode < 0 || layers < 1 || layers > 4096 || prefill < 0 || prefill > 65536 || past < 0 || past > 65536)
    fail("bench_attention: -t, --rounds, --decode, --layers, --prefill and --past must be positive (--layers at most 4096, "
         "--prefill and --past at most 65536)");
  if (decode > 0) return bench_decode(decode, kv_type, threads, rounds, layers);
  if (prefill > 0) return bench_prefill(prefill, past, kv_type, threads, rounds);
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
