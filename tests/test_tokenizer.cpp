#include <gtest/gtest.h>

#include <sstream>

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

// Token ids identical to llama.cpp's on a corpus (fixtures made by
// bench/peers/gen_tokenizer_fixture.py, with --model for the Qwen2 vocabulary).
void expect_corpus(const Tokenizer& tok, const std::string& fixture) {
  const auto corpus = nlohmann::json::parse(test::read_file(test::source_path(fixture)));
  ASSERT_GE(corpus.size(), 40u);
  for (const auto& c : corpus) {
    const std::string text = c["text"];
    const bool special = c["parse_special"];
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text, special), want) << fixture << " text: " << nlohmann::json(text).dump() << " special=" << special;
  }
}

TEST(Tokenizer, MatchesLlamaCppOnCorpus) { expect_corpus(tokenizer(), "tests/fixtures/tokenizer_corpus.json"); }

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

// llama.cpp's own tokenizer test for the Qwen2 vocabulary (models/ggml-vocab-qwen2.gguf with its
// .inp texts and .out ids, as its test-tokenizer-0 reads them): the Qwen2 pre-tokenizer, which
// Qwen2.5/Qwen3/Qwen3-VL share.
TEST(Tokenizer, Qwen2VocabMatchesLlamaCppTestSet) {
  const std::string base = test::source_path("tests/fixtures/vocab/ggml-vocab-qwen2.gguf");
  auto file = GgufFile::open(base);
  const Tokenizer tok(*file);
  EXPECT_EQ(tok.pre(), "qwen2");
  const std::string inp = test::read_file(base + ".inp"), out = test::read_file(base + ".out");
  std::vector<std::string> texts;
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t at = 0;;) {
    const size_t hit = inp.find(sep, at);
    if (hit == std::string::npos) break;
    texts.push_back(inp.substr(at, hit - at));
    at = hit + sep.size();
  }
  std::vector<std::vector<int32_t>> want;
  for (size_t at = 0; at < out.size();) {
    const size_t nl = out.find('\n', at);
    std::istringstream line(out.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    want.emplace_back();
    for (int32_t id; line >> id;) want.back().push_back(id);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  expect_corpus(tok, "tests/fixtures/vocab/qwen2_corpus.json");
  ASSERT_GE(texts.size(), 30u);
  ASSERT_EQ(texts.size(), want.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(tok.encode(texts[i], false), want[i]) << "text: " << nlohmann::json(texts[i]).dump();
    EXPECT_EQ(tok.decode(want[i]), texts[i]);
  }
}
