// Qwen3-VL's resolution knob: one screenshot question at several max_pixels settings, each row's
// image tokens, vision encode and prefill times, and how far its next-token distribution moves
// from the first (largest) setting's (KL, same top token). Vision as the CLI runs it (bf16 where
// bf16_gemm_fast()), text model with default settings.
// Usage: bench_qwen3vl_pixels TEXT.gguf MMPROJ.gguf IMAGE THREADS PIXELS [PIXELS ...]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "image/image.h"
#include "kernels/bf16_tiles.h"
#include "models/qwen3vl/qwen3vl.h"
#include "runtime/session.h"

using namespace tessera;

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<double> log_softmax(const float* x, size_t n) {
  double m = -1e300, s = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
  for (size_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] - m - std::log(s);
  return out;
}
}  // namespace

int main(int argc, char** argv) try {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s TEXT.gguf MMPROJ.gguf IMAGE THREADS PIXELS [PIXELS ...]\n", argv[0]);
    return 2;
  }
  const auto text = LlamaModel::load(argv[1]);
  const auto vision = Qwen3VLVision::load_mmproj(argv[2]);
  if (bf16_gemm_fast()) vision->use_bf16_gemm();
  const ImageRGB image = load_image(argv[3]);
  SessionOptions so;
  so.n_threads = std::atoi(argv[4]);
  so.n_ctx = 16384;
  Qwen3VL vlm(*text, *vision);
  const size_t V = static_cast<size_t>(text->config().n_vocab);
  std::vector<double> ref;
  size_t ref_top = 0;
  std::printf("| max_pixels | grid (patches) | image tokens | vision encode ms | prefill ms | KL vs first | same top token |\n|---|---|---|---|---|---|---|\n");
  for (int a = 5; a < argc; ++a) {
    Session s(*text, so);
    const Qwen3VLPrompt ip = vlm.build(image, "What is the user doing?", s.pool(), std::atoll(argv[a]));
    const double t0 = now();
    s.eval(ip.tokens, ip.embeddings.data(), ip.embeddings.size() / static_cast<size_t>(text->config().n_embd_inp()), &ip.positions);
    const double prefill = now() - t0;
    const std::vector<double> lp = log_softmax(s.logits(), V);
    size_t top = 0;
    for (size_t i = 1; i < V; ++i) top = lp[i] > lp[top] ? i : top;
    double kl = 0;
    if (ref.empty()) ref = lp, ref_top = top;
    for (size_t i = 0; i < V; ++i) kl += std::exp(ref[i]) * (ref[i] - lp[i]);
    std::printf("| %s | %dx%d | %d | %.0f | %.0f | %.2e | %s |\n", argv[a], ip.grid_w, ip.grid_h, ip.grid_w * ip.grid_h / 4, ip.encode_s * 1e3,
                prefill * 1e3, kl, top == ref_top ? "yes" : "no");
    std::fflush(stdout);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_qwen3vl_pixels: error: %s\n", e.what());
  return 1;
}
