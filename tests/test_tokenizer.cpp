#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/tokenizer.h"
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
