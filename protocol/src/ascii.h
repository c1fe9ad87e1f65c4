// ASCII character classes for SQL and startup text, as PostgreSQL's scanner sees bytes: never
// the locale (std::isspace and std::tolower are locale-aware calls into libc, and the lexer and
// the DEALLOCATE prefilter run on every query). Internal to protocol/src.
#pragma once

#include <array>
#include <cstdint>

namespace pgsluice::protocol::ascii {

// The C locale's isspace: space, \t, \n, \v, \f, \r.
constexpr bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
constexpr bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
constexpr bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c);
}
constexpr char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// The byte classes of SQL words, one load per byte instead of up to six comparisons: the
// tokenizer asks for every byte of every word of every statement the prefilter sees. pgbench's
// SELECT took 1,804 instructions in the prefilter before, 1,576 with the table (callgrind;
// docs/profile.md).
enum : uint8_t { kWordStart = 1, kWordChar = 2 };
inline constexpr std::array<uint8_t, 256> kWordByteClass = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const bool start = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
    if (start) t[c] = kWordStart | kWordChar;
    if ((c >= '0' && c <= '9') || c == '$') t[c] = kWordChar;
  }
  return t;
}();

// A keyword or unquoted identifier starts with a letter, '_' or a non-ASCII byte, and goes on
// with those, digits and '$'.
constexpr bool is_word_start(char c) {
  return (kWordByteClass[static_cast<unsigned char>(c)] & kWordStart) != 0;
}
constexpr bool is_word_char(char c) {
  return (kWordByteClass[static_cast<unsigned char>(c)] & kWordChar) != 0;
}

}  // namespace pgsluice::protocol::ascii
