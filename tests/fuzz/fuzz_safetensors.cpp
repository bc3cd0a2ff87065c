// libFuzzer target: the safetensors parser rejects any input with tessera::Error, never crashes.
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> copy(data, data + size);
  try {
    auto f = tessera::SafetensorsFile::parse(copy.data(), copy.size());
    for (const auto& [name, t] : f->tensors()) {
      volatile uint8_t sink = 0;
      if (t.n_bytes) sink = t.data[0] ^ t.data[t.n_bytes - 1];
      (void)sink;
    }
  } catch (const tessera::Error&) {
  }
  return 0;
}
