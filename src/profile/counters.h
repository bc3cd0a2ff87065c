// Energy and work counters for the profiler: RAPL package energy where Linux powercap exposes
// it; otherwise process CPU-seconds, plus instructions and cycles from perf_event_open where
// the kernel allows it. The report always says which of these it used.
#pragma once
#include <cstdint>
#include <string>

namespace tessera::prof {

struct CounterSnapshot {
  double rapl_joules = -1;  // < 0: not available
  double cpu_seconds = 0;   // user + system, this process
  int64_t instructions = -1, cycles = -1;  // < 0: not available
};

CounterSnapshot read_counters();
std::string describe_energy(const CounterSnapshot& a, const CounterSnapshot& b, double wall_seconds);
std::string energy_json(const CounterSnapshot& a, const CounterSnapshot& b, double wall_seconds);

}  // namespace tessera::prof
