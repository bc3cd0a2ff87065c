#include "formats/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace tessera {

namespace {

constexpr uint64_t kMaxDims = 4;
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;  // sanity bound on one string
constexpr uint64_t kMaxNameBytes = 4096;

// A bounds-checked little-endian cursor over the file.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n, const std::string& file) : p_(p), n_(n), file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }

  void need(uint64_t bytes, const char* what) const {
    if (bytes > remaining())
      fail("%s: truncated GGUF file: %s needs %llu bytes at offset %zu, only %zu left",
           file_.c_str(), what, static_cast<unsigned long long>(bytes), pos_, remaining());
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  void read_bytes(void* dst, size_t bytes, const char* what) {
    need(bytes, what);
    if (bytes) std::memcpy(dst, p_ + pos_, bytes);
    pos_ += bytes;
  }
  std::string read_string(const char* what, uint64_t max_len) {
    const uint64_t len = read<uint64_t>(what);
    if (len > max_len)
      fail("%s: %s has length %llu, over the limit of %llu", file_.c_str(), what,
           static_cast<unsigned long long>(len), static_cast<unsigned long long>(max_len));
    need(len, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& file_;
};

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

GgufValue read_value(Cursor& c, GgufType type, const std::string& key, const std::string& file) {
  GgufValue v;
  v.type = type;
  if (type == GgufType::STRING) {
    v.str = c.read_string("string value", kMaxStringBytes);
    return v;
  }
  if (type == GgufType::ARRAY) {
    const uint32_t et = c.read<uint32_t>("array element type");
    if (!valid_type(et))
      fail("%s: key '%s': array has unknown element type %u", file.c_str(), key.c_str(), et);
    v.elem = static_cast<GgufType>(et);
    if (v.elem == GgufType::ARRAY)
      fail("%s: key '%s': nested arrays are not supported", file.c_str(), key.c_str());
    v.count = c.read<uint64_t>("array length");
    if (v.elem == GgufType::STRING) {
      // each string takes at least its 8-byte length: bound the count before reserving
      if (v.count > c.remaining() / 8)
        fail("%s: key '%s': array of %llu strings cannot fit in the %zu bytes left",
             file.c_str(), key.c_str(), static_cast<unsigned long long>(v.count), c.remaining());
      v.strs.reserve(static_cast<size_t>(v.count));
      for (uint64_t i = 0; i < v.count; ++i) v.strs.push_back(c.read_string("array string", kMaxStringBytes));
    } else {
      const size_t es = gguf_scalar_size(v.elem);
      if (v.count > c.remaining() / es)
        fail("%s: key '%s': array of %llu %s values cannot fit in the %zu bytes left", file.c_str(),
             key.c_str(), static_cast<unsigned long long>(v.count), gguf_type_name(v.elem),
             c.remaining());
      v.raw.resize(static_cast<size_t>(v.count) * es);
      c.read_bytes(v.raw.data(), v.raw.size(), "array data");
    }
    return v;
  }
  const size_t sz = gguf_scalar_size(type);
  v.raw.resize(sz);
  c.read_bytes(v.raw.data(), sz, "scalar value");
  if (type == GgufType::BOOL && v.raw[0] > 1)
    fail("%s: key '%s': bool value %u is neither 0 nor 1", file.c_str(), key.c_str(), v.raw[0]);
  return v;
}

int64_t raw_to_int(GgufType t, const uint8_t* p) {
  switch (t) {
    case GgufType::UINT8: return *p;
    case GgufType::INT8: return static_cast<int8_t>(*p);
    case GgufType::BOOL: return *p != 0;
    case GgufType::UINT16: { uint16_t x; std::memcpy(&x, p, 2); return x; }
    case GgufType::INT16: { int16_t x; std::memcpy(&x, p, 2); return x; }
    case GgufType::UINT32: { uint32_t x; std::memcpy(&x, p, 4); return x; }
    case GgufType::INT32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case GgufType::INT64: { int64_t x; std::memcpy(&x, p, 8); return x; }
    case GgufType::UINT64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("metadata value %llu is out of range", static_cast<unsigned long long>(x));
      return static_cast<int64_t>(x);
    }
    default: fail("metadata value of type %s is not an integer", gguf_type_name(t));
  }
}

double raw_to_double(GgufType t, const uint8_t* p) {
  if (t == GgufType::FLOAT32) { float x; std::memcpy(&x, p, 4); return x; }
  if (t == GgufType::FLOAT64) { double x; std::memcpy(&x, p, 8); return x; }
  return static_cast<double>(raw_to_int(t, p));
}

template <typename T>
GgufValue make_scalar(GgufType t, T x) {
  GgufValue v;
  v.type = t;
  v.raw.resize(sizeof(T));
  std::memcpy(v.raw.data(), &x, sizeof(T));
  return v;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32", "float32",
                                "bool",  "string", "array",  "uint64", "int64", "float64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "unknown";
}

size_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    default: return 0;
  }
}

bool GgufValue::is_integer() const {
  return type != GgufType::FLOAT32 && type != GgufType::FLOAT64 && gguf_scalar_size(type) > 0;
}
bool GgufValue::is_number() const { return gguf_scalar_size(type) > 0; }
int64_t GgufValue::as_int() const {
  if (!is_integer()) fail("metadata value of type %s is not an integer", gguf_type_name(type));
  return raw_to_int(type, raw.data());
}
double GgufValue::as_double() const {
  if (!is_number()) fail("metadata value of type %s is not a number", gguf_type_name(type));
  return raw_to_double(type, raw.data());
}
int64_t GgufValue::int_at(uint64_t i) const {
  if (type != GgufType::ARRAY || gguf_scalar_size(elem) == 0 || i >= count)
    fail("metadata array index %llu out of range", static_cast<unsigned long long>(i));
  return raw_to_int(elem, raw.data() + i * gguf_scalar_size(elem));
}
double GgufValue::double_at(uint64_t i) const {
  if (type != GgufType::ARRAY || gguf_scalar_size(elem) == 0 || i >= count)
    fail("metadata array index %llu out of range", static_cast<unsigned long long>(i));
  return raw_to_double(elem, raw.data() + i * gguf_scalar_size(elem));
}

GgufValue GgufValue::make_u32(uint32_t v) { return make_scalar(GgufType::UINT32, v); }
GgufValue GgufValue::make_i32(int32_t v) { return make_scalar(GgufType::INT32, v); }
GgufValue GgufValue::make_u64(uint64_t v) { return make_scalar(GgufType::UINT64, v); }
GgufValue GgufValue::make_f32(float v) { return make_scalar(GgufType::FLOAT32, v); }
GgufValue GgufValue::make_bool(bool v) { return make_scalar(GgufType::BOOL, static_cast<uint8_t>(v)); }
GgufValue GgufValue::make_string(std::string s) {
  GgufValue v;
  v.type = GgufType::STRING;
  v.str = std::move(s);
  return v;
}
GgufValue GgufValue::make_strings(std::vector<std::string> s) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem = GgufType::STRING;
  v.count = s.size();
  v.strs = std::move(s);
  return v;
}
GgufValue GgufValue::make_i32_array(const std::vector<int32_t>& a) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem = GgufType::INT32;
  v.count = a.size();
  v.raw.resize(a.size() * 4);
  if (!a.empty()) std::memcpy(v.raw.data(), a.data(), v.raw.size());
  return v;
}
GgufValue GgufValue::make_f32_array(const std::vector<float>& a) {
  GgufValue v = make_i32_array({});
  v.elem = GgufType::FLOAT32;
  v.count = a.size();
  v.raw.resize(a.size() * 4);
  if (!a.empty()) std::memcpy(v.raw.data(), a.data(), v.raw.size());
  return v;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto map = std::make_unique<MappedFile>(path);
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->name_ = path;
  f->parse_impl(map->data(), map->size());
  f->map_ = std::move(map);
  return f;
}

std::unique_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, const std::string& name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->name_ = name;
  f->parse_impl(data, size);
  return f;
}

void GgufFile::parse_impl(const uint8_t* data, size_t size) {
  const std::string& file = name_;
  Cursor c(data, size, file);
  char magic[4];
  c.read_bytes(magic, 4, "magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) fail("%s: not a GGUF file (bad magic)", file.c_str());
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    fail("%s: unsupported GGUF version %u (need 2 or 3)", file.c_str(), version_);
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Every KV entry needs >= 12 bytes (key length + type) and every tensor info >= 24 bytes:
  // bound both counts by the file size before anything is reserved.
  if (n_kv > c.remaining() / 12)
    fail("%s: metadata count %llu cannot fit in a file of %zu bytes", file.c_str(),
         static_cast<unsigned long long>(n_kv), size);
  if (n_tensors > c.remaining() / 24)
    fail("%s: tensor count %llu cannot fit in a file of %zu bytes", file.c_str(),
         static_cast<unsigned long long>(n_tensors), size);

  kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key", kMaxNameBytes);
    if (key.empty()) fail("%s: metadata entry %llu has an empty key", file.c_str(), static_cast<unsigned long long>(i));
    const uint32_t t = c.read<uint32_t>("metadata type");
    if (!valid_type(t)) fail("%s: key '%s' has unknown type %u", file.c_str(), key.c_str(), t);
    GgufValue v = read_value(c, static_cast<GgufType>(t), key, file);
    if (kv_index_.count(key)) fail("%s: duplicate metadata key '%s'", file.c_str(), key.c_str());
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::UINT32) fail("%s: general.alignment must be uint32", file.c_str());
    const int64_t al = a->as_int();
    if (al == 0 || (al & (al - 1)) != 0 || al > 65536)
      fail("%s: general.alignment %lld is not a power of two up to 65536", file.c_str(), static_cast<long long>(al));
    alignment_ = static_cast<uint64_t>(al);
  }

  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.name = c.read_string("tensor name", kMaxNameBytes);
    const uint32_t nd = c.read<uint32_t>("tensor dimension count");
    if (nd == 0 || nd > kMaxDims)
      fail("%s: tensor '%s' has %u dimensions (1..4 allowed)", file.c_str(), t.name.c_str(), nd);
    uint64_t ne = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t n = c.read<uint64_t>("tensor dimension");
      if (n == 0 || n > (uint64_t{1} << 40))
        fail("%s: tensor '%s' dimension %u is %llu", file.c_str(), t.name.c_str(), d, static_cast<unsigned long long>(n));
      if (ne > std::numeric_limits<uint64_t>::max() / n || ne * n > (uint64_t{1} << 48))
        fail("%s: tensor '%s' element count overflows", file.c_str(), t.name.c_str());
      ne *= n;
      t.dims.push_back(n);
    }
    const uint32_t type = c.read<uint32_t>("tensor type");
    const DTypeInfo* ti = dtype_info(type);
    if (!ti || ti->engine_only) fail("%s: tensor '%s' has unknown type id %u", file.c_str(), t.name.c_str(), type);
    t.type = static_cast<DType>(type);
    if (t.dims[0] % ti->block_elems != 0)
      fail("%s: tensor '%s' row length %llu is not a multiple of the %s block size %u", file.c_str(),
           t.name.c_str(), static_cast<unsigned long long>(t.dims[0]), ti->name, ti->block_elems);
    t.n_elements = ne;
    t.n_bytes = ne / ti->block_elems * ti->block_bytes;  // ne <= 2^48, block_bytes <= 292: no overflow
    t.offset = c.read<uint64_t>("tensor offset");
    if (t.offset % alignment_ != 0)
      fail("%s: tensor '%s' offset %llu is not aligned to %llu", file.c_str(), t.name.c_str(),
           static_cast<unsigned long long>(t.offset), static_cast<unsigned long long>(alignment_));
    if (tensor_index_.count(t.name)) fail("%s: duplicate tensor name '%s'", file.c_str(), t.name.c_str());
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  // data section starts at the next multiple of the alignment
  const uint64_t pos = c.pos();
  const uint64_t data_start = (pos + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_start > size)
    fail("%s: truncated GGUF file: data section starts at %llu, past the end (%zu bytes)",
         file.c_str(), static_cast<unsigned long long>(data_start), size);
  const uint64_t data_size = n_tensors > 0 ? size - data_start : 0;
  for (GgufTensor& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      fail("%s: truncated GGUF file: tensor '%s' (%llu bytes at offset %llu) runs past the end of the data (%llu bytes)",
           file.c_str(), t.name.c_str(), static_cast<unsigned long long>(t.n_bytes),
           static_cast<unsigned long long>(t.offset), static_cast<unsigned long long>(data_size));
    t.data = data + data_start + t.offset;
  }
  // each tensor owns its bytes: two views of one range (one tensor's writes or repacking
  // showing through another) are refused, as the safetensors reader refuses them
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  ranges.reserve(tensors_.size());
  for (const GgufTensor& t : tensors_) ranges.emplace_back(t.offset, t.offset + t.n_bytes);
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      fail("%s: tensors overlap in the data section (bytes %llu..%llu)", file.c_str(),
           static_cast<unsigned long long>(ranges[i].first), static_cast<unsigned long long>(ranges[i - 1].second));
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufValue& GgufFile::get(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail("%s: missing metadata key '%s'", name_.c_str(), key.c_str());
  return *v;
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufType::STRING) fail("%s: key '%s' must be a string", name_.c_str(), key.c_str());
  return v.str;
}
std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return find(key) ? get_string(key) : fallback;
}

int64_t GgufFile::get_int(const std::string& key, int64_t lo, int64_t hi) const {
  const GgufValue& v = get(key);
  if (!v.is_integer()) fail("%s: key '%s' must be an integer", name_.c_str(), key.c_str());
  const int64_t x = v.as_int();
  if (x < lo || x > hi)
    fail("%s: key '%s' = %lld is out of range [%lld, %lld]", name_.c_str(), key.c_str(),
         static_cast<long long>(x), static_cast<long long>(lo), static_cast<long long>(hi));
  return x;
}
int64_t GgufFile::get_int(const std::string& key, int64_t lo, int64_t hi, int64_t fallback) const {
  return find(key) ? get_int(key, lo, hi) : fallback;
}

double GgufFile::get_float(const std::string& key, double lo, double hi) const {
  const GgufValue& v = get(key);
  if (!v.is_number()) fail("%s: key '%s' must be a number", name_.c_str(), key.c_str());
  const double x = v.as_double();
  if (!(x >= lo && x <= hi))
    fail("%s: key '%s' = %g is out of range [%g, %g]", name_.c_str(), key.c_str(), x, lo, hi);
  return x;
}
double GgufFile::get_float(const std::string& key, double lo, double hi, double fallback) const {
  return find(key) ? get_float(key, lo, hi) : fallback;
}

bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  if (v->type != GgufType::BOOL) fail("%s: key '%s' must be a bool", name_.c_str(), key.c_str());
  return v->raw[0] != 0;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace tessera
