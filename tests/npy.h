// Minimal reader for the .npy golden files the reference script writes (little-endian
// float32, int64, uint8; C order).
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"

namespace tessera::test {

struct Npy {
  std::string dtype;  // "<f4", "<i8", "|u1"
  std::vector<size_t> shape;
  std::vector<uint8_t> bytes;
  size_t count() const {
    size_t n = 1;
    for (size_t d : shape) n *= d;
    return n;
  }
  std::vector<float> f32() const {
    if (dtype != "<f4") throw std::runtime_error("npy: not float32: " + dtype);
    std::vector<float> v(count());
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
  }
  std::vector<int64_t> i64() const {  // int64 or int32 widened
    std::vector<int64_t> v(count());
    if (dtype == "<i4") {
      for (size_t i = 0; i < v.size(); ++i) {
        int32_t x;
        std::memcpy(&x, bytes.data() + 4 * i, 4);
        v[i] = x;
      }
      return v;
    }
    if (dtype != "<i8") throw std::runtime_error("npy: not int64: " + dtype);
    std::memcpy(v.data(), bytes.data(), v.size() * 8);
    return v;
  }
};

inline Npy load_npy(const std::string& path) {
  const std::string raw = read_file(path);
  if (raw.size() < 10 || raw.compare(0, 6, "\x93NUMPY") != 0) throw std::runtime_error("npy: bad file " + path);
  const int major = static_cast<uint8_t>(raw[6]);
  size_t hlen, off;
  if (major == 1) {
    hlen = static_cast<uint8_t>(raw[8]) | (static_cast<size_t>(static_cast<uint8_t>(raw[9])) << 8);
    off = 10;
  } else {
    uint32_t h;
    std::memcpy(&h, raw.data() + 8, 4);
    hlen = h;
    off = 12;
  }
  const std::string header = raw.substr(off, hlen);
  Npy n;
  const size_t d = header.find("'descr': '") + 10;
  n.dtype = header.substr(d, header.find('\'', d) - d);
  if (header.find("'fortran_order': True") != std::string::npos) throw std::runtime_error("npy: fortran order");
  const size_t s0 = header.find('(', header.find("'shape'")) + 1, s1 = header.find(')', s0);
  std::string dims = header.substr(s0, s1 - s0);
  size_t pos = 0;
  while (pos < dims.size()) {
    const size_t comma = dims.find(',', pos);
    const std::string tok = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok.find_first_not_of(' ') != std::string::npos) n.shape.push_back(std::stoul(tok));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  n.bytes.assign(raw.begin() + static_cast<std::ptrdiff_t>(off + hlen), raw.end());
  return n;
}

}  // namespace tessera::test
