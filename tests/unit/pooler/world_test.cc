// Stopping the world (world.h) with real threads: while one worker holds the world the others
// run none of their own code, two workers stopping it at once take turns instead of deadlocking,
// and a worker that has stopped for good is not waited for.
#include "pooler/core/world.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace pgsluice {
namespace {

// N threads that stand for workers: each does "work" (bumps its counter) and, when woken, parks
// as a worker does in its wake-up callback. Thread i may also stop the world now and then.
class Workers {
 public:
  explicit Workers(int n)
      : wake_flags_(static_cast<size_t>(n)),
        counters_(static_cast<size_t>(n)),
        world_(n,
               [this](int i) {
                 if (stopped_[static_cast<size_t>(i)].load()) return false;
                 wake_flags_[static_cast<size_t>(i)].store(true);
                 return true;
               }),
        stopped_(static_cast<size_t>(n)) {}

  // One step of worker i's loop.
  void step(int i) {
    if (wake_flags_[static_cast<size_t>(i)].exchange(false)) world_.park(i);
    counters_[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t counter(int i) { return counters_[static_cast<size_t>(i)].load(); }
  void mark_stopped(int i) { stopped_[static_cast<size_t>(i)].store(true); }
  World& world() { return world_; }

 private:
  std::vector<std::atomic<bool>> wake_flags_;
  std::vector<std::atomic<uint64_t>> counters_;
  World world_;
  std::vector<std::atomic<bool>> stopped_;
};

TEST(World, OthersDoNothingWhileTheWorldIsStopped) {
  constexpr int kWorkers = 3;
  Workers w(kWorkers);
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int i = 1; i < kWorkers; ++i) {
    threads.emplace_back([&, i] {
      while (!done.load()) w.step(i);
    });
  }
  for (int round = 0; round < 50; ++round) {
    w.world().stop(0);
    const uint64_t a = w.counter(1), b = w.counter(2);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(w.counter(1), a);
    EXPECT_EQ(w.counter(2), b);
    w.world().stop(0);  // re-entrant
    w.world().resume(0);
    EXPECT_EQ(w.counter(1), a);  // still stopped: the outer stop holds it
    w.world().resume(0);
  }
  done = true;
  for (auto& t : threads) t.join();
}

TEST(World, TwoWorkersStoppingAtOnceTakeTurns) {
  constexpr int kWorkers = 3;
  Workers w(kWorkers);
  std::atomic<bool> done{false};
  std::atomic<int> holders{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> stops{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&, i] {
      int mine = 0;
      while (!done.load()) {
        w.step(i);
        if (i < 2 && mine < 300) {  // workers 0 and 1 both stop the world, often
          WorldPause pause(w.world(), i);
          if (holders.fetch_add(1) != 0) overlaps.fetch_add(1);
          std::this_thread::yield();
          holders.fetch_sub(1);
          ++mine;
          stops.fetch_add(1);
        }
      }
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (stops.load() < 600 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(stops.load(), 600) << "a stop never completed: deadlock";
  EXPECT_EQ(overlaps.load(), 0);
  done = true;
  for (auto& t : threads) t.join();
}

TEST(World, AStoppedWorkerIsNotWaitedFor) {
  Workers w(3);
  w.world().retire(2);  // left its loop
  w.mark_stopped(1);    // its wake-up handle is closed: wake() fails
  w.world().stop(0);    // returns without anyone parking
  w.world().resume(0);
  SUCCEED();
}

}  // namespace
}  // namespace pgsluice
