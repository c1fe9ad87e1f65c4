// The socket options PgBouncer's keys set (tcp_keepalive, tcp_keepidle, tcp_keepintvl,
// tcp_keepcnt, tcp_user_timeout, tcp_socket_buffer, tcp_defer_accept): on every client TCP
// socket when it is accepted, on every server TCP socket before its connect, and
// TCP_DEFER_ACCEPT on the TCP listeners. A key at 0 leaves the kernel's default, as in PgBouncer.
#pragma once

#include <string>

#include "pooler/config/config.h"

namespace pgsluice {

// Sets keepalive (on or off), its timers, TCP_USER_TIMEOUT and the buffer sizes on a TCP socket.
// Returns the failure ("setsockopt(TCP_KEEPIDLE): Invalid argument"), empty on success.
std::string apply_tcp_options(int fd, const Settings& settings);

// TCP_DEFER_ACCEPT on a listening socket: on, the kernel hands over a connection once its first
// bytes arrived (every PostgreSQL client speaks first), so that a port scan or a half-open
// connection costs no accept. Returns the failure, empty on success.
std::string set_defer_accept(int fd, bool on);

}  // namespace pgsluice
