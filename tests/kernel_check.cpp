// Standalone cross-ISA kernel check (no GoogleTest, no image or JSON libraries), so it can be
// cross-compiled and run under qemu-user: the active ISA's matmul (also over decode panels), encoder GEMM, 8-bit-activation
// matmul and fused attention must equal the scalar twin bit for bit (matmul also within the
// documented float64 tolerance), GELU and softmax within theirs of float64, over shape, type and
// head-dim sweeps. Prints "N passed, N failed".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/cpu.h"
#include "kernel_cases.h"
#include "kernels/attention.h"
#include "kernels/attention_f16.h"
#include "kernels/bf16_tiles.h"
#include "kernels/decode_panels.h"
#include "kernels/elementwise.h"
#include "kernels/f16_tiles.h"
#include "kernels/gemm_panels.h"
#include "kernels/q8_panels.h"
#include "kernels/quantize.h"

using namespace tessera;
using namespace tessera::test;

int main() {
  int passed = 0, failed = 0;
  ThreadPool pool(2);
  std::printf("kernel_check: active ISA %s (detected %s)\n", isa_name(active_isa()), isa_name(detected_isa()));
#if defined(TESSERA_HAVE_SME)
  if (cpu_features().sme)
    std::printf("kernel_check: encoder GEMM on SME (streaming vectors of %llu floats)\n",
                static_cast<unsigned long long>(neon::sme_vector_words()));
#endif
  for (const Case& c : cases()) {
    for (int64_t K : c.ks) {
      for (int64_t N : {1, 3, 8, 13}) {
        const RandomMatrix W = make_matrix(c.type, N, K, static_cast<uint32_t>(K * 131 + N));
        for (int64_t M : {1, 2, 5}) {
          const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M + 7 * K));
          std::vector<float> y_ref(static_cast<size_t>(M * N)), y(y_ref.size());
          ref::matmul_rows(W.w, 0, N, x.data(), M, K, y_ref.data(), N);
          matmul(W.w, x.data(), M, K, y.data(), N, pool);
          bool ok = std::memcmp(y.data(), y_ref.data(), y.size() * 4) == 0;
          for (int64_t t = 0; t < M && ok; ++t)
            for (int64_t r = 0; r < N && ok; ++r) {
              double mag;
              const double want = exact_dot(W, x, r, t, &mag);
              ok = std::fabs(y[static_cast<size_t>(t * N + r)] - want) <= 4e-7 * std::sqrt(static_cast<double>(K)) * mag + 1e-30;
            }
          if (ok) {
            ++passed;
          } else {
            ++failed;
            std::printf("FAIL %s K=%lld N=%lld M=%lld\n", dtype_name(c.type), static_cast<long long>(K), static_cast<long long>(N),
                        static_cast<long long>(M));
          }
        }
      }
    }
  }
  auto check = [&](bool ok, const char* what, DType t, long long a, long long b) {
    if (ok) {
      ++passed;
    } else {
      ++failed;
      std::printf("FAIL %s %s %lld %lld\n", what, dtype_name(t), a, b);
    }
  };
  // the decode kernel (one token, several) over decode panels: the scalar twin's bits on the GGUF rows
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::A4G64, DType::Q6_K}) {
    const int64_t K = t == DType::Q6_K ? 768 : 576;
    const RandomMatrix W = make_matrix(t, 48, K, static_cast<uint32_t>(K + 11));
    const PackedWeights P = pack_decode_panels(W.w);
    for (int64_t M : {1, 3}) {
      const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M + 5));
      std::vector<float> y_ref(static_cast<size_t>(M * 48)), y(y_ref.size(), -1.0f);
      ref::matmul_rows(W.w, 0, 48, x.data(), M, K, y_ref.data(), 48);
      matmul(P.matrix, x.data(), M, K, y.data(), 48, pool);
      check(std::memcmp(y.data(), y_ref.data(), y.size() * 4) == 0, "decode panels", t, K, M);
    }
  }
  for (const Case& c : cases()) {  // encoder GEMM: one FMA chain per output
    for (int64_t K : {c.ks.front(), c.ks.back()}) {
      const RandomMatrix W = make_matrix(c.type, 45, K, static_cast<uint32_t>(K + 3));
      for (int64_t M : {1, 7, 13, 37}) {  // 37: several of SME's token blocks, the last partial
        const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M + K));
        std::vector<float> y_ref(static_cast<size_t>(M * 45)), y(y_ref.size());
        ref::gemm_rows(W.w, 0, 45, x.data(), M, K, y_ref.data(), 45);
        gemm(W.w, x.data(), M, K, y.data(), 45, pool);
        check(std::memcmp(y.data(), y_ref.data(), y.size() * 4) == 0, "gemm", c.type, K, M);
        if (supports_gemm_panels(c.type)) {  // on weights repacked at load
          const PackedWeights P = pack_gemm_panels(W.w);
          std::fill(y.begin(), y.end(), 0.0f);
          gemm(P.matrix, x.data(), M, K, y.data(), 45, pool);
          check(std::memcmp(y.data(), y_ref.data(), y.size() * 4) == 0, "gemm panels", c.type, K, M);
        }
      }
    }
  }
  for (int64_t n : {1, 16, 37, 1031}) {  // SwiGLU: bitwise the scalar twin
    std::vector<float> g = random_x(1, n, static_cast<uint32_t>(n)), u = random_x(1, n, static_cast<uint32_t>(n + 1));
    for (auto& v : g) v *= 20.0f;
    std::vector<float> want = g, got = g;
    ref::swiglu(want.data(), u.data(), n);
    swiglu(got.data(), u.data(), n);
    check(std::memcmp(want.data(), got.data(), got.size() * 4) == 0, "swiglu", DType::F32, n, 0);
  }
  {  // the fp16 store: bitwise the scalar twin on every upper half-word with tie patterns below
    std::vector<float> x;
    for (uint32_t hi = 0; hi < 65536; ++hi)
      for (uint32_t lo : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x3000u, 0xffffu}) {
        const uint32_t b = hi << 16 | lo;
        float f;
        std::memcpy(&f, &b, 4);
        x.push_back(f);
      }
    for (int64_t step : {1, 16}) {
      const int64_t len = step == 1 ? static_cast<int64_t>(x.size()) : 1031;
      std::vector<uint16_t> want(static_cast<size_t>(len * step), 0xabcd), got = want;
      ref::store_f16(x.data(), len, want.data(), step);
      store_f16(x.data(), len, got.data(), step);
      check(want == got, "store_f16", DType::F16, len, step);
    }
  }
  {  // the fp16 widening, every half pattern (signalling NaNs come back quiet in both)
    std::vector<uint16_t> h(65536 + 7);
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i);
    std::vector<float> want(h.size()), got(h.size());
    ref::load_f16(h.data(), static_cast<int64_t>(h.size()), want.data());
    load_f16(h.data(), static_cast<int64_t>(h.size()), got.data());
    check(std::memcmp(want.data(), got.data(), want.size() * 4) == 0, "load_f16", DType::F16, static_cast<long long>(h.size()), 0);
  }
  for (int64_t nb : {1, 3, 17, 24}) {  // Q8_0 weights: ties away from zero, zero, denormal, NaN and infinite blocks
    const int64_t K = 32 * nb;
    std::vector<float> x = random_x(1, K, static_cast<uint32_t>(K + 7));
    for (int64_t i = 0; i < K; ++i) {
      const int64_t b = i / 32, j = i % 32;
      float& v = x[static_cast<size_t>(i)];
      if (b % 6 == 1) v = 0.0f;
      if (b % 6 == 2) v = j == 0 ? 254.0f : static_cast<float>(2 * (j - 16) + 1);
      if (b % 6 == 3) v = j % 3 == 0 ? 1e-40f : v * 1e-39f;
      if (b % 6 == 4 && j == 5) v = std::nanf("");
      if (b % 6 == 5 && j == 9) v = -INFINITY;
    }
    std::vector<uint8_t> want(static_cast<size_t>(34 * nb)), got(want.size(), 0xab);
    ref::quantize_row_q8_0(x.data(), K, want.data());
    quantize_row(DType::Q8_0, x.data(), K, got.data());
    check(want == got, "quantize_row_q8_0", DType::Q8_0, K, 0);
  }
  {  // GELU-tanh against float64 on a dense grid, softmax rows against float64 (docs/numerics.md)
    std::vector<float> v(200'001);
    for (size_t i = 0; i < v.size(); ++i) v[i] = -20.0f + 40.0f * static_cast<float>(i) / 200'000.0f;
    std::vector<float> g = v;
    gelu_tanh(g.data(), static_cast<int64_t>(g.size()));
    double worst = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const double x = v[i], want = 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
      worst = std::max(worst, std::fabs(g[i] - want) / std::max(1.0, std::fabs(want)));
    }
    check(worst <= 2e-7, "gelu_tanh", DType::F32, static_cast<long long>(v.size()), 0);
    for (int64_t n : {1, 15, 16, 17, 100, 1024}) {
      std::vector<float> x = random_x(1, n, static_cast<uint32_t>(n + 9));
      for (auto& e : x) e *= 16.0f;
      std::vector<float> y = x;
      softmax_row(y.data(), n, 0.125f);
      double mx = -INFINITY, sum = 0;
      for (float e : x) mx = std::max(mx, 0.125 * e);
      for (float e : x) sum += std::exp(0.125 * e - mx);
      bool ok = true;
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(0.125 * x[static_cast<size_t>(i)] - mx) / sum;
        ok = ok && std::fabs(y[static_cast<size_t>(i)] - want) <= 2e-6 * want;
      }
      check(ok, "softmax_row", DType::F32, n, 0);
    }
  }
  for (int64_t n : {1, 7, 9, 17, 576, 1031}) {  // RMS and Layer norms (+ residual add): bitwise the scalar twins
    std::vector<float> x = random_x(1, n, static_cast<uint32_t>(n + 2)), d = random_x(1, n, static_cast<uint32_t>(n + 3)),
                       w = random_x(1, n, static_cast<uint32_t>(n + 4)), b = random_x(1, n, static_cast<uint32_t>(n + 5));
    for (auto& v : x) v = 40.0f * v + 100.0f;
    std::vector<float> want(x.size()), got(x.size()), xw = x, xg = x;
    ref::layer_norm(x.data(), w.data(), b.data(), want.data(), n, 1e-6f);
    layer_norm(x.data(), w.data(), b.data(), got.data(), n, 1e-6f);
    check(std::memcmp(want.data(), got.data(), got.size() * 4) == 0, "layer_norm", DType::F32, n, 0);
    ref::add_layer_norm(xw.data(), d.data(), w.data(), b.data(), want.data(), n, 1e-6f);
    add_layer_norm(xg.data(), d.data(), w.data(), b.data(), got.data(), n, 1e-6f);
    check(std::memcmp(want.data(), got.data(), got.size() * 4) == 0 && std::memcmp(xw.data(), xg.data(), xg.size() * 4) == 0,
          "add_layer_norm", DType::F32, n, 0);
    ref::rms_norm(x.data(), w.data(), want.data(), n, 1e-5f);
    rms_norm(x.data(), w.data(), got.data(), n, 1e-5f);
    check(std::memcmp(want.data(), got.data(), got.size() * 4) == 0, "rms_norm", DType::F32, n, 0);
    xw = x, xg = x;
    ref::add_rms_norm(xw.data(), d.data(), w.data(), want.data(), n, 1e-5f);
    add_rms_norm(xg.data(), d.data(), w.data(), got.data(), n, 1e-5f);
    check(std::memcmp(want.data(), got.data(), got.size() * 4) == 0 && std::memcmp(xw.data(), xg.data(), xg.size() * 4) == 0,
          "add_rms_norm", DType::F32, n, 0);
  }
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::A4G64, DType::Q5_0, DType::Q5_1, DType::Q5_K,
                  DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::Q3_K, DType::Q2_K}) {  // 8-bit activations (W4A8/W8A8)
    for (int64_t K : {32, 256, 576, 1536}) {
      if (K % info(t).block_elems) continue;
      const RandomMatrix W = make_matrix(t, 37, K, static_cast<uint32_t>(K + 5));
      const PackedWeights P = pack_q8_panels(W.w);
      for (int64_t M : {1, 3}) {
        const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M * 3 + K));
        std::vector<BlockQ8_1> xq(static_cast<size_t>(M * K / 32));
        for (int64_t i = 0; i < M; ++i) quantize_row_q8_1(x.data() + i * K, xq.data() + i * K / 32, K);
        std::vector<float> y_ref(static_cast<size_t>(M * 37)), y(y_ref.size());
        ref::matmul_q8_rows(W.w, 0, 37, xq.data(), M, K / 32, y_ref.data(), 37);
        matmul_q8(P.matrix, xq.data(), M, K / 32, y.data(), 37, pool);
        check(std::memcmp(y.data(), y_ref.data(), y.size() * 4) == 0, "matmul_q8", t, K, M);
      }
    }
  }
  for (DType kv : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::Q4_0}) {  // fused attention
    for (int hd : {64, 72, 80, 128, 256}) {  // 256: Gemma 3
      if (kv == DType::Q4_0 && hd % 32 != 0) continue;  // q4 needs whole 32-element blocks
      for (int64_t n_kv : {5, 300, 700})
      for (int64_t n_q : {int64_t{1}, int64_t{4}, int64_t{40}}) {  // rows per kv head: 3 (keys in lanes), 12, 120
        const int n_head_kv = 2, n_head = 6;
        const size_t row = kv_row_bytes(kv, hd), tile = kv_tile_bytes(kv, hd);
        std::vector<uint8_t> k(row * n_head_kv * n_kv), v(k.size()), kt(tile * n_head_kv * static_cast<size_t>((n_kv + 15) / 16));
        const std::vector<float> src = random_x(2 * n_kv * n_head_kv, hd, static_cast<uint32_t>(hd + n_kv));
        for (int64_t p = 0; p < n_kv * n_head_kv; ++p) {
          kv_store_row(kv, src.data() + p * hd, hd, k.data() + p * row);
          kv_store_k_at(kv, src.data() + p * hd, hd, kt.data() + p % n_head_kv * tile, n_head_kv * tile, p / n_head_kv);
          kv_store_row(kv, src.data() + (n_kv * n_head_kv + p) * hd, hd, v.data() + p * row);
        }
        const int64_t width = static_cast<int64_t>(n_head) * hd;
        const std::vector<float> q = random_x(n_q, width, 9);
        AttentionShape s;
        s.n_head = n_head;
        s.n_head_kv = n_head_kv;
        s.head_dim = hd;
        s.scale = 0.1f;
        s.q_pos0 = std::max<int64_t>(0, n_kv - n_q);
        s.n_kv = n_kv;
        const KvView view{k.data(), v.data(), kv, static_cast<int64_t>(row * n_head_kv), static_cast<int64_t>(row)};
        KvView tiled = view;  // K in tiles of 16 positions: the same values
        tiled.k = kt.data();
        tiled.k_tiles = true;
        tiled.k_tile_stride = static_cast<int64_t>(tile * n_head_kv);
        tiled.k_head_stride = static_cast<int64_t>(tile);
        std::vector<float> a(static_cast<size_t>(n_q * width)), b(a.size()), c(a.size());
        flash_attention(s, q.data(), n_q, width, view, a.data(), width, pool);
        flash_attention(s, q.data(), n_q, width, tiled, c.data(), width, pool);
        const Isa before = active_isa();
        set_isa_cap(Isa::Scalar);
        flash_attention(s, q.data(), n_q, width, view, b.data(), width, pool);
        set_isa_cap(before);
        check(std::memcmp(a.data(), b.data(), a.size() * 4) == 0, "attention", kv, hd, n_kv);
        check(std::memcmp(c.data(), b.data(), c.size() * 4) == 0, "attention (K tiles)", kv, hd, n_kv);
      }
    }
  }
  // the fp16 GEMM (AVX512-FP16 or NEON FP16 where present) against its scalar twin, and the fp16
  // attention at this level against the scalar level's
  if (f16_gemm_available()) std::printf("kernel_check: fp16 GEMM and attention in SIMD\n");
  for (DType t : {DType::F32, DType::F16})
    for (int64_t K : {16, 37, 200, 576})
      for (int64_t N : {1, 17, 40}) {
        const RandomMatrix W = make_matrix(t, N, K, static_cast<uint32_t>(3 * K + N));
        const PackedWeights P = pack_f16_tiles(W.w);
        const std::vector<float> bias = random_x(1, N, 3);
        for (int64_t M : {1, 5, 19}) {
          const std::vector<float> x = random_x(M, K, static_cast<uint32_t>(M + K));
          const int64_t kp = bf16_padded_k(K);
          std::vector<uint16_t> xh(static_cast<size_t>(bf16_act_elems(M, K)), 0);
          round_rows_f16(x.data(), 0, M, K, K, xh.data(), kp);
          std::vector<float> y_ref(static_cast<size_t>(M * N)), y(y_ref.size());
          ref::gemm_f16_rows(P.matrix, 0, N, xh.data(), M, kp, y_ref.data(), N, bias.data());
          gemm_f16(P.matrix, x.data(), M, K, y.data(), N, pool, bias.data());
          check(std::memcmp(y.data(), y_ref.data(), y.size() * 4) == 0, "gemm_f16", t, K, M);
        }
      }
  for (int hd : {40, 64})
    for (int64_t n_kv : {7, 130}) {
      AttentionShape s;
      s.n_head = 4, s.n_head_kv = 2, s.head_dim = hd, s.causal = false, s.n_kv = n_kv, s.scale = 0.125f;
      const int64_t n_q = 37, width = 4 * hd, kvw = 2 * hd;
      const std::vector<float> q = random_x(n_q, width, 11), k = random_x(n_kv, kvw, 12), v = random_x(n_kv, kvw, 13);
      std::vector<float> a(static_cast<size_t>(n_q * width)), b(a.size());
      attention_f16(s, q.data(), n_q, width, k.data(), v.data(), kvw, a.data(), width, pool);
      const Isa before = active_isa();
      set_isa_cap(Isa::Scalar);
      attention_f16(s, q.data(), n_q, width, k.data(), v.data(), kvw, b.data(), width, pool);
      set_isa_cap(before);
      check(std::memcmp(a.data(), b.data(), a.size() * 4) == 0, "attention_f16", DType::F16, hd, n_kv);
    }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
