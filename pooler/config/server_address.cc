// Turning a [databases] entry's host and port into a connectable address.
#include "pooler/config/server_address.h"

#include <fmt/format.h>

#include "pooler/base/text.h"

namespace pgsluice {

namespace {
// Debian's PostgreSQL puts its socket here; an empty host means it, as in libpq on Debian.
constexpr const char* kDefaultSocketDir = "/var/run/postgresql";
}  // namespace

namespace {
ServerAddress address_of(std::string_view host, int port) {
  ServerAddress a;
  a.port = port;
  if (host.empty() || host.front() == '/') {
    std::string dir = host.empty() ? kDefaultSocketDir : std::string(host);
    a.unix_path = fmt::format("{}/.s.PGSQL.{}", dir, port);
  } else {
    a.host = std::string(host);
  }
  return a;
}
}  // namespace

ServerAddress ServerAddress::from(const DatabaseEntry& db) {
  return all_from(db).front();
}

std::vector<ServerAddress> ServerAddress::all_from(const DatabaseEntry& db) {
  std::vector<ServerAddress> out;
  std::string_view hosts = db.host;
  size_t i = 0;
  for (;;) {
    const size_t comma = hosts.find(',');
    std::string_view host = trim(hosts.substr(0, comma));
    // A port per host, or the one port for all (the config loader checked the counts).
    const int port = i < db.ports.size() ? db.ports[i] : db.port;
    out.push_back(address_of(host, port));
    if (comma == std::string_view::npos) break;
    hosts.remove_prefix(comma + 1);
    ++i;
  }
  return out;
}

std::string ServerAddress::to_string() const {
  if (!unix_path.empty()) return unix_path;
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace pgsluice
