// libFuzzer target: the GGUF parser must reject any input with tessera::Error, never crash; so
// must the loader's view of each tensor (TensorSource::need: types checked, Q3_K / IQ4_NL held in
// the engine's types) and the dequantization of its first row.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "kernels/kernels.h"
#include "models/gguf_source.h"
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
    tessera::GgufTensorSource source(*f);
    for (const auto& t : f->tensors()) {
      try {
        const tessera::TensorView& v = source.need(t.name, t.dims);
        const uint64_t n = v.dims.empty() ? 0 : v.dims[0];
        if (n > 0 && n <= (1u << 16) && v.data) {
          std::vector<float> row(static_cast<size_t>(n));
          tessera::dequantize_row(v.type, v.data, row.data(), static_cast<int64_t>(n));
        }
      } catch (const tessera::Error&) {
      }
    }
    if (f->find("tokenizer.ggml.tokens")) tessera::Tokenizer tok(*f);
  } catch (const tessera::Error&) {
  }
  return 0;
}
