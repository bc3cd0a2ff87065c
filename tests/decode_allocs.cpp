// Steady-state decode allocates nothing: every global operator new in this process is counted,
// and after a warm-up (buffers and thread-local scratch grow once) a run of decode steps --
// Session::eval of one token and the sampler, as generate() and the server run them -- must
// count zero, greedy and sampled, with fp32 and 8-bit activations, on every thread count.
// A separate program (not in tessera_tests) because it replaces operator new for the whole process.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

#include "models/llama/llama.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace {
std::atomic<long> g_allocs{0};
std::atomic<bool> g_counting{false};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: decode_allocs MODEL.gguf\n");
    return 2;
  }
  using namespace tessera;
  const auto model = LlamaModel::load(argv[1]);
  int failures = 0;
  for (bool q8 : {false, true})
    for (int threads : {1, 2})
      for (float temp : {0.0f, 0.8f}) {
        SessionOptions so;
        so.n_ctx = 256;
        so.n_threads = threads;
        so.q8_activations = q8;
        Session s(*model, so);
        SamplerOptions sopt;
        sopt.temperature = temp;
        sopt.seed = 7;
        Sampler sampler(sopt);
        const int n_vocab = model->config().n_vocab;
        s.eval(model->tokenizer().encode("The screen shows", false));
        std::vector<int32_t> one(1);
        const auto step = [&] {
          one[0] = sampler.sample(s.logits(), n_vocab);
          s.eval(one);
        };
        for (int i = 0; i < 8; ++i) step();  // warm-up
        g_allocs = 0;
        g_counting = true;
        for (int i = 0; i < 32; ++i) step();
        g_counting = false;
        const long n = g_allocs.load();
        std::printf("%s decode, %d thread%s, %s: %ld allocations in 32 steps\n", q8 ? "8-bit-activation" : "fp32-activation",
                    threads, threads == 1 ? "" : "s", temp > 0 ? "sampled" : "greedy", n);
        failures += n != 0;
      }
  std::printf("%s\n", failures ? "FAIL: decode allocated" : "ok: no allocations in steady-state decode");
  return failures ? 1 : 0;
}
