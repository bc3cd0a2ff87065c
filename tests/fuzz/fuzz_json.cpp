// libFuzzer target: any bytes as a Hugging Face config.json (+ preprocessor config) and as a
// tokenizer.json are either read or rejected with tessera::Error: no crash, no stack overflow
// from nesting, no other exception escaping. A tokenizer.json that is accepted must also
// build a working tokenizer.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "text/tokenizer.h"
#include "models/hf_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    tessera::parse_hf_config(text, text, "config.json", "preprocessor_config.json");
  } catch (const tessera::Error&) {
  }
  try {
    tessera::Tokenizer t(tessera::Tokenizer::spec_from_hf_json(data, size, "tokenizer.json"));
    t.decode(t.encode("Hello, world! 123 <|im_end|>", true));
  } catch (const tessera::Error&) {
  }
  return 0;
}
