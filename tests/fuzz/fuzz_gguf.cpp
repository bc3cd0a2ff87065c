// libFuzzer target: the GGUF parser must reject any input with tessera::Error, never crash.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> copy(data, data + size);  // the parser keeps pointers into its span
  try {
    auto f = tessera::GgufFile::parse(copy.data(), copy.size());
    for (const auto& t : f->tensors()) {
      volatile uint8_t sink = 0;
      if (t.n_bytes) sink = t.data[0] ^ t.data[t.n_bytes - 1];  // every tensor lies inside the span
      (void)sink;
    }
    if (f->find("tokenizer.ggml.tokens")) tessera::Tokenizer tok(*f);
  } catch (const tessera::Error&) {
  }
  return 0;
}
