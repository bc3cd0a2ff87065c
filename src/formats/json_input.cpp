#include "formats/json_input.h"

#include <cmath>

#include "core/error.h"
#include "core/mapped_file.h"

namespace tessera {

int json_depth(const uint8_t* p, size_t n, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t c = p[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_json(const uint8_t* data, size_t size, const std::string& what) {
  if (json_depth(data, size, kMaxJsonDepth) > kMaxJsonDepth)
    fail("%s: JSON nested deeper than %d levels", what.c_str(), kMaxJsonDepth);
  try {
    return nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    fail("%s: not valid JSON", what.c_str());
  }
}

nlohmann::json read_json_file(const std::string& path) {
  MappedFile f(path);
  return parse_json(f.data(), f.size(), path);
}

int64_t json_int_value(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what) {
  if (v.is_number_integer()) {
    // unsigned values past INT64_MAX are out of any range we accept
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail("%s is out of range [%lld, %lld]", what.c_str(), static_cast<long long>(lo), static_cast<long long>(hi));
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) fail("%s is out of range [%lld, %lld]", what.c_str(), static_cast<long long>(lo), static_cast<long long>(hi));
    return x;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) fail("%s must be a whole number", what.c_str());
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
      fail("%s is out of range [%lld, %lld]", what.c_str(), static_cast<long long>(lo), static_cast<long long>(hi));
    return static_cast<int64_t>(d);
  }
  fail("%s must be a number", what.c_str());
}

int64_t json_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, const std::string& file) {
  if (!j.is_object() || !j.contains(key)) fail("%s: missing '%s'", file.c_str(), key);
  return json_int_value(j[key], lo, hi, file + ": '" + key + "'");
}

int64_t json_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, int64_t fallback, const std::string& file) {
  return j.is_object() && j.contains(key) && !j[key].is_null() ? json_int(j, key, lo, hi, file) : fallback;
}

}  // namespace tessera
