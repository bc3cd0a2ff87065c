// JSON that comes from a file or a request, read as hostile: nesting depth bounded before the
// parser sees it (nlohmann's serializer and comparisons recurse, so a 100,000-deep array
// overflows the stack), and every number that becomes a size range-checked as a 64-bit value
// before it is narrowed (a hidden_size of 2^32 + 32 must not load as 32).
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace tessera {

// Deeper than any config.json, tokenizer.json or safetensors header (they nest under 10).
constexpr int kMaxJsonDepth = 64;

// Parses `size` bytes as JSON; `what` names the source in errors. Throws tessera::Error for
// invalid JSON or nesting deeper than kMaxJsonDepth.
nlohmann::json parse_json(const uint8_t* data, size_t size, const std::string& what);
nlohmann::json read_json_file(const std::string& path);

// The deepest nesting of arrays and objects in `size` bytes of JSON text (strings skipped),
// stopping early once past `limit`.
int json_depth(const uint8_t* data, size_t size, int limit);

// j[key] as an integer in [lo, hi]: integral JSON numbers only (2.0 passes, 2.5 does not),
// compared before narrowing. `file` names the source in errors.
int64_t json_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, const std::string& file);
// ... or `fallback` when the key is absent or null.
int64_t json_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, int64_t fallback, const std::string& file);
// A JSON value (not a keyed member) as an integer in [lo, hi]; `what` names it in errors.
int64_t json_int_value(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what);

}  // namespace tessera
