// [databases], [users] and [peers] lines: `name = key=value key='quoted value' …`, libpq-style,
// parsed into a DatabaseEntry, a UserEntry or a PeerEntry. The loader adds where (file, line, name)
// to each message.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pooler/config/config.h"

namespace pgsluice {

struct LineProblems {
  std::vector<std::string> errors;  // "pool_size: invalid value …", after "file:line: name: "
  // "database 'x': parameter 'y'": PgBouncer parameters pgsluice ignores (the loader says so).
  std::vector<std::string> warnings;
};

// The entry, or nothing when the line has an error (an entry is used whole or not at all).
std::optional<DatabaseEntry> parse_database_line(std::string_view name, std::string_view value,
                                                 int line, LineProblems& problems);
std::optional<UserEntry> parse_user_line(std::string_view name, std::string_view value, int line,
                                         LineProblems& problems);
// `id = host=… port=… pool_size=…`, PgBouncer's keys: the id 1..65535, host required.
std::optional<PeerEntry> parse_peer_line(std::string_view id, std::string_view value, int line,
                                         LineProblems& problems);

}  // namespace pgsluice
