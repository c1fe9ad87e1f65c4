// so_reuseport = 1: the TCP listening socket is made by hand, because libuv (1.44, Debian 12)
// cannot set SO_REUSEPORT before its bind. Several pgsluice processes then share one port and
// the kernel spreads new connections over them (PgBouncer's scale-out and rolling-restart
// recipe).
#pragma once

#include <sys/socket.h>

namespace pgsluice {

// A non-blocking, close-on-exec TCP socket with SO_REUSEADDR and SO_REUSEPORT, bound to `addr`
// (IPV6_V6ONLY for an IPv6 address, as libuv's UV_TCP_IPV6ONLY); not yet listening. Returns the
// descriptor, or a negative errno (libuv's error convention).
int bind_reuseport_socket(const sockaddr* addr);

}  // namespace pgsluice
