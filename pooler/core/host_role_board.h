// What the process knows of each server host's role, whichever pool learned it: a primary or a
// standby, by host:port. A `read-write` entry and a `standby` entry of the same hosts are two
// pools (and each has a share on every worker); without this board each learned a promotion on
// its own, up to a role recheck apart (issue 45: the `standby` pool saw the new primary a second
// before the `read-write` pool did). A pool tells the board when what it knows of a host
// changes (rarely: a promotion, a demotion, the first login), and reads it only when it looks
// for a host to log in to, so no transaction takes the lock.
//
// It also keeps the role rechecks of a host that had the wrong role to one at a time in the
// process: while a `read-write` entry has no primary its hosts are asked every 100 ms, and two
// pools of the same hosts (two users, say) need not both log in to ask.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace pgsluice {

class HostRoleBoard {
 public:
  struct Known {
    bool primary = false;
    uint64_t seq = 0;  // the board's count of news when this was told; higher is newer
  };

  // A pool's server of `host` told `primary`, and the pool did not know it yet (a change, or
  // its first word on the host). Returns the news's seq, and in `was` the role the board knew
  // before when it differs (a promotion or a demotion the process learns now); a role the board
  // already had is no news (seq of the known entry, `was` empty).
  uint64_t tell(const std::string& host, bool primary, std::optional<bool>& was);
  [[nodiscard]] std::optional<Known> known(const std::string& host);
  // Bumped by each news: a pool that saw this count has nothing new to read.
  [[nodiscard]] uint64_t news() const { return news_.load(std::memory_order_acquire); }

  // Whether a pool may log in to `host` now to see whether its role changed: not while
  // another check of it is in flight (at most kCheckTimeoutMs), nor within `gap_ms` after the
  // last one began. Every pool and every worker's share asks the board, so a host is asked at
  // most once per gap in the process, however many pools wait for it; the answer is told to
  // all of them (tell(), Worker::on_host_role_news).
  [[nodiscard]] bool may_check(const std::string& host, uint64_t now_ms, uint64_t gap_ms);
  void begin_check(const std::string& host, uint64_t now_ms);
  // The check is over without a role told (its login failed); tell() ends it too.
  void end_check(const std::string& host);
  // When a host's check in flight is no longer waited for (a login that never ends).
  static constexpr uint64_t kCheckTimeoutMs = 1000;

 private:
  struct Entry {
    std::optional<bool> primary;
    uint64_t seq = 0;
    uint64_t checking_since_ms = 0;  // 0: no check in flight
    uint64_t last_check_ms = 0;
  };
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> hosts_;
  std::atomic<uint64_t> news_{0};
};

}  // namespace pgsluice
