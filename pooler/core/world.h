// Stopping the world: one worker thread parks every other worker so that it may read and change
// their clients, servers and pools as if the pooler ran on one thread. The admin console, signals,
// RELOAD, the metrics scrape and the primary's janitor (only for what spans every worker: a
// console command's wait, the stats_period roll, a shutdown) do this; they are rare and short,
// while the forwarding path and each worker's own janitor never take a lock.
//
// A worker parks in its wake-up callback (uv_async), between two libuv callbacks: whatever the
// stopping thread does to that worker's loop (writes, closes, timers) is then exactly what one of
// the worker's own callbacks could have done, and the mutex orders it before the worker resumes.
// Two workers that want to stop the world at once do not deadlock: the one that loses parks
// while it waits, and tries again when the winner resumes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace pgsluice {

class World {
 public:
  // `wake(i)` asks worker i to call park() soon (its uv_async_send); thread-safe. It returns
  // false when worker i has stopped for good (it will never park again).
  World(int workers, std::function<bool(int)> wake);
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Returns when every other running worker is parked. Re-entrant on the same worker.
  void stop(int self);
  void resume(int self);
  // Called by worker `self` in its wake-up callback: parks while another worker holds the world.
  void park(int self);
  // Worker `self` left its loop for good: nobody waits for it to park any more.
  void retire(int self);
  [[nodiscard]] int workers() const { return workers_; }

 private:
  // Waits, parked, until the stop in progress ends. Needs `lock` held.
  void park_locked(std::unique_lock<std::mutex>& lock);

  const int workers_;
  std::function<bool(int)> wake_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int owner_ = -1;
  int depth_ = 0;
  int running_;
  // Incremented when a stop begins and when it ends: a parked worker leaves when it changes.
  uint64_t generation_ = 0;
  int parked_ = 0;  // workers parked in the current stop
  std::vector<bool> retired_;
  // The current stop's start and the moment every other worker was parked (the debug log).
  std::chrono::steady_clock::time_point stop_started_;
  std::chrono::steady_clock::time_point all_parked_;
};

// Stops the world for the lifetime of the object.
class WorldPause {
 public:
  WorldPause(World& world, int self) : world_(world), self_(self) { world_.stop(self_); }
  ~WorldPause() { world_.resume(self_); }
  WorldPause(const WorldPause&) = delete;
  WorldPause& operator=(const WorldPause&) = delete;

 private:
  World& world_;
  int self_;
};

}  // namespace pgsluice
