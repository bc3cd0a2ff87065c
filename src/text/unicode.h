// The Unicode facts the byte-level BPE tokenizer needs, with llama.cpp's exact conventions
// (invalid UTF-8 bytes become U+FFFD; \s is llama.cpp's whitespace set).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::unicode {

std::vector<uint32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);
bool is_letter(uint32_t cp);
bool is_number(uint32_t cp);
bool is_whitespace(uint32_t cp);

// GPT-2 byte <-> printable-codepoint map used by byte-level BPE vocabularies.
uint32_t byte_to_codepoint(uint8_t b);
int codepoint_to_byte(uint32_t cp);  // -1 when cp is not in the map

}  // namespace tessera::unicode
