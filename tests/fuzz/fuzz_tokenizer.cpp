// libFuzzer target: tokenizing arbitrary bytes (with and without special-token parsing) never
// crashes, and decoding gives back the input when special tokens are not parsed.
#include <cstdlib>
#include <memory>
#include <string>

#include "core/error.h"
#include "formats/gguf.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

static const tessera::Tokenizer* tokenizer() {
  static std::unique_ptr<tessera::GgufFile> f;
  static std::unique_ptr<tessera::Tokenizer> t;
  if (!t) {
    const char* p = std::getenv("TESSERA_MODEL");
    f = tessera::GgufFile::open(p ? p : TESSERA_DEFAULT_MODEL);
    t = std::make_unique<tessera::Tokenizer>(*f);
  }
  return t.get();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto* t = tokenizer();
  t->encode(text, true);
  const auto ids = t->encode(text, false);
  const std::string back = t->decode(ids);
  // Invalid UTF-8 becomes U+FFFD and bytes without a byte token in the vocabulary are dropped
  // (as llama.cpp does), so only other text must round-trip exactly.
  const auto cps = tessera::unicode::decode_utf8(text);
  bool valid = true;
  for (uint32_t c : cps) valid &= c != 0xFFFD;
  for (unsigned char b : text) {
    std::string piece;
    tessera::unicode::append_utf8(piece, tessera::unicode::byte_to_codepoint(b));
    valid &= t->find(piece) >= 0;
  }
  if (valid && text.find("\xEF\xBF\xBD") == std::string::npos && back != text) std::abort();
  return 0;
}
