#include "pooler/net/socket_names.h"

#include "pooler/net/listen_addresses.h"

namespace pgsluice {

namespace {

// The address text of listen_addresses.h, the one shape the log has for an address.
std::string connected_name(const sockaddr_storage& addr) {
  if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) return "?";
  return address_text(reinterpret_cast<const sockaddr*>(&addr));
}

}  // namespace

std::string tcp_peer_name(const uv_tcp_t* tcp) {
  sockaddr_storage addr{};
  int len = sizeof(addr);
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  return connected_name(addr);
}

std::string tcp_local_name(const uv_tcp_t* tcp) {
  sockaddr_storage addr{};
  int len = sizeof(addr);
  if (uv_tcp_getsockname(tcp, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  return connected_name(addr);
}

}  // namespace pgsluice
