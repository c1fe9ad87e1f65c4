// auth_query's results, one cache for the process (auth_query.h): a user looked up by a client of
// one worker is known to the clients of every worker, and a password that no longer matches
// drops the entry for all of them. Taken at client logins only, so one mutex is enough.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace pgsluice {

struct AuthLookupResult {
  enum class Status { found, not_found, failed };
  Status status = Status::failed;
  std::optional<std::string> secret;  // found: the secret; nullopt for a NULL password
  std::string error;                  // failed: why, for the log
  // failed because of the query itself (PostgreSQL refused it, wrong columns): the pooler's
  // configuration is wrong, not the server unreachable.
  bool bad_query = false;
};

class AuthCache {
 public:
  // A bound on memory whatever the login traffic; past it the expired entries go, then all.
  static constexpr size_t kMaxEntries = 10'000;

  // The entry of `key` while `now_ms` is before its expiry (an expired one is dropped).
  std::optional<AuthLookupResult> find(const std::string& key, uint64_t now_ms);
  // Keeps `result` for `lifetime_ms` (nothing when 0).
  void store(const std::string& key, const AuthLookupResult& result, uint64_t lifetime_ms,
             uint64_t now_ms);
  void erase(const std::string& key);
  void clear();
  [[nodiscard]] size_t size();

 private:
  struct Entry {
    AuthLookupResult result;
    uint64_t expires_ms = 0;
  };
  std::mutex mutex_;
  std::map<std::string, Entry> entries_;
};

}  // namespace pgsluice
