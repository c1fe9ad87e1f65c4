// See socket_options.h.
#include "pooler/net/socket_options.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace pgsluice {

namespace {

std::string set_int(int fd, int level, int option, int value, const char* name) {
  if (::setsockopt(fd, level, option, &value, sizeof value) == 0) return {};
  return std::string("setsockopt(") + name + "): " + std::strerror(errno);
}

}  // namespace

std::string apply_tcp_options(int fd, const Settings& s) {
  std::string err = set_int(fd, SOL_SOCKET, SO_KEEPALIVE, s.tcp_keepalive ? 1 : 0, "SO_KEEPALIVE");
  // The timers mean nothing without keepalive, and PgBouncer sets them only with it.
  if (err.empty() && s.tcp_keepalive && s.tcp_keepidle > 0) {
    err = set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, s.tcp_keepidle, "TCP_KEEPIDLE");
  }
  if (err.empty() && s.tcp_keepalive && s.tcp_keepintvl > 0) {
    err = set_int(fd, IPPROTO_TCP, TCP_KEEPINTVL, s.tcp_keepintvl, "TCP_KEEPINTVL");
  }
  if (err.empty() && s.tcp_keepalive && s.tcp_keepcnt > 0) {
    err = set_int(fd, IPPROTO_TCP, TCP_KEEPCNT, s.tcp_keepcnt, "TCP_KEEPCNT");
  }
  if (err.empty() && s.tcp_user_timeout > 0) {
    err = set_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, s.tcp_user_timeout, "TCP_USER_TIMEOUT");
  }
  if (err.empty() && s.tcp_socket_buffer > 0) {
    err = set_int(fd, SOL_SOCKET, SO_SNDBUF, s.tcp_socket_buffer, "SO_SNDBUF");
    if (err.empty()) err = set_int(fd, SOL_SOCKET, SO_RCVBUF, s.tcp_socket_buffer, "SO_RCVBUF");
  }
  return err;
}

std::string set_defer_accept(int fd, bool on) {
  // The value is a timeout in seconds: PgBouncer's 1 (the kernel rounds it to its first SYN-ACK
  // retransmission), after which a connection without data is accepted anyway.
  return set_int(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, on ? 1 : 0, "TCP_DEFER_ACCEPT");
}

}  // namespace pgsluice
