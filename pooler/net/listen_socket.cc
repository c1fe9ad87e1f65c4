// See listen_socket.h.
#include "pooler/net/listen_socket.h"

#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>

namespace pgsluice {

int bind_reuseport_socket(const sockaddr* addr) {
  const int family = addr->sa_family;
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  const int on = 1;
  auto fail = [fd] {
    int err = errno;
    ::close(fd);
    return -err;
  };
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) return fail();
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) return fail();
  if (family == AF_INET6 && ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0) {
    return fail();
  }
  const socklen_t len = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::bind(fd, addr, len) != 0) return fail();
  return fd;
}

}  // namespace pgsluice
