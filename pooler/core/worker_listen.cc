// The primary's listening sockets and what arrives on them: listen_addr resolved and bound, the
// Unix socket with its mode and group, accepted connections tuned (socket_options.h) and spread
// over the workers. Kept apart from worker.cc, the event loop.
#include <fcntl.h>
#include <grp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "pooler/core/takeover.h"
#include "pooler/core/worker.h"
#include "pooler/net/listen_socket.h"
#include "pooler/net/socket_options.h"

namespace pgsluice {

namespace {

void close_and_free_listener(uv_stream_t* stream) {
  uv_close(reinterpret_cast<uv_handle_t*>(stream),
           [](uv_handle_t* h) { std::free(h); });  // allocated with malloc in listen_*()
}

int listener_fd(uv_stream_t* listener) {
  uv_os_fd_t fd = -1;
  return uv_fileno(reinterpret_cast<uv_handle_t*>(listener), &fd) == 0 ? fd : -1;
}

// unix_socket_group as a gid: a number, else a group name. Empty: none to set.
std::string group_id(const std::string& name, gid_t& gid) {
  char* end = nullptr;
  const unsigned long n = std::strtoul(name.c_str(), &end, 10);
  if (!name.empty() && *end == '\0') {
    gid = static_cast<gid_t>(n);
    return {};
  }
  const struct group* found = ::getgrnam(name.c_str());
  if (found == nullptr) return "unix_socket_group: could not find group '" + name + "'";
  gid = found->gr_gid;
  return {};
}

// Whether a running process answers on the Unix socket `path` (another pgsluice or PgBouncer
// on the same port): its socket must not be unlinked from under it.
bool unix_socket_answers(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool answers = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return answers;
}

std::string unix_socket_path(const std::string& dir, int port) {
  return fmt::format("{}/.s.PGSQL.{}", dir, port);
}

}  // namespace

std::string Worker::open_listeners() {
  const Settings& s = settings();
  // -R: the old process's sockets, which are this port's already.
  if (std::string err; adopt_taken_listeners(err) || !err.empty()) return err;
  // As PgBouncer, before any port is taken: a live process on the Unix socket is one already
  // serving this port.
  if (!s.unix_socket_dir.empty() &&
      unix_socket_answers(unix_socket_path(s.unix_socket_dir, s.listen_port))) {
    return "unix socket is in use, cannot continue";
  }
  // The Unix socket first, with its mode and group, so that once a TCP port accepts (what
  // scripts and the tests wait for) the socket file is there as configured.
  if (!s.unix_socket_dir.empty()) {
    if (std::string err = listen_unix(s.unix_socket_dir, s.listen_port); !err.empty()) {
      listeners_.clear();
      return err;
    }
  }
  const std::vector<std::string> named = split_listen_addr(s.listen_addr);
  if (!named.empty()) {
    ListenAddresses resolved = resolve_listen_addresses(s.listen_addr, s.listen_port);
    if (!resolved.error.empty()) {
      listeners_.clear();
      return resolved.error;
    }
    bool any = false;
    for (const ListenAddress& a : resolved.addresses) any |= listen_tcp(a);
    // As PgBouncer: one address of several may fail (a name's IPv6 address on a host without
    // IPv6), but not all of them.
    if (!any) {
      listeners_.clear();
      return "failed to listen on any address in listen_addr list: " + s.listen_addr;
    }
  }
  if (listeners_.empty()) return "nowhere to listen on: listen_addr and unix_socket_dir are empty";
  return {};
}

bool Worker::listen_tcp(const ListenAddress& address) {
  const Settings& s = settings();
  const auto* addr = reinterpret_cast<const sockaddr*>(&address.addr);
  auto* tcp = static_cast<uv_tcp_t*>(std::malloc(sizeof(uv_tcp_t)));
  uv_tcp_init(&loop_, tcp);
  tcp->data = this;
  const char* step = "bind";
  int rc = 0;
  if (s.so_reuseport) {
    int fd = bind_reuseport_socket(addr);
    rc = fd < 0 ? fd : uv_tcp_open(tcp, fd);
    if (fd >= 0 && rc != 0) ::close(fd);
  } else {
    rc = uv_tcp_bind(tcp, addr, addr->sa_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
  }
  if (rc == 0) {
    // libuv reports a bind's EADDRINUSE at listen.
    step = "listen";
    rc = uv_listen(reinterpret_cast<uv_stream_t*>(tcp), s.listen_backlog, on_connection);
  }
  if (rc != 0) {
    spdlog::warn("cannot listen on {}: {}(): {}", address.text, step, uv_strerror(rc));
    close_and_free_listener(reinterpret_cast<uv_stream_t*>(tcp));
    return false;
  }
  if (std::string err =
          set_defer_accept(listener_fd(reinterpret_cast<uv_stream_t*>(tcp)), s.tcp_defer_accept);
      !err.empty()) {
    spdlog::warn("tcp_defer_accept on {}: {}", address.text, err);
  }
  spdlog::info("listening on {}", address.text);
  listeners_.emplace_back(reinterpret_cast<uv_stream_t*>(tcp), close_and_free_listener);
  return true;
}

std::string Worker::listen_unix(const std::string& dir, int port) {
  const Settings& s = settings();
  const std::string path = unix_socket_path(dir, port);
  // PostgreSQL's own socket has a lock file beside it: that one is not a stale socket of ours.
  struct stat st {};
  if (::lstat((path + ".lock").c_str(), &st) == 0)
    return fmt::format("unix port {} is in use", port);
  gid_t gid = static_cast<gid_t>(-1);
  if (!s.unix_socket_group.empty()) {
    if (std::string err = group_id(s.unix_socket_group, gid); !err.empty()) return err;
  }
  ::unlink(path.c_str());  // a stale socket of an earlier run
  auto* pipe = static_cast<uv_pipe_t*>(std::malloc(sizeof(uv_pipe_t)));
  uv_pipe_init(&loop_, pipe, 0);
  pipe->data = this;
  int rc = uv_pipe_bind(pipe, path.c_str());
  if (rc != 0) {
    close_and_free_listener(reinterpret_cast<uv_stream_t*>(pipe));
    return fmt::format("failed to create unix socket {}: {}", path, uv_strerror(rc));
  }
  listeners_.emplace_back(reinterpret_cast<uv_stream_t*>(pipe), close_and_free_listener);
  // Group and mode before listen(): no connection is taken while the file has the umask's mode.
  if (gid != static_cast<gid_t>(-1) && ::chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    return fmt::format("chown({}, group {}) failed: {}", path, s.unix_socket_group,
                       std::strerror(errno));
  }
  if (::chmod(path.c_str(), static_cast<mode_t>(s.unix_socket_mode)) != 0) {
    return fmt::format("chmod({}, 0{:o}) failed: {}", path, s.unix_socket_mode,
                       std::strerror(errno));
  }
  rc = uv_listen(listeners_.back().get(), s.listen_backlog, on_connection);
  if (rc != 0) return fmt::format("failed to create unix socket {}: {}", path, uv_strerror(rc));
  spdlog::info("listening on {}", path);
  return {};
}

void Worker::set_listeners_defer_accept() {
  for (auto& listener : listeners_) {
    if (listener->type != UV_TCP) continue;
    if (std::string err =
            set_defer_accept(listener_fd(listener.get()), settings().tcp_defer_accept);
        !err.empty()) {
      spdlog::warn("tcp_defer_accept: {}", err);
    }
  }
}

bool Worker::tune_client_socket(Client& client) {
  Channel& channel = client.channel();
  uv_tcp_nodelay(channel.tcp(), 1);
  channel.set_send_chunk(static_cast<size_t>(settings().tcp_socket_buffer));
  uv_os_fd_t fd = -1;
  std::string err = uv_fileno(reinterpret_cast<uv_handle_t*>(channel.tcp()), &fd) == 0
                        ? apply_tcp_options(fd, settings())
                        : "no descriptor";
  if (err.empty()) return true;
  spdlog::warn("{} closed: {}", client.log_id(), err);
  client.close("socket options failed");
  return false;
}

void Worker::on_connection(uv_stream_t* listener, int status) {
  auto* self = static_cast<Worker*>(listener->data);
  if (status < 0) {
    spdlog::warn("accept failed: {}", uv_strerror(status));
    return;
  }
  self->accept_client(listener);
}

Client* Worker::open_client(int fd, bool tcp, std::string_view failure) {
  auto* client = new Client(*this, next_socket_id());
  Channel& channel = client->channel();
  int rc = tcp ? channel.init_tcp() : channel.init_pipe();
  if (rc == 0) rc = tcp ? uv_tcp_open(channel.tcp(), fd) : uv_pipe_open(channel.pipe(), fd);
  clients_.push_back(*client);
  placed_clients_.fetch_add(1, std::memory_order_relaxed);
  group_.client_count().fetch_add(1, std::memory_order_relaxed);
  if (rc != 0) {
    ::close(fd);
    client->close(failure);
    return nullptr;
  }
  if (tcp && !tune_client_socket(*client)) return nullptr;
  return client;
}

void Worker::adopt_client(int fd, bool tcp) {
  Client* client = open_client(fd, tcp, "accept failed");
  if (client == nullptr) return;
  client->start();
}

void Worker::accept_client(uv_stream_t* listener) {
  if (group_.size() > 1) {
    Worker& target = group_.next_for_client(static_cast<size_t>(settings().spread_clients_above));
    if (&target != this) {
      hand_off(listener, target);
      return;
    }
  }
  auto* client = new Client(*this, next_socket_id());
  Channel& channel = client->channel();
  int rc = listener->type == UV_TCP ? channel.init_tcp() : channel.init_pipe();
  if (rc == 0) rc = uv_accept(listener, channel.stream());
  clients_.push_back(*client);
  placed_clients_.fetch_add(1, std::memory_order_relaxed);
  group_.client_count().fetch_add(1, std::memory_order_relaxed);
  if (rc != 0) {
    spdlog::warn("accept failed: {}", uv_strerror(rc));
    client->close("accept failed");
    return;
  }
  if (channel.is_tcp() && !tune_client_socket(*client)) return;
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
  // Counted on the target from now: the next placement sees it (adopting counts it again).
  target.placed_clients_.fetch_add(1, std::memory_order_relaxed);
  const bool posted = target.post([&target, &in_flight, copy, tcp] {
    target.adopt_client(copy, tcp);
    target.placed_clients_.fetch_sub(1, std::memory_order_relaxed);
    in_flight.fetch_sub(1, std::memory_order_relaxed);
  });
  if (!posted) {
    target.placed_clients_.fetch_sub(1, std::memory_order_relaxed);
    in_flight.fetch_sub(1, std::memory_order_relaxed);
    ::close(copy);
  }
}

void Worker::drain_tcp_listeners() {
  for (auto& listener : listeners_) {
    const int fd = listener_fd(listener.get());
    if (fd < 0 || listener->type != UV_TCP) continue;
    for (;;) {
      int conn = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (conn < 0) {
        if (errno == EINTR) continue;
        break;  // EAGAIN: the queue is empty
      }
      adopt_client(conn, /*tcp=*/true);
    }
  }
}

}  // namespace pgsluice
