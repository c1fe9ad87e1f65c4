// auth_query's process-wide cache (pooler/core/auth_cache.h): expiry, the memory bound, and
// workers using it at once.
#include "pooler/core/auth_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace pgsluice {
namespace {

AuthLookupResult found(const std::string& secret) {
  return AuthLookupResult{.status = AuthLookupResult::Status::found, .secret = secret, .error = {}};
}

TEST(AuthCache, AnEntryLivesItsLifetimeAndNoLonger) {
  AuthCache cache;
  cache.store("app/u", found("md5abc"), 1000, 5000);
  ASSERT_TRUE(cache.find("app/u", 5999).has_value());
  EXPECT_EQ(cache.find("app/u", 5999)->secret, "md5abc");
  EXPECT_FALSE(cache.find("app/u", 6000).has_value());
  EXPECT_EQ(cache.size(), 0U);  // the expired entry went when it was looked at
}

TEST(AuthCache, ALifetimeOfZeroKeepsNothing) {
  AuthCache cache;
  cache.store("k", found("s"), 0, 1);
  EXPECT_FALSE(cache.find("k", 1).has_value());
  EXPECT_EQ(cache.size(), 0U);
}

TEST(AuthCache, EraseAndClear) {
  AuthCache cache;
  cache.store("a", found("1"), 100, 0);
  cache.store("b", found("2"), 100, 0);
  cache.erase("a");
  EXPECT_FALSE(cache.find("a", 1).has_value());
  EXPECT_TRUE(cache.find("b", 1).has_value());
  cache.clear();
  EXPECT_EQ(cache.size(), 0U);
}

TEST(AuthCache, FullOfLiveEntriesItStartsOverRatherThanGrow) {
  AuthCache cache;
  for (size_t i = 0; i < AuthCache::kMaxEntries; ++i) {
    cache.store(std::to_string(i), found("s"), i < 10 ? 5 : 1000, 0);
  }
  EXPECT_EQ(cache.size(), AuthCache::kMaxEntries);
  // At time 10 the ten short-lived entries have expired: they make the room.
  cache.store("new", found("s"), 1000, 10);
  EXPECT_EQ(cache.size(), AuthCache::kMaxEntries - 9);
  // With every entry alive, the next one clears the cache.
  for (size_t i = 0; cache.size() < AuthCache::kMaxEntries; ++i) {
    cache.store("more" + std::to_string(i), found("s"), 1000, 10);
  }
  cache.store("last", found("s"), 1000, 10);
  EXPECT_EQ(cache.size(), 1U);
  EXPECT_TRUE(cache.find("last", 11).has_value());
}

TEST(AuthCache, WorkersShareOneCache) {
  AuthCache cache;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::string key = std::to_string(i % 50);
        cache.store(key, found(std::to_string(t)), 1000, 0);
        // Another thread may have erased it; what is found is always a whole entry.
        if (auto hit = cache.find(key, 1)) {
          ASSERT_EQ(hit->status, AuthLookupResult::Status::found);
          ASSERT_EQ(hit->secret->size(), 1U);
        }
        if (i % 7 == 0) cache.erase(key);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(cache.size(), 50U);
}

}  // namespace
}  // namespace pgsluice
