// Where a pool's servers are: a TCP host and port, or a Unix-domain socket directory.
#pragma once

#include <string>

#include "pooler/config/config.h"

namespace pgsluice {

struct ServerAddress {
  std::string host;  // a name or an IP literal; empty when unix_path is used
  int port = 5432;
  std::string unix_path;  // "<dir>/.s.PGSQL.<port>" for a host that is empty or a directory

  static ServerAddress from(const DatabaseEntry& db);
  [[nodiscard]] std::string to_string() const;
};

}  // namespace pgsluice
