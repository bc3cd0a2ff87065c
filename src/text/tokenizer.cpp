#include "text/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "core/error.h"
#include "core/mapped_file.h"
#include "formats/json_input.h"
#include "text/unicode.h"

#include <nlohmann/json.hpp>

namespace tessera {

namespace {
constexpr int64_t kMaxVocab = 1 << 22;

// Codepoint classes over [.., hi) of a text, and the words cut from it (the pre-tokenizers'
// shared vocabulary).
struct WordCutter {
  const std::vector<uint32_t>& cps;
  size_t hi, prev;
  std::vector<std::string>& words;
  bool letter(size_t p) const { return p < hi && unicode::is_letter(cps[p]); }
  bool number(size_t p) const { return p < hi && unicode::is_number(cps[p]); }
  bool space(size_t p) const { return p < hi && unicode::is_whitespace(cps[p]); }
  bool other(size_t p) const { return p < hi && !letter(p) && !number(p) && !space(p); }
  void emit(size_t end) {  // the word [prev, end)
    if (end > prev) {
      std::string w;
      for (size_t k = prev; k < end; ++k) unicode::append_utf8(w, cps[k]);
      words.push_back(std::move(w));
    }
    prev = end;
  }
};
// A text cut into its UTF-8 characters, as a linked list of byte ranges that merges shorten.
struct Sym {
  int prev, next;
  size_t start, len;
};
std::vector<Sym> utf8_symbols(const std::string& enc) {
  std::vector<Sym> syms;
  for (size_t i = 0; i < enc.size();) {
    const unsigned char c = static_cast<unsigned char>(enc[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    const int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, idx + 1, i, std::min(len, enc.size() - i)});
    i += syms.back().len;
  }
  if (!syms.empty()) syms.back().next = -1;
  return syms;
}
// Merges adjacent symbols while any pair may merge, the highest priority first (leftmost on
// ties): pair(a, b, priority) says whether a and b may merge and with what priority.
template <class Pair>
void merge_best_first(std::vector<Sym>& syms, Pair pair) {
  struct Bigram {
    double priority;
    int left;
    size_t size;
    bool operator<(const Bigram& o) const { return priority < o.priority || (priority == o.priority && left > o.left); }
  };
  std::priority_queue<Bigram> queue;
  auto try_add = [&](int l) {
    if (l < 0) return;
    const int r = syms[static_cast<size_t>(l)].next;
    if (r < 0) return;
    const Sym& a = syms[static_cast<size_t>(l)];
    const Sym& b = syms[static_cast<size_t>(r)];
    double priority = 0;
    if (pair(a, b, priority)) queue.push({priority, l, a.len + b.len});
  };
  for (int i = 0; i + 1 < static_cast<int>(syms.size()); ++i) try_add(i);
  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Sym& a = syms[static_cast<size_t>(bg.left)];
    if (a.len == 0 || a.next < 0) continue;
    Sym& b = syms[static_cast<size_t>(a.next)];
    if (b.len == 0 || a.len + b.len != bg.size) continue;  // stale entry
    a.len += b.len;
    b.len = 0;
    a.next = b.next;
    if (b.next >= 0) syms[static_cast<size_t>(b.next)].prev = bg.left;
    try_add(a.prev);
    try_add(bg.left);
  }
}
}  // namespace

Tokenizer::Tokenizer(const GgufFile& f) {
  TokenizerSpec sp;
  sp.source = f.name();
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama")
    fail("%s: tokenizer model '%s' is not supported (byte-level BPE 'gpt2', SentencePiece 'llama')", f.name().c_str(), model.c_str());
  sp.spm = model == "llama";
  sp.pre = f.get_string("tokenizer.ggml.pre", "default");
  const GgufValue& toks = f.get("tokenizer.ggml.tokens");
  if (toks.type != GgufType::ARRAY || toks.elem != GgufType::STRING)
    fail("%s: tokenizer.ggml.tokens must be an array of strings", f.name().c_str());
  if (toks.strs.empty() || static_cast<int64_t>(toks.strs.size()) > kMaxVocab)
    fail("%s: vocabulary size %zu is out of range", f.name().c_str(), toks.strs.size());
  sp.tokens = toks.strs;
  sp.types.assign(sp.tokens.size(), TokenType::Normal);
  if (const GgufValue* tt = f.find("tokenizer.ggml.token_type")) {
    if (tt->type != GgufType::ARRAY || tt->count != sp.tokens.size() || gguf_scalar_size(tt->elem) == 0)
      fail("%s: tokenizer.ggml.token_type must be a numeric array of %zu entries", f.name().c_str(), sp.tokens.size());
    for (size_t i = 0; i < sp.tokens.size(); ++i) {
      const int64_t t = tt->int_at(i);
      if (t < 1 || t > 6) fail("%s: token %zu has invalid type %lld", f.name().c_str(), i, static_cast<long long>(t));
      sp.types[i] = static_cast<TokenType>(t);
    }
  }
  if (sp.spm) {
    const GgufValue& sc = f.get("tokenizer.ggml.scores");
    if (sc.type != GgufType::ARRAY || sc.elem != GgufType::FLOAT32 || sc.count != sp.tokens.size())
      fail("%s: tokenizer.ggml.scores must be %zu floats", f.name().c_str(), sp.tokens.size());
    sp.scores.resize(sp.tokens.size());
    for (size_t i = 0; i < sp.tokens.size(); ++i) sp.scores[i] = static_cast<float>(sc.double_at(i));
    if (f.get_bool("tokenizer.ggml.add_space_prefix", true))
      fail("%s: SentencePiece with a space prefix is not supported", f.name().c_str());
  } else {
    const GgufValue& merges = f.get("tokenizer.ggml.merges");
    if (merges.type != GgufType::ARRAY || merges.elem != GgufType::STRING)
      fail("%s: tokenizer.ggml.merges must be an array of strings", f.name().c_str());
    sp.merges = merges.strs;
  }
  const int64_t nv = static_cast<int64_t>(sp.tokens.size());
  const std::string vocab_key = f.get_string("general.architecture", "llama") + ".vocab_size";
  if (const GgufValue* vs = f.find(vocab_key); vs && vs->is_integer() && vs->as_int() != nv)
    fail("%s: %s %lld does not match %lld tokens", f.name().c_str(), vocab_key.c_str(), static_cast<long long>(vs->as_int()), static_cast<long long>(nv));
  sp.bos = static_cast<int32_t>(f.get_int("tokenizer.ggml.bos_token_id", 0, nv - 1, -1));
  sp.eos = static_cast<int32_t>(f.get_int("tokenizer.ggml.eos_token_id", 0, nv - 1, -1));
  sp.eot = static_cast<int32_t>(f.get_int("tokenizer.ggml.eot_token_id", 0, nv - 1, -1));
  init(std::move(sp));
}

Tokenizer::Tokenizer(TokenizerSpec spec) { init(std::move(spec)); }

void Tokenizer::init(TokenizerSpec sp) {
  const char* src = sp.source.c_str();
  const int64_t nv = static_cast<int64_t>(sp.tokens.size());
  if (nv == 0 || nv > kMaxVocab) fail("%s: vocabulary size %lld is out of range", src, static_cast<long long>(nv));
  if (sp.types.size() != sp.tokens.size()) fail("%s: token types do not match the vocabulary", src);
  for (int32_t id : {sp.bos, sp.eos, sp.eot})
    if (id < -1 || id >= nv) fail("%s: special token id %d is out of range", src, id);
  pre_ = sp.pre;
  // Pre-tokenizers that split every digit on its own before the GPT-2 pattern (llama.cpp's
  // starcoder family); others use the GPT-2 pattern alone.
  static const char* kDigitSplit[] = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"};
  split_digits_ = std::find_if(std::begin(kDigitSplit), std::end(kDigitSplit),
                               [&](const char* p) { return pre_ == p; }) != std::end(kDigitSplit);
  // The llama-3 pattern and Qwen2's (the same with single digits), as llama.cpp names them.
  if (pre_ == "llama3" || pre_ == "llama-v3" || pre_ == "llama-bpe") max_digits_ = 3;
  if (pre_ == "qwen2" || pre_ == "stablelm2") max_digits_ = 1;
  spm_ = sp.spm;
  if (spm_ && sp.scores.size() != sp.tokens.size()) fail("%s: token scores do not match the vocabulary", src);
  if (!spm_ && !split_digits_ && max_digits_ == 0 && pre_ != "default" && pre_ != "gpt-2" && pre_ != "gpt2")
    fail("%s: pre-tokenizer '%s' is not supported", src, pre_.c_str());
  tokens_ = std::move(sp.tokens);
  types_ = std::move(sp.types);
  token_ids_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) token_ids_.emplace(tokens_[i], static_cast<int32_t>(i));
  merge_ranks_.reserve(sp.merges.size());
  for (size_t i = 0; i < sp.merges.size(); ++i) {
    const std::string& m = sp.merges[i];
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos || space + 1 >= m.size())
      fail("%s: merge %zu ('%s') is not of the form 'left right'", src, i, m.substr(0, 64).c_str());
    merge_ranks_.emplace(m, static_cast<int32_t>(i));
  }
  scores_ = std::move(sp.scores);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[b] = spm_ ? find(name) : -1;
  }
  bos_ = sp.bos;
  eos_ = sp.eos;
  if (eos_ >= 0) eog_.push_back(eos_);
  if (sp.eot >= 0 && sp.eot != eos_) eog_.push_back(sp.eot);
  // Like llama.cpp, treat well-known end-of-generation control tokens as stops too.
  for (const char* t : {"<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<end_of_utterance>", "<|end|>", "<end_of_turn>"}) {
    const int32_t id = find(t);
    if (id >= 0 && (types_[static_cast<size_t>(id)] == TokenType::Control || types_[static_cast<size_t>(id)] == TokenType::UserDefined) &&
        std::find(eog_.begin(), eog_.end(), id) == eog_.end())
      eog_.push_back(id);
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const TokenType t = types_[i];
    if ((t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) && !tokens_[i].empty())
      special_by_length_.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(special_by_length_.begin(), special_by_length_.end(), [&](int32_t a, int32_t b) {
    return tokens_[static_cast<size_t>(a)].size() > tokens_[static_cast<size_t>(b)].size();
  });
}

TokenizerSpec Tokenizer::spec_from_hf_json(const std::string& path) {
  MappedFile f(path);
  return spec_from_hf_json(f.data(), f.size(), path);
}

TokenizerSpec Tokenizer::spec_from_hf_json(const uint8_t* data, size_t size, const std::string& path) {
  const nlohmann::json j = parse_json(data, size, path);  // depth-bounded
  TokenizerSpec sp;
  sp.source = path;
  try {
    const auto& model = j.at("model");
    if (model.value("type", "") != "BPE") fail("%s: tokenizer model '%s' is not supported (only BPE)", path.c_str(), model.value("type", "?").c_str());
    const auto& vocab = model.at("vocab");
    if (!vocab.is_object() || vocab.empty() || vocab.size() > static_cast<size_t>(kMaxVocab)) fail("%s: bad vocabulary", path.c_str());
    // the vocabulary may be sparse where added tokens fill in: size it by the largest id
    int64_t n = 0;
    auto token_id = [&](const nlohmann::json& v) { return json_int_value(v, 0, kMaxVocab - 1, path + ": token id"); };
    for (auto it = vocab.begin(); it != vocab.end(); ++it) n = std::max<int64_t>(n, token_id(it.value()) + 1);
    std::vector<std::pair<std::string, int64_t>> added;
    if (j.contains("added_tokens"))
      for (const auto& a : j["added_tokens"]) {
        added.emplace_back(a.at("content").get<std::string>(), token_id(a.at("id")));
        n = std::max<int64_t>(n, added.back().second + 1);
      }
    if (n > kMaxVocab) fail("%s: token id %lld is out of range", path.c_str(), static_cast<long long>(n - 1));
    sp.tokens.assign(static_cast<size_t>(n), std::string());
    sp.types.assign(static_cast<size_t>(n), TokenType::Unused);
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      const int64_t id = token_id(it.value());
      sp.tokens[static_cast<size_t>(id)] = it.key();
      sp.types[static_cast<size_t>(id)] = TokenType::Normal;
    }
    if (j.contains("added_tokens"))
      for (const auto& a : j["added_tokens"]) {
        const int64_t id = token_id(a.at("id"));
        sp.tokens[static_cast<size_t>(id)] = a.at("content").get<std::string>();
        sp.types[static_cast<size_t>(id)] = a.value("special", false) ? TokenType::Control : TokenType::UserDefined;
      }
    for (const auto& m : model.at("merges")) {
      if (m.is_string()) sp.merges.push_back(m.get<std::string>());
      else if (m.is_array() && m.size() == 2) sp.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      else fail("%s: malformed merge", path.c_str());
    }
    // pre-tokenizer: ByteLevel, optionally after Digits(individual_digits) or after a Split by
    // the llama-3 or Qwen2 pattern
    const std::string pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"].dump() : "";
    if (pre.find("ByteLevel") == std::string::npos) fail("%s: only byte-level BPE pre-tokenizers are supported", path.c_str());
    const bool digits = pre.find("\"individual_digits\":true") != std::string::npos;
    sp.pre = digits ? "smollm" : "gpt2";
    if (pre.find("\"Split\"") != std::string::npos) {
      // the pattern as it appears in the JSON dump (backslashes escaped)
      static const char* kQwen2 = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+)";
      static const char* kLlama3 = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+)";
      if (pre.find(kQwen2) != std::string::npos) sp.pre = "qwen2";
      else if (pre.find(kLlama3) != std::string::npos) sp.pre = "llama3";
      else fail("%s: the pre-tokenizer's split pattern is not one tessera knows (GPT-2, llama-3, Qwen2)", path.c_str());
    }
  } catch (const nlohmann::json::exception& e) {
    fail("%s: unexpected tokenizer.json layout (%s)", path.c_str(), e.what());
  }
  return sp;
}

bool Tokenizer::is_eog(int32_t id) const { return std::find(eog_.begin(), eog_.end(), id) != eog_.end(); }

int32_t Tokenizer::find(const std::string& text) const {
  auto it = token_ids_.find(text);
  return it == token_ids_.end() ? -1 : it->second;
}

// The GPT-2 split ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+),
// applied inside each fragment on its own, optionally after splitting off every \p{N}
// codepoint: the same fragments llama.cpp's hand-written splitter produces.
std::vector<std::string> Tokenizer::pretokenize(std::string_view text) const {
  const std::vector<uint32_t> cps = unicode::decode_utf8(text);
  std::vector<std::string> words;
  if (max_digits_ > 0) {
    pretokenize_llama3(cps, words);
    return words;
  }
  std::vector<std::pair<size_t, size_t>> frags;  // [begin, end) in codepoints
  if (split_digits_) {
    size_t start = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
      if (unicode::is_number(cps[i])) {
        if (start < i) frags.emplace_back(start, i);
        frags.emplace_back(i, i + 1);
        start = i + 1;
      }
    }
    if (start < cps.size()) frags.emplace_back(start, cps.size());
  } else if (!cps.empty()) {
    frags.emplace_back(0, cps.size());
  }

  constexpr uint32_t kOut = 0xFFFFFFFFu;
  for (const auto& frag : frags) {
    const size_t lo = frag.first, hi = frag.second;
    auto cpt = [&](size_t p) { return p >= lo && p < hi ? cps[p] : kOut; };
    WordCutter w{cps, hi, lo, words};
    auto letter = [&](size_t p) { return w.letter(p); };
    auto number = [&](size_t p) { return w.number(p); };
    auto space = [&](size_t p) { return w.space(p); };
    auto other = [&](size_t p) { return w.other(p); };
    auto emit = [&](size_t end) { w.emit(end); };
    for (size_t pos = lo; pos < hi;) {
      const uint32_t c = cps[pos];
      if (c == '\'' && pos + 1 < hi) {
        const uint32_t n1 = cpt(pos + 1);
        if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
          pos += 2;
          emit(pos);
          continue;
        }
        if (pos + 2 < hi) {
          const uint32_t n2 = cpt(pos + 2);
          if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
            pos += 3;
            emit(pos);
            continue;
          }
        }
      }
      const size_t q = c == ' ' ? pos + 1 : pos;  // optional leading space
      if (letter(q)) {
        pos = q;
        while (letter(pos)) ++pos;
        emit(pos);
        continue;
      }
      if (number(q)) {
        pos = q;
        while (number(pos)) ++pos;
        emit(pos);
        continue;
      }
      if (other(q)) {
        pos = q;
        while (other(pos)) ++pos;
        emit(pos);
        continue;
      }
      size_t nws = 0;
      while (space(pos + nws)) ++nws;
      if (nws > 1 && cpt(pos + nws) != kOut) {  // \s+(?!\S): leave the last space for the next word
        pos += nws - 1;
        emit(pos);
        continue;
      }
      if (nws > 0) {
        pos += nws;
        emit(pos);
        continue;
      }
      emit(++pos);
    }
  }
  return words;
}

// The same alternatives in the same order as llama.cpp's hand-written llama-3 / Qwen2 splitters
// (the contractions match either case; "other" is anything not a letter, number or \s).
void Tokenizer::pretokenize_llama3(const std::vector<uint32_t>& cps, std::vector<std::string>& words) const {
  const size_t n = cps.size();
  WordCutter w{cps, n, 0, words};
  auto letter = [&](size_t p) { return w.letter(p); };
  auto number = [&](size_t p) { return w.number(p); };
  auto other = [&](size_t p) { return w.other(p); };
  auto emit = [&](size_t end) { w.emit(end); };
  auto newline = [&](size_t p) { return p < n && (cps[p] == '\r' || cps[p] == '\n'); };
  auto lower = [&](size_t p) { return p < n && cps[p] >= 'A' && cps[p] <= 'Z' ? cps[p] + 32 : p < n ? cps[p] : 0u; };
  for (size_t pos = 0; pos < n;) {
    if (cps[pos] == '\'' && pos + 1 < n) {  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
      const uint32_t a = lower(pos + 1), b = lower(pos + 2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(pos += 2);
        continue;
      }
      if (pos + 2 < n && ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))) {
        emit(pos += 3);
        continue;
      }
    }
    if (!newline(pos) && !number(pos) && (letter(pos) || letter(pos + 1))) {  // [^\r\n\p{L}\p{N}]?\p{L}+
      ++pos;
      while (letter(pos)) ++pos;
      emit(pos);
      continue;
    }
    if (number(pos)) {  // \p{N}{1,D}
      size_t run = 0;
      while (number(pos) && run < static_cast<size_t>(max_digits_)) ++pos, ++run;
      emit(pos);
      continue;
    }
    const size_t q = cps[pos] == ' ' ? pos + 1 : pos;
    if (other(q)) {  //  ?[^\s\p{L}\p{N}]+[\r\n]*
      pos = q;
      while (other(pos)) ++pos;
      while (newline(pos)) ++pos;
      emit(pos);
      continue;
    }
    size_t nws = 0, last_newline_end = 0;
    for (; w.space(pos + nws); ++nws)
      if (newline(pos + nws)) last_newline_end = pos + nws + 1;
    if (last_newline_end > 0) {  // \s*[\r\n]+
      emit(pos = last_newline_end);
      continue;
    }
    if (nws > 1 && pos + nws < n) {  // \s+(?!\S)
      emit(pos += nws - 1);
      continue;
    }
    if (nws > 0) {  // \s+
      emit(pos += nws);
      continue;
    }
    emit(++pos);
  }
}

// Merge the lowest-ranked adjacent pair (leftmost on ties) until none is in the merge table.
void Tokenizer::bpe(const std::string& word, std::vector<int32_t>& out) const {
  // byte-level encode the word: every byte becomes one printable codepoint
  std::string enc;
  enc.reserve(word.size() * 2);
  for (unsigned char b : word) unicode::append_utf8(enc, unicode::byte_to_codepoint(b));

  std::vector<Sym> syms = utf8_symbols(enc);
  if (syms.empty()) return;
  std::string key;
  // the lowest merge rank first
  merge_best_first(syms, [&](const Sym& a, const Sym& b, double& priority) {
    key.assign(enc, a.start, a.len);
    key.push_back(' ');
    key.append(enc, b.start, b.len);
    const auto it = merge_ranks_.find(key);
    if (it == merge_ranks_.end()) return false;
    priority = -static_cast<double>(it->second);
    return true;
  });
  for (int i = 0; i >= 0; i = syms[static_cast<size_t>(i)].next) {
    const Sym& s = syms[static_cast<size_t>(i)];
    const std::string piece = enc.substr(s.start, s.len);
    const int32_t id = find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char ch : piece) {  // unknown merge result: fall back to single bytes of the text
      const int32_t bid = find(std::string(1, ch));
      if (bid >= 0) out.push_back(bid);
    }
  }
}

// llama.cpp's llm_tokenizer_spm: spaces as U+2581, one symbol per UTF-8 character, then the
// adjacent pair whose concatenation is the best-scored token merges first (leftmost on ties);
// a symbol that is no token becomes its bytes' <0xXX> tokens.
void Tokenizer::spm(std::string_view text, std::vector<int32_t>& out) const {
  std::string enc;
  enc.reserve(text.size() + 16);
  for (char ch : text) {
    if (ch == ' ') enc += "\xE2\x96\x81";
    else enc.push_back(ch);
  }
  std::vector<Sym> syms = utf8_symbols(enc);
  if (syms.empty()) return;
  merge_best_first(syms, [&](const Sym& a, const Sym& b, double& priority) {  // the best score first
    const int32_t id = find(enc.substr(a.start, a.len + b.len));
    if (id < 0) return false;
    priority = scores_[static_cast<size_t>(id)];
    return true;
  });
  for (int i = 0; i >= 0; i = syms[static_cast<size_t>(i)].next) {
    const Sym& s = syms[static_cast<size_t>(i)];
    const int32_t id = find(enc.substr(s.start, s.len));
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (size_t k = s.start; k < s.start + s.len; ++k) {
      const int32_t bid = byte_ids_[static_cast<unsigned char>(enc[k])];
      if (bid >= 0) out.push_back(bid);
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  // Fragments: either raw text [begin,end) or a special token id.
  struct Frag {
    int32_t id;  // -1 for raw text
    size_t begin, end;
  };
  std::vector<Frag> frags{{-1, 0, text.size()}};
  for (int32_t sid : special_by_length_) {
    const TokenType t = types_[static_cast<size_t>(sid)];
    if (!parse_special && (t == TokenType::Control || t == TokenType::Unknown)) continue;
    const std::string& st = tokens_[static_cast<size_t>(sid)];
    std::vector<Frag> next;
    next.reserve(frags.size());
    for (const Frag& fr : frags) {
      if (fr.id >= 0) {
        next.push_back(fr);
        continue;
      }
      size_t pos = fr.begin;
      while (pos < fr.end) {
        const size_t hit = text.substr(0, fr.end).find(st, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({-1, pos, hit});
        next.push_back({sid, hit, hit + st.size()});
        pos = hit + st.size();
      }
      if (pos < fr.end) next.push_back({-1, pos, fr.end});
    }
    frags.swap(next);
  }
  std::vector<int32_t> out;
  for (const Frag& fr : frags) {
    if (fr.id >= 0) {
      out.push_back(fr.id);
      continue;
    }
    if (spm_) spm(text.substr(fr.begin, fr.end - fr.begin), out);
    else for (const std::string& w : pretokenize(text.substr(fr.begin, fr.end - fr.begin))) bpe(w, out);
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool special) const {
  if (id < 0 || id >= n_vocab()) fail("token id %d is out of range [0, %d)", id, n_vocab());
  const std::string& t = tokens_[static_cast<size_t>(id)];
  switch (types_[static_cast<size_t>(id)]) {
    case TokenType::Control:
    case TokenType::Unknown:
      return special ? t : std::string();
    case TokenType::UserDefined:
      return t;
    case TokenType::Byte:
      if (spm_ && t.size() == 6 && t.compare(0, 3, "<0x") == 0)  // <0xXX>
        return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
      [[fallthrough]];
    default: {
      std::string out;
      if (spm_) {  // U+2581 back to spaces
        for (size_t k = 0; k < t.size();) {
          if (t.compare(k, 3, "\xE2\x96\x81") == 0) out.push_back(' '), k += 3;
          else out.push_back(t[k++]);
        }
        return out;
      }
      for (uint32_t cp : unicode::decode_utf8(t)) {
        const int b = unicode::codepoint_to_byte(cp);
        if (b >= 0) out.push_back(static_cast<char>(b));
        else unicode::append_utf8(out, cp);
      }
      return out;
    }
  }
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool special) const {
  std::string out;
  for (int32_t id : ids) out += token_to_piece(id, special);
  return out;
}

}  // namespace tessera
