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

// A RowDescription body: the count, then per field its name and 18 bytes, format code last.
std::string row_description(const std::vector<std::pair<std::string, uint16_t>>& fields) {
  std::string body;
  body.push_back(0);
  body.push_back(static_cast<char>(fields.size()));
  for (const auto& [name, format] : fields) {
    body.append(name).push_back('\0');
    body.append(
        "\0\0\x40\x01"
        "\0\x01"
        "\0\0\0\x17"
        "\0\x04"
        "\xff\xff\xff\xff",
        16);
    body.push_back(static_cast<char>(format >> 8));
    body.push_back(static_cast<char>(format & 0xff));
  }
  return body;
}

TEST(StatementShape, APortalsFormatsDoNotMatterTheColumnsDo) {
  const std::string statement = statement_shape('T', row_description({{"a", 0}, {"b", 0}}));
  // A portal's Describe after a Bind asking for binary results: the same shape.
  EXPECT_EQ(statement_shape('T', row_description({{"a", 1}, {"b", 1}})), statement);
  EXPECT_NE(statement_shape('T', row_description({{"a", 0}, {"b", 0}, {"c", 0}})), statement);
  EXPECT_NE(statement_shape('T', row_description({{"a", 0}, {"x", 0}})), statement);
  EXPECT_NE(statement_shape('n', ""), statement);
  EXPECT_EQ(statement_shape('n', ""), statement_shape('n', ""));
}

TEST(StatementShape, ATruncatedDescriptionIsKeptAsItCame) {
  std::string body = row_description({{"a", 1}});
  body.resize(body.size() - 5);
  EXPECT_EQ(statement_shape('T', body), "T" + body);  // no write past the end
}

TEST(ServerStatementCache, AShapeIsForgottenWhenTheStatementIsPreparedAgain) {
  ServerStatementCache cache(2);
  std::vector<std::string> to_close;
  cache.add(1, "S1", 0, to_close);
  EXPECT_EQ(cache.shape(1), nullptr);  // not described yet
  auto shape = std::make_shared<const std::string>("T-old");
  cache.set_shape(1, shape);
  ASSERT_NE(cache.shape(1), nullptr);
  EXPECT_EQ(cache.shape(1)->get(), shape.get());
  cache.add(1, "S1", 1, to_close);  // a new generation: the server's copy describes anew
  EXPECT_EQ(cache.shape(1), nullptr);
  cache.set_shape(1, shape);
  cache.set_generation(1, 2);  // prepared again after a stale plan
  EXPECT_EQ(cache.shape(1), nullptr);
  EXPECT_EQ(cache.shape(7), nullptr);  // not on the server
}

TEST(PreparedStatement, EqualShapesShareOneString) {
  PreparedRegistry r;
  auto stmt = r.get_or_create("SELECT * FROM t", {});
  auto a = stmt->intern_shape("T1");
  auto b = stmt->intern_shape("T1");
  EXPECT_EQ(a.get(), b.get());
  auto c = stmt->intern_shape("T2");
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(*a, "T1");
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
