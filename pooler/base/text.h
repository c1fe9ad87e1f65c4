// Text helpers for ASCII syntax (configuration files, GUC and parameter names): ASCII only, never
// the locale, because PostgreSQL and PgBouncer fold and split these names byte by byte.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pgsluice {

std::string ascii_lower(std::string_view s);
// The C locale's isspace: space, \t, \n, \v, \f, \r.
constexpr bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}
std::string_view trim(std::string_view s);
// ASCII case-insensitive equality (GUC names, setting keys).
bool iequals(std::string_view a, std::string_view b);
// A comma-separated list ("a, b,,c"): items trimmed, empty ones dropped.
std::vector<std::string> split_list(std::string_view s);

}  // namespace pgsluice
