// ASCII character classes for SQL and startup text, as PostgreSQL's scanner sees bytes: never
// the locale (std::isspace and std::tolower are locale-aware calls into libc, and the lexer and
// the DEALLOCATE prefilter run on every query). Internal to protocol/src.
#pragma once

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

}  // namespace pgsluice::protocol::ascii
