// GGUF (v2/v3) reader. Parses a byte span strictly: every count, length and offset read from
// the file is bounds-checked before use, so a truncated or hostile file yields a tessera::Error
// naming the problem, never an out-of-bounds read or an outsized allocation.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace tessera {

enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
const char* gguf_type_name(GgufType t);
size_t gguf_scalar_size(GgufType t);  // 0 for STRING/ARRAY/unknown

// One metadata value. Scalars and numeric arrays keep their little-endian bytes in `raw`
// (so a writer can reproduce them exactly); strings live in `str` / `strs`.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  GgufType elem = GgufType::UINT8;  // element type, for ARRAY
  uint64_t count = 0;               // element count, for ARRAY
  std::vector<uint8_t> raw;
  std::string str;
  std::vector<std::string> strs;

  bool is_integer() const;  // integer or bool scalar
  bool is_number() const;   // integer, bool or float scalar
  int64_t as_int() const;   // integer/bool scalar; throws otherwise (and on uint64 > INT64_MAX)
  double as_double() const;  // any numeric scalar
  // Numeric array element i (bounds-checked).
  int64_t int_at(uint64_t i) const;
  double double_at(uint64_t i) const;

  static GgufValue make_u32(uint32_t v);
  static GgufValue make_i32(int32_t v);
  static GgufValue make_u64(uint64_t v);
  static GgufValue make_f32(float v);
  static GgufValue make_bool(bool v);
  static GgufValue make_string(std::string v);
  static GgufValue make_strings(std::vector<std::string> v);
  static GgufValue make_i32_array(const std::vector<int32_t>& v);
  static GgufValue make_f32_array(const std::vector<float>& v);
};

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> dims;  // ne[0] is the fastest-varying (row length)
  DType type = DType::F32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapped file
};

class GgufFile {
 public:
  // Maps and parses a file.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses a span the caller keeps alive (used by tests and the fuzzer).
  static std::unique_ptr<GgufFile> parse(const uint8_t* data, size_t size,
                                         const std::string& name = "<memory>");

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& name() const { return name_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  const GgufValue& get(const std::string& key) const;  // throws if missing

  // Typed metadata getters with range checks; `fallback` versions return it when missing.
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  int64_t get_int(const std::string& key, int64_t lo, int64_t hi) const;
  int64_t get_int(const std::string& key, int64_t lo, int64_t hi, int64_t fallback) const;
  double get_float(const std::string& key, double lo, double hi) const;
  double get_float(const std::string& key, double lo, double hi, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(const std::string& name) const;
  // MappedFile::release for bytes of this file (a no-op for parsed spans).
  size_t release(const uint8_t* p, size_t n) const { return map_ ? map_->release(p, n) : 0; }

 private:
  GgufFile() = default;
  void parse_impl(const uint8_t* data, size_t size);

  std::unique_ptr<MappedFile> map_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace tessera
