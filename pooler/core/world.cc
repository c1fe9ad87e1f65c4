// See world.h.
#include "pooler/core/world.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "pooler/base/log_level.h"

namespace pgsluice {

World::World(int workers, std::function<bool(int)> wake)
    : workers_(workers), wake_(std::move(wake)), running_(workers), retired_(workers, false) {}

void World::park_locked(std::unique_lock<std::mutex>& lock) {
  const uint64_t generation = generation_;
  ++parked_;
  changed_.notify_all();
  changed_.wait(lock, [&] { return generation_ != generation; });
}

void World::stop(int self) {
  std::unique_lock lock(mutex_);
  if (owner_ == self) {
    ++depth_;
    return;
  }
  // Another worker holds the world and waits for this one to park: park, then try again.
  while (owner_ != -1) park_locked(lock);
  stop_started_ = std::chrono::steady_clock::now();
  owner_ = self;
  depth_ = 1;
  ++generation_;
  parked_ = 0;
  for (int i = 0; i < workers_; ++i) {
    const auto at = static_cast<size_t>(i);
    if (i != self && !retired_[at] && !wake_(i)) {
      retired_[at] = true;
      --running_;
    }
  }
  const bool self_running = !retired_[static_cast<size_t>(self)];
  changed_.wait(lock, [&] { return parked_ >= running_ - (self_running ? 1 : 0); });
  all_parked_ = std::chrono::steady_clock::now();
}

void World::resume(int self) {
  std::lock_guard lock(mutex_);
  if (owner_ != self || --depth_ > 0) return;
  owner_ = -1;
  ++generation_;
  changed_.notify_all();
  if (log_enabled(spdlog::level::debug)) {
    // How long the other workers stood still (docs/design.md gives the measured figures).
    using std::chrono::duration_cast;
    using std::chrono::microseconds;
    const auto now = std::chrono::steady_clock::now();
    spdlog::debug("world stopped by worker {} for {} us ({} us to park the others)", self,
                  duration_cast<microseconds>(now - stop_started_).count(),
                  duration_cast<microseconds>(all_parked_ - stop_started_).count());
  }
}

void World::park(int self) {
  std::unique_lock lock(mutex_);
  if (owner_ == -1 || owner_ == self) return;
  park_locked(lock);
}

void World::retire(int self) {
  std::lock_guard lock(mutex_);
  if (retired_[static_cast<size_t>(self)]) return;
  retired_[static_cast<size_t>(self)] = true;
  --running_;
  changed_.notify_all();
}

}  // namespace pgsluice
