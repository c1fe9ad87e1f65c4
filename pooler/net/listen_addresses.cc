// See listen_addresses.h.
#include "pooler/net/listen_addresses.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

#include "pooler/base/text.h"

namespace pgsluice {

namespace {

void append_decimal(std::string& out, unsigned value) {
  char digits[10];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, end);
}

bool same_address(const ListenAddress& a, const ListenAddress& b) {
  return a.length == b.length && std::memcmp(&a.addr, &b.addr, a.length) == 0;
}

}  // namespace

std::vector<std::string> split_listen_addr(std::string_view listen_addr) {
  return split_list(listen_addr);  // the same rule as every list setting
}

std::string address_text(const sockaddr* addr) {
  char ip[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
    return "[" + std::string(ip) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  // IPv4 by hand: glibc's inet_ntop formats each octet with sprintf, 1,600 instructions of a
  // client's login (every accepted client is named once; docs/profile.md 0g).
  const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
  const auto* octet = reinterpret_cast<const unsigned char*>(&in->sin_addr.s_addr);
  std::string out;
  out.reserve(21);  // "255.255.255.255:65535"
  for (int i = 0; i < 4; ++i) {
    if (i > 0) out.push_back('.');
    append_decimal(out, octet[i]);
  }
  out.push_back(':');
  append_decimal(out, ntohs(in->sin_port));
  return out;
}

ListenAddresses resolve_listen_addresses(std::string_view listen_addr, int port) {
  ListenAddresses result;
  const std::string service = std::to_string(port);
  for (const std::string& item : split_listen_addr(listen_addr)) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = AI_PASSIVE;  // with no node ("*"): the wildcard addresses
    addrinfo* found = nullptr;
    const char* node = item == "*" ? nullptr : item.c_str();
    if (int rc = ::getaddrinfo(node, service.c_str(), &hints, &found); rc != 0) {
      result.error = "getaddrinfo('" + item + "', '" + service + "') = " + ::gai_strerror(rc);
      result.addresses.clear();
      return result;
    }
    for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
      if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
      ListenAddress a;
      std::memcpy(&a.addr, ai->ai_addr, ai->ai_addrlen);
      a.length = ai->ai_addrlen;
      a.text = address_text(ai->ai_addr);
      // "localhost,127.0.0.1" names one address twice: one listener (a second bind would fail,
      // or with SO_REUSEPORT quietly make two).
      bool seen = false;
      for (const ListenAddress& b : result.addresses) seen = seen || same_address(a, b);
      if (!seen) result.addresses.push_back(std::move(a));
    }
    ::freeaddrinfo(found);
  }
  return result;
}

}  // namespace pgsluice
