#include "profile/counters.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

namespace tessera::prof {

namespace {

double rapl_joules() {
  std::ifstream f("/sys/class/powercap/intel-rapl:0/energy_uj");
  long long uj = -1;
  if (!(f >> uj) || uj < 0) return -1;
  return static_cast<double>(uj) * 1e-6;
}

// Process-wide hardware counters (all threads, inherited by those created later), opened once.
struct PerfCounters {
  int fd_instr = -1, fd_cycles = -1;
  PerfCounters() {
    fd_instr = open_counter(PERF_COUNT_HW_INSTRUCTIONS);
    fd_cycles = open_counter(PERF_COUNT_HW_CPU_CYCLES);
  }
  static int open_counter(uint64_t config) {
    perf_event_attr a;
    std::memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_HARDWARE;
    a.size = sizeof a;
    a.config = config;
    a.inherit = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    const long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    return static_cast<int>(fd);
  }
  static int64_t read_fd(int fd) {
    if (fd < 0) return -1;
    uint64_t v = 0;
    return ::read(fd, &v, sizeof v) == static_cast<ssize_t>(sizeof v) ? static_cast<int64_t>(v) : -1;
  }
};

PerfCounters& perf() {
  static PerfCounters p;
  return p;
}

}  // namespace

CounterSnapshot read_counters() {
  CounterSnapshot s;
  s.rapl_joules = rapl_joules();
  rusage u;
  if (getrusage(RUSAGE_SELF, &u) == 0)
    s.cpu_seconds = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  s.instructions = PerfCounters::read_fd(perf().fd_instr);
  s.cycles = PerfCounters::read_fd(perf().fd_cycles);
  return s;
}

std::string describe_energy(const CounterSnapshot& a, const CounterSnapshot& b, double wall) {
  char buf[400];
  std::string o;
  if (a.rapl_joules >= 0 && b.rapl_joules >= a.rapl_joules) {
    std::snprintf(buf, sizeof buf, "RAPL package %.2f J (%.1f W average); ", b.rapl_joules - a.rapl_joules,
                  wall > 0 ? (b.rapl_joules - a.rapl_joules) / wall : 0.0);
    o += buf;
  } else {
    o += "no RAPL on this machine (powercap not exposed): proxy = CPU time; ";
  }
  const double cpu = b.cpu_seconds - a.cpu_seconds;
  std::snprintf(buf, sizeof buf, "CPU %.2f s over %.2f s wall (%.2f cores busy)", cpu, wall, wall > 0 ? cpu / wall : 0.0);
  o += buf;
  if (a.instructions >= 0 && b.instructions >= 0 && a.cycles >= 0 && b.cycles >= 0) {
    const double ins = static_cast<double>(b.instructions - a.instructions), cyc = static_cast<double>(b.cycles - a.cycles);
    std::snprintf(buf, sizeof buf, "; perf: %.3g instructions, %.3g cycles, IPC %.2f", ins, cyc, cyc > 0 ? ins / cyc : 0.0);
    o += buf;
  } else {
    o += "; perf counters not available here";
  }
  return o;
}

std::string energy_json(const CounterSnapshot& a, const CounterSnapshot& b, double wall) {
  char buf[400];
  const bool rapl = a.rapl_joules >= 0 && b.rapl_joules >= a.rapl_joules;
  const bool perf_ok = a.instructions >= 0 && b.instructions >= 0 && a.cycles >= 0 && b.cycles >= 0;
  std::snprintf(buf, sizeof buf,
                "{\"source\": \"%s\", \"rapl_joules\": %s, \"cpu_seconds\": %.4f, \"wall_seconds\": %.4f, \"instructions\": %lld, \"cycles\": %lld}",
                rapl ? "rapl" : perf_ok ? "cpu-seconds+perf" : "cpu-seconds", rapl ? std::to_string(b.rapl_joules - a.rapl_joules).c_str() : "null",
                b.cpu_seconds - a.cpu_seconds, wall, perf_ok ? static_cast<long long>(b.instructions - a.instructions) : -1LL,
                perf_ok ? static_cast<long long>(b.cycles - a.cycles) : -1LL);
  return buf;
}

}  // namespace tessera::prof
