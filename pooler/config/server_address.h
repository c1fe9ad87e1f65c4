// Where a pool's servers are: a TCP host and port, or a Unix-domain socket directory; a
// [databases] entry in libpq's multi-host form (host=h1,h2 port=p1,p2) names several.
#pragma once

#include <string>
#include <vector>

#include "pooler/config/config.h"

namespace pgsluice {

struct ServerAddress {
  std::string host;  // a name or an IP literal; empty when unix_path is used
  int port = 5432;
  std::string unix_path;  // "<dir>/.s.PGSQL.<port>" for a host that is empty or a directory

  // The entry's first host (for what names one address: SHOW DATABASES, log lines).
  static ServerAddress from(const DatabaseEntry& db);
  // Every host of the entry, in the order written; at least one.
  static std::vector<ServerAddress> all_from(const DatabaseEntry& db);
  [[nodiscard]] std::string to_string() const;
  bool operator==(const ServerAddress&) const = default;
};

}  // namespace pgsluice
