#include "formats/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/output_file.h"

namespace tessera {

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}
void put_value(std::vector<uint8_t>& out, const GgufValue& v) {
  if (v.type == GgufType::STRING) {
    put_string(out, v.str);
  } else if (v.type == GgufType::ARRAY) {
    put<uint32_t>(out, static_cast<uint32_t>(v.elem));
    put<uint64_t>(out, v.count);
    if (v.elem == GgufType::STRING) {
      for (const auto& s : v.strs) put_string(out, s);
    } else {
      out.insert(out.end(), v.raw.begin(), v.raw.end());
    }
  } else {
    out.insert(out.end(), v.raw.begin(), v.raw.end());
  }
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::set_alignment(uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) fail("alignment must be a power of two");
  alignment_ = alignment;
  set("general.alignment", GgufValue::make_u32(alignment));
}

void GgufWriter::add_tensor(const std::string& name, DType type, const std::vector<uint64_t>& dims,
                            std::vector<uint8_t> data) {
  if (dims.empty() || dims.size() > 4) fail("tensor '%s': 1..4 dimensions", name.c_str());
  const DTypeInfo* ti = dtype_info(static_cast<uint32_t>(type));
  if (!ti || dims[0] % ti->block_elems != 0) fail("tensor '%s': bad type or row length", name.c_str());
  uint64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
  if (data.size() != row_bytes(type, dims[0]) * rows)
    fail("tensor '%s': %zu bytes given, %zu expected", name.c_str(), data.size(),
         static_cast<size_t>(row_bytes(type, dims[0]) * rows));
  tensors_.push_back({name, type, dims, std::move(data)});
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  out.insert(out.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size());
  for (const auto& [k, v] : kv_) {
    put_string(out, k);
    put<uint32_t>(out, static_cast<uint32_t>(v.type));
    put_value(out, v);
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const auto& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) put<uint64_t>(out, d);
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offsets.push_back(offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  const size_t base = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(base + offsets[i], 0);
    out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
  }
  if (!tensors_.empty()) out.resize(base + offset, 0);
  return out;
}

void GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> bytes = to_bytes();
  write_output_file(path, bytes.data(), bytes.size());
}

}  // namespace tessera
