// The primary's listening sockets and what arrives on them: listen_addr bound, the Unix socket,
// accepted connections spread over the workers. Kept apart from worker.cc, the event loop.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "pooler/core/worker.h"
#include "pooler/net/listen_socket.h"

namespace pgsluice {

namespace {

constexpr int kListenBacklog = 4096;

void close_and_free_listener(uv_stream_t* stream) {
  uv_close(reinterpret_cast<uv_handle_t*>(stream),
           [](uv_handle_t* h) { std::free(h); });  // allocated with malloc in listen_*()
}

}  // namespace

bool Worker::open_listeners() {
  const Settings& s = settings();
  bool any = false;
  std::string addrs = s.listen_addr;
  size_t pos = 0;
  while (pos <= addrs.size()) {
    size_t comma = addrs.find(',', pos);
    std::string addr =
        addrs.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    addr.erase(0, addr.find_first_not_of(" \t"));
    addr.erase(addr.find_last_not_of(" \t") + 1);
    if (addr == "*") {
      any |= listen_tcp("0.0.0.0", s.listen_port);
      any |= listen_tcp("::", s.listen_port);
    } else if (!addr.empty()) {
      any |= listen_tcp(addr, s.listen_port);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (!s.unix_socket_dir.empty()) any |= listen_unix(s.unix_socket_dir, s.listen_port);
  if (!any) {
    spdlog::error("no listening socket could be opened");
    return false;
  }
  return true;
}

bool Worker::listen_tcp(const std::string& host, int port) {
  sockaddr_storage storage{};
  if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&storage)) != 0 &&
      uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&storage)) != 0) {
    spdlog::error("listen_addr {}: not an IP address", host);
    return false;
  }
  auto* tcp = static_cast<uv_tcp_t*>(std::malloc(sizeof(uv_tcp_t)));
  uv_tcp_init(&loop_, tcp);
  tcp->data = this;
  unsigned flags = storage.ss_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0;
  int rc = 0;
  if (settings().so_reuseport) {
    int fd = bind_reuseport_socket(reinterpret_cast<sockaddr*>(&storage));
    rc = fd < 0 ? fd : uv_tcp_open(tcp, fd);
    if (fd >= 0 && rc != 0) ::close(fd);
  } else {
    rc = uv_tcp_bind(tcp, reinterpret_cast<sockaddr*>(&storage), flags);
  }
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(tcp), kListenBacklog, on_connection);
  if (rc != 0) {
    spdlog::error("could not listen on {}:{}: {}", host, port, uv_strerror(rc));
    close_and_free_listener(reinterpret_cast<uv_stream_t*>(tcp));
    return false;
  }
  spdlog::info("listening on {}:{}", host, port);
  listeners_.emplace_back(reinterpret_cast<uv_stream_t*>(tcp), close_and_free_listener);
  return true;
}

bool Worker::listen_unix(const std::string& dir, int port) {
  std::string path = fmt::format("{}/.s.PGSQL.{}", dir, port);
  ::unlink(path.c_str());  // a stale socket of an earlier run
  auto* pipe = static_cast<uv_pipe_t*>(std::malloc(sizeof(uv_pipe_t)));
  uv_pipe_init(&loop_, pipe, 0);
  pipe->data = this;
  int rc = uv_pipe_bind(pipe, path.c_str());
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(pipe), kListenBacklog, on_connection);
  if (rc != 0) {
    spdlog::error("could not listen on {}: {}", path, uv_strerror(rc));
    close_and_free_listener(reinterpret_cast<uv_stream_t*>(pipe));
    return false;
  }
  ::chmod(path.c_str(), 0777);
  spdlog::info("listening on {}", path);
  listeners_.emplace_back(reinterpret_cast<uv_stream_t*>(pipe), close_and_free_listener);
  return true;
}

void Worker::on_connection(uv_stream_t* listener, int status) {
  auto* self = static_cast<Worker*>(listener->data);
  if (status < 0) {
    spdlog::warn("accept failed: {}", uv_strerror(status));
    return;
  }
  self->accept_client(listener);
}

void Worker::accept_client(uv_stream_t* listener) {
  if (group_.size() > 1) {
    Worker& target = group_.next_for_client();
    if (&target != this) {
      hand_off(listener, target);
      return;
    }
  }
  auto* client = new Client(*this, next_client_id());
  Channel& channel = client->channel();
  int rc = listener->type == UV_TCP ? channel.init_tcp() : channel.init_pipe();
  if (rc == 0) rc = uv_accept(listener, channel.stream());
  clients_.push_back(*client);
  group_.client_count().fetch_add(1, std::memory_order_relaxed);
  if (rc != 0) {
    spdlog::warn("accept failed: {}", uv_strerror(rc));
    client->close("accept failed");
    return;
  }
  if (channel.is_tcp()) uv_tcp_nodelay(channel.tcp(), 1);
  client->start();
}

void Worker::hand_off(uv_stream_t* listener, Worker& target) {
  // libuv has accepted the socket already: a handle of this loop takes it, a duplicate of its
  // descriptor goes to the target's loop, and the handle closes (its descriptor with it).
  const bool tcp = listener->type == UV_TCP;
  auto* handle = static_cast<uv_stream_t*>(std::malloc(tcp ? sizeof(uv_tcp_t) : sizeof(uv_pipe_t)));
  int rc = tcp ? uv_tcp_init(&loop_, reinterpret_cast<uv_tcp_t*>(handle))
               : uv_pipe_init(&loop_, reinterpret_cast<uv_pipe_t*>(handle), 0);
  if (rc != 0) {
    std::free(handle);
    spdlog::warn("accept failed: {}", uv_strerror(rc));
    return;
  }
  rc = uv_accept(listener, handle);
  uv_os_fd_t fd = -1;
  if (rc == 0) rc = uv_fileno(reinterpret_cast<uv_handle_t*>(handle), &fd);
  const int copy = rc == 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  close_and_free_listener(handle);
  if (copy < 0) {
    spdlog::warn("accept failed: {}", rc != 0 ? uv_strerror(rc) : std::strerror(errno));
    return;
  }
  // Counted until adopted: a shutdown that waits for clients to leave waits for this one too
  // (otherwise the process could exit with the connection in the queue, and reset it).
  std::atomic<size_t>& in_flight = group_.handoffs_in_flight();
  in_flight.fetch_add(1, std::memory_order_relaxed);
  const bool posted = target.post([&target, &in_flight, copy, tcp] {
    target.adopt_client(copy, tcp);
    in_flight.fetch_sub(1, std::memory_order_relaxed);
  });
  if (!posted) {
    in_flight.fetch_sub(1, std::memory_order_relaxed);
    ::close(copy);
  }
}

void Worker::drain_listeners() {
  for (auto& listener : listeners_) {
    uv_os_fd_t fd = -1;
    if (uv_fileno(reinterpret_cast<uv_handle_t*>(listener.get()), &fd) != 0) continue;
    const bool tcp = listener->type == UV_TCP;
    for (;;) {
      int conn = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (conn < 0) {
        if (errno == EINTR) continue;
        break;  // EAGAIN: the queue is empty
      }
      adopt_client(conn, tcp);
    }
  }
}

void Worker::adopt_client(int fd, bool tcp) {
  auto* client = new Client(*this, next_client_id());
  Channel& channel = client->channel();
  int rc = tcp ? channel.init_tcp() : channel.init_pipe();
  if (rc == 0) rc = tcp ? uv_tcp_open(channel.tcp(), fd) : uv_pipe_open(channel.pipe(), fd);
  clients_.push_back(*client);
  group_.client_count().fetch_add(1, std::memory_order_relaxed);
  if (rc != 0) {
    ::close(fd);
    client->close("accept failed");
    return;
  }
  if (tcp) uv_tcp_nodelay(channel.tcp(), 1);
  client->start();
}

}  // namespace pgsluice
