#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "test_util.h"

using namespace tessera;

namespace {
const Tokenizer& tokenizer() {
  static auto file = GgufFile::open(test::model_path());
  static Tokenizer tok(*file);
  return tok;
}
}  // namespace

// Token ids identical to llama.cpp's (fixture made by bench/peers/gen_tokenizer_fixture.py).
TEST(Tokenizer, MatchesLlamaCppOnCorpus) {
  const auto corpus = nlohmann::json::parse(test::read_file(test::source_path("tests/fixtures/tokenizer_corpus.json")));
  ASSERT_GE(corpus.size(), 40u);
  int checked = 0;
  for (const auto& c : corpus) {
    const std::string text = c["text"];
    const bool special = c["parse_special"];
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer().encode(text, special), want) << "text: " << nlohmann::json(text).dump() << " special=" << special;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(corpus.size()));
}

TEST(Tokenizer, DecodeInvertsEncode) {
  const auto corpus = nlohmann::json::parse(test::read_file(test::source_path("tests/fixtures/tokenizer_corpus.json")));
  for (const auto& c : corpus) {
    if (c["parse_special"]) continue;
    const std::string text = c["text"];
    EXPECT_EQ(tokenizer().decode(tokenizer().encode(text, false)), text);
  }
}

TEST(Tokenizer, SpecialTokens) {
  const Tokenizer& t = tokenizer();
  EXPECT_EQ(t.encode("<|im_start|>", true), std::vector<int32_t>{1});
  EXPECT_GT(t.encode("<|im_start|>", false).size(), 1u);
  EXPECT_TRUE(t.is_eog(2));  // <|im_end|>
  EXPECT_TRUE(t.is_eog(0));  // <|endoftext|>
  EXPECT_FALSE(t.is_eog(1));
  EXPECT_EQ(t.token_to_piece(1), "");
  EXPECT_EQ(t.token_to_piece(1, true), "<|im_start|>");
  EXPECT_THROW(t.token_to_piece(-1), Error);
  EXPECT_THROW(t.token_to_piece(t.n_vocab()), Error);
}

TEST(Tokenizer, InvalidUtf8AndLongInputsDoNotCrash) {
  const Tokenizer& t = tokenizer();
  EXPECT_FALSE(t.encode(std::string("\xff\xfe\xc3", 3), false).empty());
  const std::string long_word(200000, 'a');  // one pre-token: BPE must stay near-linear
  EXPECT_FALSE(t.encode(long_word, false).empty());
}

// Overlong forms and surrogates are invalid UTF-8 (RFC 3629): U+FFFD per byte, as for any other
// invalid byte, never a code point that append_utf8 would write back as different bytes. The
// fuzzer found "\xF0\x82\x9F\x99" (U+27D9 in four bytes) decoding back as the three-byte form.
TEST(Tokenizer, OverlongUtf8IsInvalid) {
  using unicode::decode_utf8;
  EXPECT_EQ(decode_utf8("\xF0\x82\x9F\x99"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}));
  EXPECT_EQ(decode_utf8("\xC0\x80"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
  EXPECT_EQ(decode_utf8("\xE0\x9F\xBF"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD}));
  EXPECT_EQ(decode_utf8("\xED\xA0\x80"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD}));  // a surrogate
  EXPECT_EQ(decode_utf8("\xF4\x90\x80\x80"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}));  // > U+10FFFF
  // the shortest forms at each length's bounds stay code points
  EXPECT_EQ(decode_utf8("\xC2\x80\xE0\xA0\x80\xF0\x90\x80\x80\xF4\x8F\xBF\xBF\xEE\x80\x80"),
            (std::vector<uint32_t>{0x80, 0x800, 0x10000, 0x10FFFF, 0xE000}));
  const Tokenizer& t = tokenizer();
  const std::string text = "return 0; // \xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80";  // valid: round-trips
  EXPECT_EQ(t.decode(t.encode(text, false)), text);
}
