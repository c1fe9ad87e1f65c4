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

bool Pool::yield_to_other_worker() {
  WorkerGroup& group = worker_.group();
  if (group.size() == 1 || !SharedLimits::other_starving(limit_slots_, worker_.index())) {
    return false;
  }
  // Only towards balance (shared_limits.h): a worker whose clients are between two queries has
  // nobody waiting and nothing running for a moment, and giving its server away then would
  // trade servers (a login each) at every transaction. Servers idle for longer go from the
  // janitor (yield_idle_server_to_other_worker).
  return SharedLimits::should_yield(limit_slots_, worker_.index(), now_us(),
                                    waiting_.empty() ? 0 : oldest_wait_start_us());
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
  if (!paused_ && !worker_.stopping() && wants_server()) {
    launch_server();
    return true;
  }
  give_back_slot();
  return false;
}

void Pool::publish_wait() {
  if (worker_.group().size() == 1) return;
  const uint64_t oldest = waiting_.empty() ? 0 : waiting_.front().wait_started_us;
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
  // A server idle for a while with nobody waiting here is spare; one that is idle only between
  // two transactions of a busy worker goes only towards balance (shared_limits.h).
  const uint64_t now = worker_.now_ms();
  const bool spare = active_.empty() || now >= oldest->life.idle_since_ms + kSpareIdleMs;
  if (!spare && !SharedLimits::should_yield(limit_slots_, worker_.index(), now_us(), 0)) {
    return false;
  }
  oldest->close("pool limit: handed to another worker whose clients wait");
  return true;
}

}  // namespace pgsluice
