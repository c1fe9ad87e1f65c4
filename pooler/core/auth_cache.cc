// See auth_cache.h.
#include "pooler/core/auth_cache.h"

namespace pgsluice {

std::optional<AuthLookupResult> AuthCache::find(const std::string& key, uint64_t now_ms) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  if (it->second.expires_ms <= now_ms) {
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.result;
}

void AuthCache::store(const std::string& key, const AuthLookupResult& result, uint64_t lifetime_ms,
                      uint64_t now_ms) {
  if (lifetime_ms == 0) return;
  std::lock_guard lock(mutex_);
  if (entries_.size() >= kMaxEntries && !entries_.contains(key)) {
    std::erase_if(entries_, [now_ms](const auto& e) { return e.second.expires_ms <= now_ms; });
    if (entries_.size() >= kMaxEntries) entries_.clear();
  }
  entries_[key] = Entry{result, now_ms + lifetime_ms};
}

void AuthCache::erase(const std::string& key) {
  std::lock_guard lock(mutex_);
  entries_.erase(key);
}

void AuthCache::clear() {
  std::lock_guard lock(mutex_);
  entries_.clear();
}

size_t AuthCache::size() {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace pgsluice
