// Byte-level BPE tokenizer read from GGUF metadata (tokenizer.ggml.*), matching llama.cpp's
// token ids: special-token partitioning, the model's pre-tokenizer split, then BPE merges. GGUF
// model "llama" is SentencePiece BPE instead (Gemma): spaces become U+2581, the highest-scored
// adjacent pair that is a token merges first, bytes without a token fall back to <0xXX>.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "formats/gguf.h"

namespace tessera {

enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

// Everything a byte-level BPE tokenizer is made of, whatever file it came from.
struct TokenizerSpec {
  std::vector<std::string> tokens;
  std::vector<TokenType> types;     // same length as tokens
  std::vector<std::string> merges;  // "left right", by rank
  std::vector<float> scores;        // SentencePiece (spm): a score per token; merges unused
  bool spm = false;
  std::string pre = "default";      // pre-tokenizer name as llama.cpp spells it
  int32_t bos = -1, eos = -1, eot = -1;
  std::string source;               // file name, for messages
};

class Tokenizer {
 public:
  explicit Tokenizer(const GgufFile& f);  // validates everything it reads
  explicit Tokenizer(TokenizerSpec spec);
  // Hugging Face tokenizer.json (BPE model, ByteLevel pre-tokenizer, optionally individual digits).
  static TokenizerSpec spec_from_hf_json(const std::string& path);
  // The same from the file's bytes; `path` names it in errors.
  static TokenizerSpec spec_from_hf_json(const uint8_t* data, size_t size, const std::string& path);

  // parse_special: text like "<|im_start|>" becomes that control token.
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
  // The bytes a token stands for; control tokens give their text only when `special`.
  std::string token_to_piece(int32_t id, bool special = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool special = false) const;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  bool is_eog(int32_t id) const;
  int32_t find(const std::string& text) const;  // -1 when absent
  const std::string& text(int32_t id) const { return tokens_.at(static_cast<size_t>(id)); }
  const std::string& pre() const { return pre_; }

 private:
  std::vector<std::string> pretokenize(std::string_view text) const;
  // The llama-3 / Qwen2 pattern ((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}|
  // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+) with D = max_digits_.
  void pretokenize_llama3(const std::vector<uint32_t>& cps, std::vector<std::string>& words) const;
  void bpe(const std::string& word, std::vector<int32_t>& out) const;
  void spm(std::string_view text, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string, int32_t> token_ids_;
  std::unordered_map<std::string, int32_t> merge_ranks_;  // "left right" -> rank
  std::vector<int32_t> special_by_length_;  // control/user-defined tokens, longest first
  std::vector<int32_t> eog_;
  void init(TokenizerSpec spec);
  std::string pre_;
  bool split_digits_ = true;
  int max_digits_ = 0;  // > 0: the llama-3 family's pattern, numbers in runs of at most this many digits
  int32_t bos_ = -1, eos_ = -1;
  bool spm_ = false;
  std::vector<float> scores_;
  int32_t byte_ids_[256] = {};  // spm: the <0xXX> tokens (-1 when absent)
};

}  // namespace tessera
