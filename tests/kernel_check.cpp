// Standalone cross-ISA kernel check (no GoogleTest, no image or JSON libraries), so it can be
// cross-compiled and run under qemu-user: the active ISA's matmul must equal the scalar twin bit
// for bit, and both must stay within the documented float64 tolerance, over the shape sweep.
// Prints "N passed, N failed".
#include <cstdio>
#include <cstring>

#include "kernel_cases.h"

using namespace tessera;
using namespace tessera::test;

int main() {
  int passed = 0, failed = 0;
  ThreadPool pool(2);
  std::printf("kernel_check: active ISA %s (detected %s)\n", isa_name(active_isa()), isa_name(detected_isa()));
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
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
