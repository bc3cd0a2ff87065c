#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/json_input.h"

namespace tessera {

namespace {

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;

// bytes per element of a safetensors dtype; 0 if unknown
size_t dtype_size(const std::string& d, bool& known, DType& t) {
  known = false;
  if (d == "F32") { known = true; t = DType::F32; return 4; }
  if (d == "F16") { known = true; t = DType::F16; return 2; }
  if (d == "BF16") { known = true; t = DType::BF16; return 2; }
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "I32" || d == "U32") return 4;
  if (d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto map = std::make_unique<MappedFile>(path);
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->name_ = path;
  f->parse_impl(map->data(), map->size());
  f->map_ = std::move(map);
  return f;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size, const std::string& name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->name_ = name;
  f->parse_impl(data, size);
  return f;
}

void SafetensorsFile::parse_impl(const uint8_t* data, size_t size) {
  const char* file = name_.c_str();
  if (size < 8) fail("%s: truncated safetensors file (no header length)", file);
  uint64_t n;
  std::memcpy(&n, data, 8);
  if (n < 2 || n > kMaxHeader || n > size - 8)
    fail("%s: safetensors header length %llu does not fit the file (%zu bytes)", file, static_cast<unsigned long long>(n), size);
  const nlohmann::json header = parse_json(data + 8, static_cast<size_t>(n), name_ + ": safetensors header");
  if (!header.is_object()) fail("%s: safetensors header is not a JSON object", file);
  const uint8_t* base = data + 8 + n;
  const uint64_t data_size = size - 8 - n;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    const auto& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) fail("%s: __metadata__ is not an object", file);
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail("%s: __metadata__ value '%s' is not a string", file, m.key().c_str());
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      fail("%s: tensor '%s' lacks dtype, shape or data_offsets", file, key.c_str());
    const auto& dt = v["dtype"];
    const auto& shape = v["shape"];
    const auto& offs = v["data_offsets"];
    if (!dt.is_string() || !shape.is_array() || !offs.is_array() || offs.size() != 2 || shape.size() > 8)
      fail("%s: tensor '%s' has a malformed entry", file, key.c_str());
    SafetensorsTensor t;
    t.name = key;
    t.dtype = dt.get<std::string>();
    const size_t es = dtype_size(t.dtype, t.known_dtype, t.type);
    if (es == 0) fail("%s: tensor '%s' has unknown dtype '%s'", file, key.c_str(), t.dtype.c_str());
    uint64_t count = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) fail("%s: tensor '%s' has a non-integer or negative dimension", file, key.c_str());
      const uint64_t x = d.get<uint64_t>();
      if (x != 0 && count > (uint64_t{1} << 48) / x) fail("%s: tensor '%s' element count overflows", file, key.c_str());
      count *= x;
      t.shape.push_back(x);
    }
    for (const auto& o : offs)
      if (!o.is_number_unsigned()) fail("%s: tensor '%s' has invalid data offsets", file, key.c_str());
    const uint64_t b = offs[0].get<uint64_t>(), e = offs[1].get<uint64_t>();
    if (b > e || e > data_size)
      fail("%s: tensor '%s' data [%llu, %llu) lies outside the %llu data bytes", file, key.c_str(),
           static_cast<unsigned long long>(b), static_cast<unsigned long long>(e), static_cast<unsigned long long>(data_size));
    if (e - b != count * es)
      fail("%s: tensor '%s' has %llu bytes but its shape and dtype need %llu", file, key.c_str(),
           static_cast<unsigned long long>(e - b), static_cast<unsigned long long>(count * es));
    t.data = base + b;
    t.n_bytes = e - b;
    ranges.emplace_back(b, e);
    tensors_[key] = std::move(t);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) fail("%s: tensors overlap in the data section", file);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace tessera
