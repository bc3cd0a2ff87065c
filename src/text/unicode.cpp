#include "text/unicode.h"

#include <algorithm>
#include <array>

namespace tessera::unicode {

namespace {
struct CodepointRange {
  uint32_t lo, hi;
};
#include "text/unicode_ranges.inc"

template <size_t N>
bool in_ranges(const CodepointRange (&r)[N], uint32_t cp) {
  auto it = std::upper_bound(std::begin(r), std::end(r), cp,
                             [](uint32_t v, const CodepointRange& x) { return v < x.lo; });
  if (it == std::begin(r)) return false;
  --it;
  return cp <= it->hi;
}

struct ByteMap {
  std::array<uint32_t, 256> to_cp{};
  std::array<int, 324> from_cp{};  // codepoints used are < 324
  ByteMap() {
    from_cp.fill(-1);
    uint32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : extra++;
      from_cp[to_cp[b]] = b;
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}
}  // namespace

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  auto cont = [&](size_t k) { return i + k < n && (p[i + k] & 0xc0) == 0x80; };
  while (i < n) {
    const uint8_t c = p[i];
    if (c < 0x80) {
      out.push_back(c);
      i += 1;
      continue;
    }
    // A sequence counts only in its shortest form and for a Unicode scalar value (RFC 3629): an
    // overlong form would come back from append_utf8 as other bytes (the tokenizer's pieces would
    // not give back the input), and surrogates are not characters.
    uint32_t cp = 0;
    size_t len = 0;
    if ((c & 0xe0) == 0xc0 && cont(1)) {
      cp = ((c & 0x1fu) << 6) | (p[i + 1] & 0x3fu);
      len = cp >= 0x80 ? 2 : 0;
    } else if ((c & 0xf0) == 0xe0 && cont(1) && cont(2)) {
      cp = ((c & 0x0fu) << 12) | ((p[i + 1] & 0x3fu) << 6) | (p[i + 2] & 0x3fu);
      len = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF) ? 3 : 0;
    } else if ((c & 0xf8) == 0xf0 && cont(1) && cont(2) && cont(3)) {
      cp = ((c & 0x07u) << 18) | ((p[i + 1] & 0x3fu) << 12) | ((p[i + 2] & 0x3fu) << 6) | (p[i + 3] & 0x3fu);
      len = cp >= 0x10000 && cp <= 0x10FFFF ? 4 : 0;
    }
    if (len == 0) {
      out.push_back(0xFFFD);  // invalid byte: replacement character, skip one byte
      i += 1;
    } else {
      out.push_back(cp);
      i += len;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | ((cp >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

bool is_letter(uint32_t cp) { return in_ranges(kLetterRanges, cp); }
bool is_number(uint32_t cp) { return in_ranges(kNumberRanges, cp); }

bool is_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

uint32_t byte_to_codepoint(uint8_t b) { return byte_map().to_cp[b]; }
int codepoint_to_byte(uint32_t cp) { return cp < 324 ? byte_map().from_cp[cp] : -1; }

}  // namespace tessera::unicode
