// A server changing workers (one pool per process, docs/design.md): an idle server leaves one
// worker's share of its pool for another's without a new backend login. A libuv handle belongs
// to one loop, so the socket goes as a duplicate descriptor (Channel::detach/attach) and the
// Server object itself is posted to the other worker once its old loop has let go of it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "pooler/base/log_level.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace {
// A server between two workers is owned by the task that carries it: a task that never runs
// (its worker stopped first) still closes the socket and frees the server.
struct ServerInTransit {
  Server* server;
  int fd;
  ServerInTransit(Server* s, int f) : server(s), fd(f) {}
  ServerInTransit(const ServerInTransit&) = delete;
  ServerInTransit& operator=(const ServerInTransit&) = delete;
  ~ServerInTransit() {
    if (server == nullptr) return;
    ::close(fd);
    delete server;
  }
};
}  // namespace

// --- Server ---

bool Server::movable() const {
  return state_ == State::idle && client_ == nullptr && query_sink_ == nullptr && !life.checking &&
         !session_.pin.pinned && !session_.dirty.any() && !rewrite_.retry.holding_error &&
         !session_.verifier.awaiting() && passthrough_remaining_ == 0 &&
         replies_.internal_ready_owed() == 0 && replies_.at_transaction_boundary() && rewrite_.pending.empty() &&
         handles_.channel_open && handles_.timer_open && !handles_.resolving &&
         !handles_.connecting &&
         !uv_is_closing(reinterpret_cast<const uv_handle_t*>(&handles_.timer)) &&
         channel_.can_detach();
}

bool Server::move_to(Worker& target, bool answers_ask) {
  if (!movable()) return false;
  const int fd = channel_.detach();
  if (fd < 0) return false;
  move_.target = &target;
  move_.fd = fd;
  move_.answers_ask = answers_ask;
  set_state(State::moving);  // off the pool's lists
  worker_->count_server_moved_out();
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("{} moves to worker {}", log_id(), target.index());
  }
  uv_timer_stop(&handles_.timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&handles_.timer), on_timer_closed);
  return true;
}

void Server::finish_move_out() {
  Worker& target = *move_.target;
  move_.target = nullptr;
  // After this call the server belongs to the target's thread.
  worker_->send_server(target, *this, std::exchange(move_.fd, -1), move_.answers_ask);
}

void Server::arrive(Pool& pool, int fd) {
  pool_ = &pool;
  worker_ = &pool.worker();
  uv_timer_init(worker_->loop(), &handles_.timer);
  handles_.timer.data = this;
  handles_.timer_open = true;
  handles_.channel_open = true;
  // Out of `moving` first: close() ignores a moving server, and a socket that cannot be opened
  // here must close like any other (its slot given back when the handles are done).
  set_state(State::idle);
  if (int rc = channel_.attach(worker_->loop(), fd); rc != 0) {
    close(
        fmt::format("could not take over the connection from another worker: {}", uv_strerror(rc)));
    return;
  }
  channel_.start_reading();
}

// --- Worker ---

void Worker::send_server(Worker& target, Server& server, int fd, bool answers_ask) {
  auto transit = std::make_shared<ServerInTransit>(&server, fd);
  const LimitSlots slots = server.pool().limit_slots();
  target.post([&target, transit, slots, db = server.pool().database(),
               user = server.pool().credentials().user, answers_ask] {
    Server* moved = std::exchange(transit->server, nullptr);
    target.receive_server(*moved, transit->fd, slots, db, user, answers_ask);
  });
  // A post refused (the target stopped) drops the task, and with it the server.
}

void Worker::receive_server(Server& server, int fd, const LimitSlots& slots,
                            const DatabaseEntry& db, const std::string& user, bool answers_ask) {
  ++servers_moved_in_;
  Pool* pool = find_pool(slots);
  // A worker is given servers only for pools it has (it starved or asked), and pools stay.
  if (pool == nullptr) pool = &pool_for(db, user);
  pool->adopt_moved_server(server, fd, answers_ask);
}

Pool* Worker::find_pool(const LimitSlots& slots) {
  for (auto& [key, pool] : pools_) {
    if (pool->limit_slots().pool == slots.pool) return pool.get();
  }
  return nullptr;
}

void Worker::offer_server(const LimitSlots& slots, int requester, int hops_left) {
  if (Pool* pool = find_pool(slots); pool != nullptr && pool->offer_idle_server(requester)) return;
  const int size = group_.size();
  if (hops_left > 1) {
    int next = (index_ + 1) % size;
    if (next == requester) next = (next + 1) % size;
    Worker& w = group_.worker(next);
    if (w.post([&w, slots, requester, hops_left] {
          w.offer_server(slots, requester, hops_left - 1);
        })) {
      return;
    }
  }
  Worker& back = group_.worker(requester);
  back.post([&back, slots] {
    if (Pool* pool = back.find_pool(slots)) pool->on_no_server_offered();
  });
}

}  // namespace pgsluice
