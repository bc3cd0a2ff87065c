// The probe's loops on a cross-compiled target (run under qemu-user in CI): every compute and
// read loop this CPU has runs and reports a positive rate. With --quick the loops are cut
// 10000-fold, so the run takes seconds under emulation; its figures mean nothing there.
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "profile/probe.h"

int main(int argc, char** argv) {
  tessera::ProbeOptions opt;
  opt.repetitions = 1;
  if (argc > 1 && std::strcmp(argv[1], "--quick") == 0) opt.scale = 1e-4;
  try {
    const auto res = tessera::run_probe(opt);
    int bad = 0;
    for (const auto& r : res) bad += !(r.value > 0);
    std::fputs(tessera::probe_to_json(res).c_str(), stdout);
    std::printf("probe_check: %zu figures, %d not positive\n", res.size(), bad);
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "probe_check: %s\n", e.what());
    return 1;
  }
}
