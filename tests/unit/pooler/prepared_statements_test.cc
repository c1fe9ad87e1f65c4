// The statement registry, the per-server LRU and recognizing SQL DEALLOCATE / DISCARD ALL.
#include "pooler/core/prepared_statements.h"

#include <gtest/gtest.h>

#include <thread>
#include <unordered_map>
#include <vector>

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
  std::vector<std::string> to_close;
  EXPECT_EQ(cache.add(1, "S1", 0, to_close), 0u);
  EXPECT_EQ(cache.add(2, "S2", 0, to_close), 0u);
  cache.touch(1);
  EXPECT_EQ(cache.add(3, "S3", 0, to_close), 1u);
  ASSERT_EQ(to_close, std::vector<std::string>{"S2"});
  EXPECT_TRUE(cache.has(1, 0));
  EXPECT_FALSE(cache.has(2, 0));
  EXPECT_TRUE(cache.has(3, 0));
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(ServerStatementCache, OlderGenerationIsClosedBeforeItIsPreparedAgain) {
  ServerStatementCache cache(2);
  std::vector<std::string> to_close;
  cache.add(1, "S1", 0, to_close);
  cache.add(2, "S2", 0, to_close);
  EXPECT_FALSE(cache.has(1, 1));  // a stale plan: the caller prepares it again
  EXPECT_EQ(cache.add(1, "S1", 1, to_close), 0u);
  EXPECT_EQ(to_close, std::vector<std::string>{"S1"});
  EXPECT_TRUE(cache.has(1, 1));
  EXPECT_EQ(cache.size(), 2u);  // replaced in place, nothing evicted
  // Most recently used now: the next newcomer evicts S2.
  to_close.clear();
  cache.add(3, "S3", 0, to_close);
  EXPECT_EQ(to_close, std::vector<std::string>{"S2"});
  cache.set_generation(1, 5);
  EXPECT_TRUE(cache.has(1, 5));
}

TEST(ServerStatementCache, SkippedClosesGoOutBeforeTheNextParse) {
  ServerStatementCache cache(1);
  std::vector<std::string> to_close;
  cache.add(1, "S1", 0, to_close);
  cache.add(2, "S2", 0, to_close);  // evicts S1, but the server skips that Close
  ASSERT_EQ(to_close, std::vector<std::string>{"S1"});
  cache.mark_to_close("S1");
  to_close.clear();
  cache.add(2, "S2", 0, to_close);  // already there: still the skipped Close goes first
  EXPECT_EQ(to_close, std::vector<std::string>{"S1"});
  to_close.clear();
  cache.add(3, "S3", 0, to_close);
  EXPECT_EQ(to_close, std::vector<std::string>{"S2"});
  cache.mark_to_close("S9");
  cache.clear();  // DISCARD ALL: nothing is left to close
  to_close.clear();
  cache.add(4, "S4", 0, to_close);
  EXPECT_TRUE(to_close.empty());
}

TEST(PreparedStatementStats, CountsServersAndClientNames) {
  PreparedRegistry registry;
  PreparedStatementRef a = registry.get_or_create("SELECT 1", {});
  PreparedStatementRef b = registry.get_or_create("SELECT 2", {});
  std::vector<std::string> to_close;
  {
    ServerStatementCache one(1);
    ServerStatementCache two(2);
    one.add(a->id, a->server_name, 0, to_close, a->stats);
    two.add(a->id, a->server_name, 0, to_close, a->stats);
    two.add(a->id, a->server_name, 1, to_close, a->stats);  // prepared again: still one server
    EXPECT_EQ(a->stats->servers, 2);
    one.add(b->id, b->server_name, 0, to_close, b->stats);  // evicts a from `one`
    EXPECT_EQ(a->stats->servers, 1);
    EXPECT_EQ(b->stats->servers, 1);
    two.close_all_later();
    EXPECT_EQ(a->stats->servers, 0);
  }  // `one` goes with its server
  EXPECT_EQ(b->stats->servers, 0);

  std::unordered_map<std::string, ClientStatement> names;
  names.emplace("x", ClientStatement(a));
  names.emplace("y", ClientStatement(a));
  EXPECT_EQ(a->stats->client_names, 2);
  names.erase("x");
  EXPECT_EQ(a->stats->client_names, 1);
  names.clear();
  EXPECT_EQ(a->stats->client_names, 0);
  ASSERT_EQ(registry.entries().size(), 2u);
  EXPECT_EQ(registry.entries()[0]->id, a->id);
}

TEST(ClientStatement, StaleWhenTheGenerationMovedOn) {
  PreparedRegistry registry;
  PreparedStatementRef s = registry.get_or_create("SELECT * FROM t", {});
  ClientStatement first(s);
  ++s->generation;            // another client's stale plan
  ClientStatement second(s);  // a Parse now sees the new description
  EXPECT_TRUE(first.stale());
  EXPECT_FALSE(second.stale());
  first.saw_current();
  EXPECT_FALSE(first.stale());
}

TEST(PreparedStatement, StalePlanMovesTheGenerationOnOncePerChange) {
  PreparedRegistry registry;
  PreparedStatementRef s = registry.get_or_create("SELECT * FROM t", {});
  // Two servers (of any worker) that prepared generation 0 report the same schema change: one
  // bump, not two (the second server's report is the same news).
  s->note_stale(0, "E-first");
  s->note_stale(0, "E-second");
  EXPECT_EQ(s->generation.load(), 1u);
  EXPECT_EQ(s->stale_error(), "E-second");  // the latest server's words
  // A server that does not have it prepared (nullopt) tells nothing about the generation.
  s->note_stale(std::nullopt, "E-third");
  EXPECT_EQ(s->generation.load(), 1u);
  // A later change, reported by a server that prepared generation 1.
  s->note_stale(1, "E-fourth");
  EXPECT_EQ(s->generation.load(), 2u);
}

TEST(PreparedRegistry, WorkersOnOtherThreadsGetTheSameStatement) {
  // One registry for the process: threads that prepare the same text get one statement.
  PreparedRegistry registry;
  std::vector<PreparedStatementRef> seen(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&registry, &seen, i] {
      for (int k = 0; k < 1000; ++k) seen[i] = registry.get_or_create("SELECT 1", {});
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : seen) EXPECT_EQ(s.get(), seen[0].get());
  EXPECT_EQ(registry.size(), 1u);
}

TEST(AbbreviateQuery, OneLineAndCutAtACharacter) {
  EXPECT_EQ(abbreviate_query("  SELECT *\n\tFROM t  ", 200), "SELECT * FROM t");
  EXPECT_EQ(abbreviate_query("SELECT 1", 8), "SELECT 1");
  EXPECT_EQ(abbreviate_query("SELECT 12", 8), "SELECT 1...");
  // "é" is two bytes: a cut in its middle goes before it.
  EXPECT_EQ(abbreviate_query("SELECT 'é'", 9), "SELECT '...");
  EXPECT_EQ(abbreviate_query("SELECT 'é'", 10), "SELECT 'é...");
  EXPECT_EQ(abbreviate_query(std::string(500, 'x'), kShownQueryBytes).size(), kShownQueryBytes + 3);
}

}  // namespace
}  // namespace pgsluice
