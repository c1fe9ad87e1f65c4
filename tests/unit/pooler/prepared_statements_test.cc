// The statement registry, the per-server LRU and recognizing SQL DEALLOCATE / DISCARD ALL.
#include "pooler/prepared_statements.h"

#include <gtest/gtest.h>

namespace pgsluice {
namespace {

TEST(PreparedRegistry, SameTextAndTypesShareOneStatement) {
  PreparedRegistry r;
  auto a = r.get_or_create("SELECT $1", {23});
  auto b = r.get_or_create("SELECT $1", {23});
  auto c = r.get_or_create("SELECT $1", {25});
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a->id, c->id);
  EXPECT_EQ(a->server_name, "PGSLUICE_" + std::to_string(a->id));
  EXPECT_EQ(r.size(), 2u);
  a.reset();
  b.reset();
  EXPECT_EQ(r.size(), 1u);  // nobody maps it any more
}

TEST(ServerStatementCache, EvictsLeastRecentlyUsed) {
  ServerStatementCache cache(2);
  std::vector<std::string> evicted;
  cache.add(1, "S1", evicted);
  cache.add(2, "S2", evicted);
  cache.touch(1);
  cache.add(3, "S3", evicted);
  ASSERT_EQ(evicted, std::vector<std::string>{"S2"});
  EXPECT_TRUE(cache.contains(1));
  EXPECT_FALSE(cache.contains(2));
  EXPECT_TRUE(cache.contains(3));
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(DeallocateCommand, Recognized) {
  using K = DeallocateCommand::Kind;
  EXPECT_EQ(parse_deallocate_command("DEALLOCATE pdo_stmt_1").kind, K::deallocate_name);
  EXPECT_EQ(parse_deallocate_command("  deallocate prepare \"Mixed\";").name, "Mixed");
  EXPECT_EQ(parse_deallocate_command("DEALLOCATE ALL").kind, K::deallocate_all);
  EXPECT_EQ(parse_deallocate_command("discard all;").kind, K::discard_all);
  EXPECT_EQ(parse_deallocate_command("DISCARD TEMP").kind, K::none);
  EXPECT_EQ(parse_deallocate_command("SELECT 1").kind, K::none);
  EXPECT_EQ(parse_deallocate_command("DEALLOCATE a; SELECT 1").kind, K::none);
  EXPECT_EQ(parse_deallocate_command("DEALLOCATE").kind, K::none);
  EXPECT_EQ(parse_deallocate_command("").kind, K::none);
}

}  // namespace
}  // namespace pgsluice
