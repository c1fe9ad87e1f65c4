// Online restart (takeover.h), the workers' part: the old process's SHOW FDS (its listeners and
// movable clients written with their descriptors, then forgotten), and the new process's
// adoption of them (the listeners instead of binding, each client on the worker its cancel key
// names, so that a CancelRequest for it still finds it).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>

#include "pgsluice/protocol/writer.h"
#include "pooler/core/cancel_key.h"
#include "pooler/core/client.h"
#include "pooler/core/takeover.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

namespace {

int handle_fd(uv_handle_t* handle) {
  uv_os_fd_t fd = -1;
  return uv_fileno(handle, &fd) == 0 ? fd : -1;
}

std::string fds_row(int fd, std::string_view task, std::string_view user, std::string_view db,
                    bool tcp, std::string_view state) {
  const std::string fd_text = std::to_string(fd);
  const std::optional<std::string_view> values[] = {fd_text, task, user, db, tcp ? "tcp" : "unix",
                                                    state};
  std::string out;
  pp::write_data_row(out, values);
  return out;
}

}  // namespace

std::string Worker::hand_over_sockets(int socket) {
  std::string out;
  const std::string_view names[] = {"fd", "task", "user", "database", "socket", "state"};
  const uint32_t types[] = {pp::kOidInt4, pp::kOidText, pp::kOidText,
                            pp::kOidText, pp::kOidText, pp::kOidText};
  pp::write_text_row_description(out, names, types);
  if (!send_all(socket, out)) return "SHOW FDS: the console connection failed";
  size_t listeners = 0;
  for (auto& listener : listeners_) {
    const int fd = handle_fd(reinterpret_cast<uv_handle_t*>(listener.get()));
    const bool tcp = listener->type == UV_TCP;
    if (fd < 0 || !send_with_descriptor(socket, fds_row(fd, "pooler", "", "", tcp, ""), fd)) {
      return "SHOW FDS: could not pass a listening socket";
    }
    ++listeners;
  }
  // The new process has them now: this one stops accepting. Closing a bound uv_pipe_t unlinks
  // its path, which is the new process's socket from now on: libuv is told it has none.
  for (auto& listener : listeners_) {
    if (listener->type != UV_NAMED_PIPE) continue;
    auto* pipe = reinterpret_cast<uv_pipe_t*>(listener.get());
    std::free(const_cast<char*>(pipe->pipe_fname));
    pipe->pipe_fname = nullptr;
  }
  listeners_.clear();
  std::vector<Client*> moving;
  for_each_client([&](Client& c) {
    TakeoverClient state;
    if (!c.export_state(state)) return;
    const int fd = handle_fd(reinterpret_cast<uv_handle_t*>(c.channel().stream()));
    const std::string row = fds_row(fd, "client", state.user, state.database, c.channel().is_tcp(),
                                    encode_takeover_client(state));
    if (fd >= 0 && send_with_descriptor(socket, row, fd)) moving.push_back(&c);
  });
  // Closing this process's descriptor leaves the connection to the new process's copy.
  for (Client* c : moving) c->close("taken over by the new process (online restart)");
  spdlog::info("online restart: passed {} listening sockets and {} clients", listeners,
               moving.size());
  return {};
}

void Worker::set_taken_over(std::vector<TakeoverSocket> sockets) {
  taken_over_ = std::move(sockets);
}

bool Worker::adopt_taken_listeners(std::string& error) {
  bool any = false;
  for (TakeoverSocket& s : taken_over_) {
    if (s.task != "pooler" || s.fd < 0) continue;
    auto* stream =
        static_cast<uv_stream_t*>(std::malloc(s.tcp ? sizeof(uv_tcp_t) : sizeof(uv_pipe_t)));
    int rc = s.tcp ? uv_tcp_init(&loop_, reinterpret_cast<uv_tcp_t*>(stream))
                   : uv_pipe_init(&loop_, reinterpret_cast<uv_pipe_t*>(stream), 0);
    if (rc == 0) {
      rc = s.tcp ? uv_tcp_open(reinterpret_cast<uv_tcp_t*>(stream), s.fd)
                 : uv_pipe_open(reinterpret_cast<uv_pipe_t*>(stream), s.fd);
    }
    stream->data = this;
    if (rc == 0) rc = uv_listen(stream, settings().listen_backlog, on_connection);
    listeners_.emplace_back(stream, [](uv_stream_t* h) {
      uv_close(reinterpret_cast<uv_handle_t*>(h), [](uv_handle_t* p) { std::free(p); });
    });
    if (rc != 0) {
      error = fmt::format("cannot listen on a taken-over socket: {}", uv_strerror(rc));
      return false;
    }
    s.fd = -1;
    any = true;
  }
  if (any) spdlog::info("online restart: listening on {} taken-over sockets", listeners_.size());
  return any;
}

void Worker::resume_taken_clients() {
  size_t count = 0;
  for (TakeoverSocket& s : taken_over_) {
    if (s.fd < 0) continue;
    if (s.task != "client") {  // not a listener adopt_taken_listeners took: nothing of ours
      ::close(s.fd);
      continue;
    }
    std::optional<TakeoverClient> state = decode_takeover_client(s.state);
    if (!state) {
      spdlog::warn("online restart: a client's state could not be read; its connection closes");
      ::close(s.fd);
      continue;
    }
    Worker& target = group_.worker(cancel_key::worker_of(state->cancel_pid, group_.size()));
    const int fd = s.fd;
    const bool tcp = s.tcp;
    if (!target.post([&target, fd, tcp, st = std::move(*state)]() mutable {
          target.resume_client(fd, tcp, std::move(st));
        })) {
      ::close(fd);
    }
    ++count;
  }
  taken_over_.clear();
  if (count > 0) spdlog::info("online restart: took over {} clients", count);
}

void Worker::resume_client(int fd, bool tcp, TakeoverClient state) {
  Client* client = open_client(fd, tcp, "taken over, but its socket could not be opened");
  if (client != nullptr) client->resume(std::move(state));
}

void Worker::adopt_cancel_key(Client& client) {
  cancel_index_.emplace(client.cancel_pid(), &client);
}

}  // namespace pgsluice
