// What the session-state check costs per statement: the lexer prefilter (every Query and Parse
// in transaction mode pays it), a libpg_query parse with the verdict walk (only what the
// prefilter flags pays it, once per distinct text: verdicts are cached), and a cache hit.
// Statements: pgbench's (tpcb-like and select-only), a ~2 KB ORM-style SELECT, and the kinds of
// statement that are flagged. Run: build/bench/check_bench [--benchmark_filter=…]
#include <benchmark/benchmark.h>

#include <string>
#include <string_view>
#include <vector>

#include "pgsluice/protocol/session_state.h"
#include "pgsluice/protocol/sql_lexer.h"

namespace pp = pgsluice::protocol;

namespace {

// An ORM's SELECT (Django/Hibernate style): qualified, quoted columns, joins, an IN list, about
// 2 KB.
std::string orm_select() {
  std::string cols;
  const char* names[] = {"id",
                         "created_at",
                         "updated_at",
                         "status",
                         "customer_id",
                         "total_cents",
                         "currency",
                         "shipping_address_id",
                         "billing_address_id",
                         "notes",
                         "coupon_code",
                         "tax_cents",
                         "discount_cents",
                         "channel",
                         "external_ref"};
  for (const char* n : names) {
    if (!cols.empty()) cols += ", ";
    cols += std::string("\"shop_order\".\"") + n + "\"";
  }
  std::string sql =
      "SELECT " + cols +
      ", \"shop_customer\".\"id\", \"shop_customer\".\"email\", "
      "\"shop_customer\".\"first_name\", \"shop_customer\".\"last_name\", "
      "\"shop_customer\".\"created_at\", COALESCE(\"shop_customer\".\"phone\", '') "
      "AS \"phone\", lower(\"shop_customer\".\"email\") AS \"email_key\" "
      "FROM \"shop_order\" INNER JOIN \"shop_customer\" ON "
      "(\"shop_order\".\"customer_id\" = \"shop_customer\".\"id\") "
      "LEFT OUTER JOIN \"shop_address\" ON (\"shop_order\".\"shipping_address_id\" "
      "= \"shop_address\".\"id\") WHERE (\"shop_order\".\"status\" IN ($1, $2, $3) "
      "AND \"shop_order\".\"created_at\" >= $4 AND \"shop_order\".\"created_at\" < $5 "
      "AND \"shop_customer\".\"email\"::text LIKE $6 AND NOT "
      "(\"shop_order\".\"id\" IN (";
  for (int i = 0; i < 60; ++i) sql += (i ? ", " : "") + std::to_string(100000 + i * 7);
  sql +=
      "))) ORDER BY \"shop_order\".\"created_at\" DESC, \"shop_order\".\"id\" ASC "
      "LIMIT 50 OFFSET $7";
  return sql;
}

struct Case {
  std::string name;
  std::string sql;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"pgbench_select", "SELECT abalance FROM pgbench_accounts WHERE aid = $1;"},
      {"pgbench_update_accounts",
       "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;"},
      {"pgbench_update_tellers",
       "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2;"},
      {"pgbench_insert_history",
       "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, "
       "CURRENT_TIMESTAMP);"},
      {"pgbench_begin", "BEGIN;"},
      {"pgbench_end", "END;"},
      {"orm_select_2kb", orm_select()},
      {"flagged_set", "SET search_path TO app, public"},
      {"flagged_advisory", "SELECT pg_advisory_lock($1)"},
      {"flagged_opaque_call", "SELECT app.current_tenant()"},
  };
  return c;
}

void BM_Prefilter(benchmark::State& state, const std::string* sql) {
  for (auto _ : state) benchmark::DoNotOptimize(pp::may_change_session_state(*sql));
}

void BM_Parse(benchmark::State& state, const std::string* sql) {
  for (auto _ : state) {
    pp::Classification c = pp::classify_sql(*sql, pp::Prefilter::skip);
    benchmark::DoNotOptimize(c);
  }
}

// What the pooler does per statement: the prefilter, and for a flagged one the cached verdict.
void BM_CheckCached(benchmark::State& state, const std::string* sql) {
  pp::SessionStateClassifier classifier;
  for (auto _ : state) {
    if (pp::may_change_session_state(*sql)) benchmark::DoNotOptimize(classifier.classify(*sql));
  }
}

// The pgbench tpcb-like transaction's seven statements, one iteration each (items = statements).
void BM_PrefilterPgbenchMix(benchmark::State& state) {
  std::vector<std::string_view> mix;
  for (const Case& c : cases()) {
    if (c.name.starts_with("pgbench_")) mix.push_back(c.sql);
  }
  for (auto _ : state) {
    for (std::string_view s : mix) benchmark::DoNotOptimize(pp::may_change_session_state(s));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * mix.size()));
}
BENCHMARK(BM_PrefilterPgbenchMix);

const int kRegistered = [] {
  for (const Case& c : cases()) {
    benchmark::RegisterBenchmark(("BM_Prefilter/" + c.name).c_str(), BM_Prefilter, &c.sql);
    benchmark::RegisterBenchmark(("BM_Parse/" + c.name).c_str(), BM_Parse, &c.sql);
    benchmark::RegisterBenchmark(("BM_CheckCached/" + c.name).c_str(), BM_CheckCached, &c.sql);
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
