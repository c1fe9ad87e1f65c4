// Text helpers for ASCII syntax (configuration files, GUC and parameter names): ASCII only, never
// the locale, because PostgreSQL and PgBouncer fold and split these names byte by byte.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pgsluice {

// std::tolower is a locale-aware call per character, 1-2% of the pooler's CPU when every link
// compares parameter names (docs/profile.md).
constexpr char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string ascii_lower(std::string_view s);
// The C locale's isspace: space, \t, \n, \v, \f, \r.
constexpr bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}
std::string_view trim(std::string_view s);
// ASCII case-insensitive equality (GUC names, setting keys).
// Inline: every link compares parameter names with it (out of line it was ~2 % of the pooler's
// CPU at 20 clients, pgbench -S).
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}
// A comma-separated list ("a, b,,c"): items trimmed, empty ones dropped.
std::vector<std::string> split_list(std::string_view s);

}  // namespace pgsluice
