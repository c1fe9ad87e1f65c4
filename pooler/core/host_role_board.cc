// The process's knowledge of each host's role; see host_role_board.h.
#include "pooler/core/host_role_board.h"

namespace pgsluice {

uint64_t HostRoleBoard::tell(const std::string& host, bool primary, std::optional<bool>& was) {
  std::lock_guard lock(mutex_);
  Entry& e = hosts_[host];
  e.checking_since_ms = 0;
  was.reset();
  if (e.primary == primary) return e.seq;
  if (e.primary) was = e.primary;
  e.primary = primary;
  e.seq = news_.fetch_add(1, std::memory_order_acq_rel) + 1;
  return e.seq;
}

std::optional<HostRoleBoard::Known> HostRoleBoard::known(const std::string& host) {
  std::lock_guard lock(mutex_);
  auto it = hosts_.find(host);
  if (it == hosts_.end() || !it->second.primary) return std::nullopt;
  return Known{*it->second.primary, it->second.seq};
}

bool HostRoleBoard::may_check(const std::string& host, uint64_t now_ms, uint64_t gap_ms) {
  std::lock_guard lock(mutex_);
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return true;
  const Entry& e = it->second;
  if (e.checking_since_ms != 0 && now_ms < e.checking_since_ms + kCheckTimeoutMs) return false;
  return e.last_check_ms == 0 || now_ms >= e.last_check_ms + gap_ms;
}

void HostRoleBoard::begin_check(const std::string& host, uint64_t now_ms) {
  std::lock_guard lock(mutex_);
  Entry& e = hosts_[host];
  e.checking_since_ms = now_ms == 0 ? 1 : now_ms;  // 0 means none in flight
  e.last_check_ms = e.checking_since_ms;
}

void HostRoleBoard::end_check(const std::string& host) {
  std::lock_guard lock(mutex_);
  if (auto it = hosts_.find(host); it != hosts_.end()) it->second.checking_since_ms = 0;
}

}  // namespace pgsluice
