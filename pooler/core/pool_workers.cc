// How the shares of one pool on different workers (pool.h) pass servers and slots to each
// other (shared_limits.h): a worker whose clients starve for a slot tells the others, which give
// up a server they can spare; a server that goes passes its slots to a starving worker.
#include <spdlog/spdlog.h>

#include "pooler/core/pool.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace {
// An idle server unused this long, with nobody waiting for it, is spare: another worker whose
// clients starve may have its slot (Pool::yield_idle_server_to_other_worker()).
constexpr uint64_t kSpareIdleMs = 100;
// ... and this long when nothing else of the pool runs on its worker.
constexpr uint64_t kQuietIdleMs = 1;
}  // namespace

void Pool::note_starving(LaunchVerdict verdict) {
  WorkerGroup& group = worker_.group();
  if (group.size() == 1) return;
  if (!SharedLimits::note_starving(limit_slots_, verdict, worker_.index())) return;
  // Once per starving spell: each other worker closes an idle server it does not need, if any.
  const LimitSlots slots = limit_slots_;
  group.for_each_worker([&](Worker& w) {
    if (&w != &worker_) w.post([&w, slots] { w.yield_idle_server(slots); });
  });
}

SharedLimits::YieldTo Pool::yield_to_other_worker() {
  WorkerGroup& group = worker_.group();
  if (group.size() == 1 || !SharedLimits::other_starving(limit_slots_, worker_.index())) {
    return {};
  }
  // Towards the longest wait and towards balance only (shared_limits.h): a worker whose clients
  // are between two queries has nobody waiting for a moment, and giving its server away then
  // would move servers back and forth at every transaction. Servers idle for longer go from
  // the janitor (yield_idle_server_to_other_worker).
  return SharedLimits::yield_target(limit_slots_, worker_.index(), now_us(),
                                    waiting_.empty() ? 0 : oldest_wait_start_us());
}

bool Pool::hand_to_starving_worker(Server& server, int to) {
  if (!server.movable()) {
    // Its slot follows it to the starving worker once its socket is closed (give_back_slot).
    server.close("pool limit: handed to another worker whose clients wait");
    return true;
  }
  if (!SharedLimits::claim_starving(limit_slots_, to)) return false;
  SharedLimits::move_slots(limit_slots_, worker_.index(), to);
  if (!server.move_to(worker_.group().worker(to), /*answers_ask=*/false)) {
    SharedLimits::move_slots(limit_slots_, to, worker_.index());
    SharedLimits::restore_starving(limit_slots_, to);
    server.close("pool limit: handed to another worker whose clients wait");
  }
  return true;
}

bool Pool::give_back_slot() {
  WorkerGroup& group = worker_.group();
  const SharedLimits::Release release = SharedLimits::release(limit_slots_, worker_.index());
  const LimitSlots slots = limit_slots_;
  if (release.handed_to >= 0) {
    Worker& to = group.worker(release.handed_to);
    if (!to.post([&to, slots] { to.take_handed_slot(slots); })) {
      // That worker has stopped: the slot comes back here, and is released for good.
      SharedLimits::release(slots, release.handed_to);
    }
    return true;
  }
  if (release.wake != 0) {
    group.for_each_worker([&](Worker& w) {
      if ((release.wake >> static_cast<unsigned>(w.index())) & 1U) {
        w.post([&w, slots] { w.retry_starving(slots); });
      }
    });
  }
  return false;
}

bool Pool::launch_on_handed_slot() {
  if (!paused_ && !worker_.stopping() && !replication_waiting_.empty()) {
    launch_replication_server(*replication_waiting_.pop_front());
    return true;
  }
  if (!paused_ && !worker_.stopping() && wants_server()) {
    launch_server();
    return true;
  }
  give_back_slot();
  return false;
}

void Pool::publish_wait() {
  if (worker_.group().size() == 1) return;
  const uint64_t oldest = waiting_.empty() ? 0 : waiting_.front().wait.started_us;
  if (oldest == published_wait_us_) return;
  published_wait_us_ = oldest;
  limit_slots_.pool->waiting_since_us[static_cast<size_t>(worker_.index())].store(
      oldest, std::memory_order_relaxed);
}

bool Pool::yield_idle_server_to_other_worker() {
  if (idle_.empty() || !waiting_.empty() || !pooler_waiting_.empty()) return false;
  if (!SharedLimits::other_starving(limit_slots_, worker_.index())) return false;
  Server* oldest = nullptr;
  idle_.for_each([&](Server& s) {
    if (oldest == nullptr || s.life.idle_since_ms < oldest->life.idle_since_ms) oldest = &s;
  });
  // A server idle for 100 ms with nobody waiting here is spare, and one idle for 1 ms when
  // nothing else of the pool runs here (a client that left, not one between two queries); one
  // idle only between two transactions of a busy worker goes by yield_target's rules.
  const uint64_t now = worker_.now_ms();
  const uint64_t idle_ms = now >= oldest->life.idle_since_ms ? now - oldest->life.idle_since_ms : 0;
  const bool spare = (active_.empty() && idle_ms >= kQuietIdleMs) || idle_ms >= kSpareIdleMs;
  SharedLimits::YieldTo to = SharedLimits::yield_target(limit_slots_, worker_.index(), now_us(), 0);
  if (to.worker < 0 && spare) to = SharedLimits::any_starving(limit_slots_, worker_.index());
  if (to.worker < 0) return false;
  if (to.same_pool()) return hand_to_starving_worker(*oldest, to.worker);
  // The other worker starves for the database's or the user's slot, for another pool.
  oldest->close(to.close_reason());
  return true;
}

// --- one pool per process: an idle server of any worker before a new login ---

bool Pool::ask_other_workers() {
  WorkerGroup& group = worker_.group();
  if (group.size() == 1) return false;
  const int me = worker_.index();
  Worker& next = group.worker((me + 1) % group.size());
  const LimitSlots slots = limit_slots_;
  const int hops = group.size() - 1;
  if (!next.post([&next, slots, me, hops] { next.offer_server(slots, me, hops); })) return false;
  asking_ = true;
  return true;
}

bool Pool::offer_idle_server(int to) {
  // PgBouncer's one pool gives an idle server to whoever asks; a client waiting here comes first.
  if (paused_ || removed_ || worker_.stopping() || idle_.empty() || !waiting_.empty() ||
      !pooler_waiting_.empty()) {
    return false;
  }
  // The next one to serve here: the most recently used (warm, its statements prepared), or the
  // longest idle under server_round_robin.
  Server& server = idle_.front();
  if (!server.movable()) return false;
  SharedLimits::move_slots(limit_slots_, worker_.index(), to);
  if (!server.move_to(worker_.group().worker(to), /*answers_ask=*/true)) {
    SharedLimits::move_slots(limit_slots_, to, worker_.index());
    return false;
  }
  return true;
}

void Pool::on_no_server_offered() {
  asking_ = false;
  if (wants_more_servers()) try_launch(/*evict=*/true, /*ask_first=*/false);
}

void Pool::adopt_moved_server(Server& server, int fd, bool answers_ask) {
  if (answers_ask) asking_ = false;
  adopt_shared_welcome();
  server.arrive(*this, fd);
  if (server.state() != Server::State::idle) return;  // the socket could not be opened here
  if (worker_.stopping()) {
    // Posted before this worker stopped and run after: nothing else would close it, and its
    // handles would keep the loop from ending.
    server.close("pgsluice is shutting down");
    return;
  }
  on_server_idle(server);
  // More clients may wait than this server serves.
  launch_for_waiters();
}

}  // namespace pgsluice
