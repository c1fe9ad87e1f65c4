// Global pool limits across workers (shared_limits.h): slots taken under one lock never exceed
// the limit, whichever thread asks; a starving worker is named to the others and woken when a
// slot it starved for is freed.
#include "pooler/core/shared_limits.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace pgsluice {
namespace {

LaunchInput sized(int pool_size, int max_db = 0, int max_user = 0) {
  LaunchInput in;
  in.pool_size = pool_size;
  in.max_db_connections = max_db;
  in.max_user_connections = max_user;
  return in;
}

// How many threads hold something at once, and the most that ever did.
struct PeakCounter {
  std::atomic<int> now{0};
  std::atomic<int> peak{0};
  void enter() {
    const int held = now.fetch_add(1) + 1;
    int seen = peak.load();
    while (held > seen && !peak.compare_exchange_weak(seen, held)) {
    }
  }
  void leave() { now.fetch_sub(1); }
};

TEST(SharedLimits, ReserveCountsAndRefusesAtPoolSize) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "alice");
  EXPECT_EQ(limits.reserve(app, sized(2), 0), LaunchVerdict::allowed);
  EXPECT_EQ(limits.reserve(app, sized(2), 1), LaunchVerdict::allowed);
  EXPECT_EQ(limits.reserve(app, sized(2), 0), LaunchVerdict::pool_full);
  LaunchInput in = sized(2);
  SharedLimits::totals(app, in);
  EXPECT_EQ(in.pool_servers, 2);
  EXPECT_EQ(in.db_servers, 2);
  EXPECT_EQ(in.user_servers, 2);
  // Every slot is free once the server's socket is closed (its backend is gone).
  SharedLimits::release(app, 0);
  SharedLimits::totals(app, in);
  EXPECT_EQ(in.pool_servers, 1);
  EXPECT_EQ(in.db_servers, 1);
  EXPECT_EQ(in.user_servers, 1);
  EXPECT_EQ(limits.reserve(app, sized(2), 1), LaunchVerdict::allowed);
}

TEST(SharedLimits, DatabaseAndUserLimitsSpanPools) {
  SharedLimits limits;
  const LimitSlots a = limits.slots_for("app", "alice");
  const LimitSlots b = limits.slots_for("app", "bob");
  const LimitSlots c = limits.slots_for("other", "alice");
  EXPECT_EQ(limits.reserve(a, sized(5, 2, 0), 0), LaunchVerdict::allowed);
  EXPECT_EQ(limits.reserve(b, sized(5, 2, 0), 1), LaunchVerdict::allowed);
  EXPECT_EQ(limits.reserve(b, sized(5, 2, 0), 1), LaunchVerdict::db_full);
  // alice holds one server of app; a second database's pool of hers takes the second slot.
  EXPECT_EQ(limits.reserve(c, sized(5, 0, 2), 0), LaunchVerdict::allowed);
  EXPECT_EQ(limits.reserve(c, sized(5, 0, 2), 0), LaunchVerdict::user_full);
}

TEST(SharedLimits, KeysDoNotCollideAcrossDatabaseAndUserNames) {
  SharedLimits limits;
  // "a" + "bc" and "ab" + "c" are different pools.
  EXPECT_NE(limits.slots_for("a", "bc").pool, limits.slots_for("ab", "c").pool);
  EXPECT_EQ(limits.slots_for("a", "bc").pool, limits.slots_for("a", "bc").pool);
  EXPECT_EQ(limits.reserve(limits.slots_for("a", "bc"), sized(1), 0), LaunchVerdict::allowed);
  EXPECT_EQ(limits.reserve(limits.slots_for("ab", "c"), sized(1), 0), LaunchVerdict::allowed);
}

TEST(SharedLimits, StarvingWorkerIsNamedOnceAndHandedTheNextFreedSlot) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  ASSERT_EQ(limits.reserve(app, sized(1), 0), LaunchVerdict::allowed);
  EXPECT_FALSE(SharedLimits::other_starving(app, 0));
  EXPECT_TRUE(SharedLimits::note_starving(app, LaunchVerdict::pool_full, 1));
  EXPECT_FALSE(SharedLimits::note_starving(app, LaunchVerdict::pool_full, 1));  // already known
  EXPECT_TRUE(SharedLimits::other_starving(app, 0));
  EXPECT_FALSE(SharedLimits::other_starving(app, 1));  // itself does not count
  // Another pool of the same database is not asked for a pool_size slot.
  EXPECT_FALSE(SharedLimits::other_starving(limits.slots_for("app", "other"), 0));
  // The slot passes to the starving worker: still counted, now held by worker 1.
  const SharedLimits::Release r = SharedLimits::release(app, 0);
  EXPECT_EQ(r.handed_to, 1);
  EXPECT_FALSE(SharedLimits::other_starving(app, 0));
  EXPECT_EQ(app.pool->servers.load(), 1);
  EXPECT_EQ(app.pool->held[0].load(), 0);
  EXPECT_EQ(app.pool->held[1].load(), 1);
  // Nobody starves now: the next release frees it.
  EXPECT_EQ(SharedLimits::release(app, 1).handed_to, -1);
  EXPECT_EQ(app.pool->servers.load(), 0);
}

TEST(SharedLimits, ReservingClearsThatWorkersStarvation) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  EXPECT_TRUE(SharedLimits::note_starving(app, LaunchVerdict::db_full, 2));
  EXPECT_TRUE(SharedLimits::other_starving(app, 0));
  ASSERT_EQ(limits.reserve(app, sized(3), 2), LaunchVerdict::allowed);
  EXPECT_FALSE(SharedLimits::other_starving(app, 0));
}

TEST(SharedLimits, ConcurrentReservationsNeverExceedTheLimit) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  PeakCounter held;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        if (!launch_allowed(limits.reserve(app, sized(3), t))) continue;
        held.enter();
        held.leave();
        SharedLimits::release(app, t);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(held.peak.load(), 3);
  EXPECT_GE(held.peak.load(), 1);
  LaunchInput in = sized(3);
  SharedLimits::totals(app, in);
  EXPECT_EQ(in.pool_servers, 0);
  EXPECT_EQ(in.db_servers, 0);
}

TEST(SharedLimits, ServersMoveOnlyTowardsBalance) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  // Worker 0 holds 3 of 4 slots, worker 1 holds 1 and starves.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(launch_allowed(limits.reserve(app, sized(4), 0)));
  ASSERT_TRUE(launch_allowed(limits.reserve(app, sized(4), 1)));
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'000'000, 0).worker, -1);  // nobody starves
  ASSERT_TRUE(SharedLimits::note_starving(app, LaunchVerdict::pool_full, 1));
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'000'000, 0).worker, 1);  // 3 vs 1: give one
  EXPECT_TRUE(SharedLimits::yield_target(app, 0, 1'000'000, 0).same_pool());
  EXPECT_EQ(SharedLimits::yield_target(app, 1, 1'000'000, 0).worker, -1);  // the starving one keeps
  SharedLimits::release(app, 0);
  // 2 vs 1: moving one would only swap the imbalance.
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'000'000, 0).worker, -1);
}

TEST(SharedLimits, AWorkerWithNoServerGetsOneAfterWaitingLonger) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  ASSERT_TRUE(launch_allowed(limits.reserve(app, sized(1), 0)));
  ASSERT_TRUE(SharedLimits::note_starving(app, LaunchVerdict::pool_full, 1));
  app.pool->waiting_since_us[1].store(1'000'000);
  // Not before its client waited 100 ms, and not to a worker whose client came later.
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'050'000, 0).worker, -1);
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'200'000, 0).worker, 1);
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'200'000, 1'100'000).worker, 1);
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'200'000, 900'000).worker, -1);
}

TEST(SharedLimits, AWorkerWhoseServersAreBusyGetsOneAfterWaitingLonger) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  // Worker 1 holds a server (a long query) and its next client waits; worker 0 holds one.
  ASSERT_TRUE(launch_allowed(limits.reserve(app, sized(2), 0)));
  ASSERT_TRUE(launch_allowed(limits.reserve(app, sized(2), 1)));
  ASSERT_TRUE(SharedLimits::note_starving(app, LaunchVerdict::pool_full, 1));
  app.pool->waiting_since_us[1].store(1'000'000);
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'050'000, 0).worker, -1);
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'200'000, 0).worker, 1);
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'200'000, 900'000).worker, -1);
}

TEST(SharedLimits, AServerThatArrivedForTheLongestWaitStays) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  // Worker 1 holds two (one busy), worker 0 none; both have clients waiting, 1's for longer.
  ASSERT_TRUE(launch_allowed(limits.reserve(app, sized(2), 1)));
  ASSERT_TRUE(launch_allowed(limits.reserve(app, sized(2), 1)));
  ASSERT_TRUE(SharedLimits::note_starving(app, LaunchVerdict::pool_full, 0));
  ASSERT_TRUE(SharedLimits::note_starving(app, LaunchVerdict::pool_full, 1));
  app.pool->waiting_since_us[0].store(1'150'000);
  app.pool->waiting_since_us[1].store(1'000'000);
  // Worker 1 keeps the server for its own client however many it holds; worker 0 would give
  // one to worker 1.
  EXPECT_EQ(SharedLimits::yield_target(app, 1, 1'300'000, 1'000'000).worker, -1);
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'300'000, 1'150'000).worker, 1);
  // A head start of less than 100 ms does not move a server.
  EXPECT_EQ(SharedLimits::yield_target(app, 0, 1'300'000, 1'050'000).worker, -1);
}

TEST(SharedLimits, AServerThatChangesWorkersTakesItsSlotsAlong) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  const LimitSlots other_user = limits.slots_for("app", "report");
  ASSERT_TRUE(launch_allowed(limits.reserve(app, sized(1), 0)));
  ASSERT_TRUE(SharedLimits::note_starving(app, LaunchVerdict::pool_full, 1));
  // One claim ends worker 1's spell: a second server (another worker's) does not also go.
  EXPECT_TRUE(SharedLimits::claim_starving(app, 1));
  EXPECT_FALSE(SharedLimits::claim_starving(app, 1));
  SharedLimits::move_slots(app, 0, 1);
  EXPECT_EQ(app.pool->servers.load(), 1);
  EXPECT_EQ(app.pool->held[0].load(), 0);
  EXPECT_EQ(app.pool->held[1].load(), 1);
  EXPECT_EQ(app.db->held[1].load(), 1);
  EXPECT_EQ(app.user->held[0].load(), 0);
  EXPECT_EQ(other_user.user->held[1].load(), 0);
  // A move that failed gives the spell back to whoever is next.
  SharedLimits::restore_starving(app, 1);
  EXPECT_TRUE(SharedLimits::other_starving(app, 0));
}

TEST(SharedLimits, AWorkerStarvingForTheDatabaseIsNotAServerOfThisPool) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  const LimitSlots report = limits.slots_for("app", "report");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(launch_allowed(limits.reserve(app, sized(4), 0)));
  ASSERT_TRUE(SharedLimits::note_starving(report, LaunchVerdict::db_full, 1));
  const SharedLimits::YieldTo to = SharedLimits::yield_target(app, 0, 1'000'000, 0);
  EXPECT_EQ(to.worker, 1);
  EXPECT_FALSE(to.same_pool());
  EXPECT_EQ(to.starving_for,
            LaunchVerdict::db_full);  // it needs a login of its own: the server closes
}

TEST(SharedLimits, OnlyOneWorkerBeginsTheLoginAndTheOtherIsToldWhenItEnds) {
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  EXPECT_TRUE(SharedLimits::begin_only_login(app, 0));
  EXPECT_FALSE(SharedLimits::begin_only_login(app, 1));
  EXPECT_EQ(SharedLimits::logins(app), 1);
  EXPECT_EQ(SharedLimits::login_ended(app), uint64_t{1} << 1);  // worker 1 is told
  EXPECT_EQ(SharedLimits::logins(app), 0);
  EXPECT_TRUE(SharedLimits::begin_only_login(app, 1));
  EXPECT_EQ(SharedLimits::login_ended(app), 0u);  // nobody waited
}

TEST(SharedLimits, ConcurrentLoginBeginsNeverOverlap) {
  // Two workers that both see no login in flight must not both start one (a CI failure: two
  // logins of one pool at once).
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  PeakCounter in_flight;
  std::atomic<int> begun{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        if (!SharedLimits::begin_only_login(app, t)) continue;
        begun.fetch_add(1);
        in_flight.enter();
        in_flight.leave();
        SharedLimits::login_ended(app);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(in_flight.peak.load(), 1);
  EXPECT_GT(begun.load(), 0);
  EXPECT_EQ(SharedLimits::logins(app), 0);
}

TEST(SharedLimits, PinsStopAtTheLimitAcrossWorkers) {
  // pool_size 4, session_state_pin_reserve 1: three pins, however many workers ask at once.
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  constexpr int kThreads = 4;
  std::atomic<int> given{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        if (SharedLimits::try_pin(app, 3)) given.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(given.load(), 3);
  EXPECT_EQ(SharedLimits::pinned(app), 3);
  EXPECT_FALSE(SharedLimits::try_pin(app, 3));
  SharedLimits::unpin(app);
  EXPECT_TRUE(SharedLimits::try_pin(app, 3));
  EXPECT_FALSE(SharedLimits::try_pin(app, 0));  // a reserve as large as the pool: no pin
  // Another pool's pins are its own.
  EXPECT_TRUE(SharedLimits::try_pin(limits.slots_for("app", "other"), 1));
}

TEST(SharedLimits, ALoginFailureAndItsMessageAreThePoolsAndOneSuccessClearsThem) {
  // server_login_retry is one pool's, not one worker's (a CI failure: after PostgreSQL came
  // back, worker 0's share served while worker 1's still refused clients for a failure of its
  // own).
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  EXPECT_EQ(SharedLimits::login_failed_ms(app), 0u);
  SharedLimits::login_failed(app, 5000, "the database system is shutting down");
  EXPECT_EQ(SharedLimits::login_failed_ms(limits.slots_for("app", "app")), 5000u);
  EXPECT_EQ(SharedLimits::login_error(app), "the database system is shutting down");
  EXPECT_EQ(SharedLimits::login_failed_ms(limits.slots_for("app", "other")), 0u);
  SharedLimits::login_failed(app, 0, "refused");  // the clock's zero is a failure too
  EXPECT_NE(SharedLimits::login_failed_ms(app), 0u);
  SharedLimits::login_succeeded(app);
  EXPECT_EQ(SharedLimits::login_failed_ms(app), 0u);
}

TEST(SharedLimits, AFailedLoginIsNotALoggedInServerWhileItsSlotIsStillHeld) {
  // The fast fail (server_login_retry) holds while no server of the pool is logged in. A server
  // whose login failed keeps its slot until its socket is closed; it must not count meanwhile
  // (a client on another worker was let through, and a second login started at once).
  SharedLimits limits;
  const LimitSlots app = limits.slots_for("app", "app");
  EXPECT_EQ(limits.reserve(app, sized(4), 0), LaunchVerdict::allowed);
  SharedLimits::login_started(app);
  SharedLimits::login_ended(app);  // failed: the slot is held until the socket closes
  EXPECT_EQ(SharedLimits::logged_in(app), 0);
  EXPECT_EQ(limits.reserve(app, sized(4), 1), LaunchVerdict::allowed);
  SharedLimits::add_logged_in(app, 1);  // worker 1's login succeeded
  EXPECT_EQ(SharedLimits::logged_in(limits.slots_for("app", "app")), 1);  // the pool's, one count
  EXPECT_EQ(SharedLimits::logged_in(limits.slots_for("app", "other")), 0);
  SharedLimits::add_logged_in(app, -1);  // closed
  EXPECT_EQ(SharedLimits::logged_in(app), 0);
}

}  // namespace
}  // namespace pgsluice
