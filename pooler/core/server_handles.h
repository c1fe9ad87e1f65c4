// The libuv handles and requests of a server connection besides its channel: the name lookup,
// the connect, the timer (connect timeout, then the linger after Terminate), and what a move to
// another worker carries. A Server is deleted only when none of them still points at it
// (Server::maybe_destroy), so their open/closed state is kept here beside them.
#pragma once

#include <uv.h>

namespace pgsluice {

class Worker;

struct ServerHandles {
  uv_getaddrinfo_t resolve_req{};
  uv_connect_t connect_req{};
  uv_timer_t timer{};
  bool resolving = false;
  bool connecting = false;
  bool timer_open = false;
  bool channel_open = false;
  const char* connect_failure = nullptr;  // Server::connect_failed()'s words
};

// A server leaving for another worker (server_release.cc): where to, its duplicated socket, and
// whether the target asked for it (Pool::ask_other_workers).
struct ServerMoveOut {
  Worker* target = nullptr;
  int fd = -1;
  bool answers_ask = false;
};

}  // namespace pgsluice
