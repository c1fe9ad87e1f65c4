// Turning a [databases] entry's host and port into a connectable address.
#include "pooler/config/server_address.h"

#include <fmt/format.h>

namespace pgsluice {

namespace {
// Debian's PostgreSQL puts its socket here; an empty host means it, as in libpq on Debian.
constexpr const char* kDefaultSocketDir = "/var/run/postgresql";
}  // namespace

ServerAddress ServerAddress::from(const DatabaseEntry& db) {
  ServerAddress a;
  a.port = db.port;
  if (db.host.empty() || db.host.front() == '/') {
    std::string dir = db.host.empty() ? kDefaultSocketDir : db.host;
    a.unix_path = fmt::format("{}/.s.PGSQL.{}", dir, db.port);
  } else {
    a.host = db.host;
  }
  return a;
}

std::string ServerAddress::to_string() const {
  if (!unix_path.empty()) return unix_path;
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace pgsluice
