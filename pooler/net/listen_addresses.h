// listen_addr as PgBouncer reads it: a comma-separated list of IP addresses and host names, each
// resolved at startup with getaddrinfo (AI_PASSIVE) into every address it has ("localhost" is
// 127.0.0.1 and ::1 where /etc/hosts says so), and "*" for every IPv4 and IPv6 address.
#pragma once

#include <sys/socket.h>

#include <string>
#include <string_view>
#include <vector>

namespace pgsluice {

struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t length = 0;
  std::string text;  // "127.0.0.1:6432", "[::1]:6432"
};

struct ListenAddresses {
  std::vector<ListenAddress> addresses;  // in the list's order, each address once
  // A name that does not resolve: "getaddrinfo('db.example', '6432') = Name or service not
  // known"; nothing is listened on then, as PgBouncer stops.
  std::string error;
};

ListenAddresses resolve_listen_addresses(std::string_view listen_addr, int port);

// The list's entries, trimmed, empty ones left out.
std::vector<std::string> split_listen_addr(std::string_view listen_addr);

// "127.0.0.1:6432" or "[::1]:6432".
std::string address_text(const sockaddr* addr);

}  // namespace pgsluice
