// A DataRow message's body as PostgreSQL sends it (column count, then each value's length or -1
// for NULL, and its bytes), for the tests that feed the pooler a server's answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pgsluice {

inline std::string data_row(const std::vector<std::optional<std::string>>& values) {
  std::string b;
  auto i16 = [&](int v) {
    b += static_cast<char>((v >> 8) & 0xff);
    b += static_cast<char>(v & 0xff);
  };
  auto i32 = [&](int32_t v) {
    for (int s = 24; s >= 0; s -= 8) b += static_cast<char>((v >> s) & 0xff);
  };
  i16(static_cast<int>(values.size()));
  for (const auto& v : values) {
    if (!v) {
      i32(-1);
    } else {
      i32(static_cast<int32_t>(v->size()));
      b += *v;
    }
  }
  return b;
}

}  // namespace pgsluice
