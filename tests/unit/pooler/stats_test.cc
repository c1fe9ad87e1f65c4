// Pool statistics: PgBouncer's averages (rates per second, times per query / transaction /
// assignment), histogram buckets, and the per-server timing that feeds them.
#include "pooler/core/stats.h"

#include <gtest/gtest.h>

namespace pgsluice {
namespace {

TEST(Stats, LogLineInPgBouncersWords) {
  PoolAverages a;
  a.transactions = 10;
  a.queries = 20;
  a.client_parse_count = 1;
  a.server_parse_count = 2;
  a.bind_count = 3;
  a.client_logins = 4;
  a.bytes_received = 1000;
  a.bytes_sent = 2000;
  a.xact_time_us = 500;
  a.query_time_us = 200;
  a.wait_time_us = 1000;
  EXPECT_EQ(
      stats_log_line(a),
      "stats: 10 xacts/s, 20 queries/s, 1 client parses/s, 2 server parses/s, 3 binds/s, "
      "4 client logins/s, in 1000 B/s, out 2000 B/s, xact 500 us, query 200 us, wait 1000 us");
}

TEST(Stats, AveragesArePerSecondAndPerEvent) {
  PoolCounters old;
  old.transactions = 100;
  old.queries = 200;
  old.server_assignments = 50;
  old.bytes_received = 1000;
  old.xact_time_us = 10'000;
  old.query_time_us = 20'000;
  old.wait_time_us = 0;
  PoolCounters cur = old;
  cur.transactions += 600;  // over 60 s: 10 per second
  cur.queries += 1200;      // 20 per second
  cur.server_assignments += 300;
  cur.bytes_received += 60'000;   // 1000 B/s
  cur.xact_time_us += 600 * 500;  // 500 µs per transaction
  cur.query_time_us += 1200 * 200;
  cur.wait_time_us += 300 * 1000;  // 1 ms per assignment
  PoolAverages a = compute_averages(cur, old, 60'000'000);
  EXPECT_EQ(a.transactions, 10u);
  EXPECT_EQ(a.queries, 20u);
  EXPECT_EQ(a.server_assignments, 5u);
  EXPECT_EQ(a.bytes_received, 1000u);
  EXPECT_EQ(a.xact_time_us, 500u);
  EXPECT_EQ(a.query_time_us, 200u);
  EXPECT_EQ(a.wait_time_us, 1000u);
}

TEST(Stats, AveragesOfNothingAreZero) {
  PoolCounters c;
  c.transactions = 5;
  PoolAverages a = compute_averages(c, c, 1'000'000);
  EXPECT_EQ(a.transactions, 0u);
  EXPECT_EQ(a.xact_time_us, 0u);  // no division by zero
  EXPECT_EQ(compute_averages(c, PoolCounters{}, 0).transactions, 0u);
  // An older snapshot above the current (cannot happen, but must not wrap around).
  EXPECT_EQ(compute_averages(PoolCounters{}, c, 1'000'000).transactions, 0u);
}

TEST(Stats, HistogramBucketsAreCumulativeAndInclusive) {
  Histogram h;
  h.observe(0);
  h.observe(100);         // exactly on the first bound: in it (le means <=)
  h.observe(101);         // the next bucket
  h.observe(20'000'000);  // above every bound
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.sum_us(), 20'000'201u);
  EXPECT_EQ(h.cumulative(0), 2u);
  EXPECT_EQ(h.cumulative(1), 3u);
  EXPECT_EQ(h.cumulative(Histogram::kBoundsUs.size() - 1), 3u);
  Histogram sum;
  sum += h;
  sum += h;
  EXPECT_EQ(sum.count(), 8u);
  EXPECT_EQ(sum.cumulative(0), 4u);
}

TEST(Stats, HistogramPutsEachValueInTheFirstBucketAtOrAboveIt) {
  // Every bound, and one above it: the value on a bound is in its bucket, one more in the next.
  const auto& bounds = Histogram::kBoundsUs;
  for (size_t i = 0; i < bounds.size(); ++i) {
    Histogram h;
    h.observe(bounds[i]);
    h.observe(bounds[i] + 1);
    EXPECT_EQ(h.cumulative(i), 1u) << bounds[i];
    if (i > 0) {
      EXPECT_EQ(h.cumulative(i - 1), 0u) << bounds[i];
    }
    if (i + 1 < bounds.size()) {
      EXPECT_EQ(h.cumulative(i + 1), 2u) << bounds[i];
    } else {
      EXPECT_EQ(h.count() - h.cumulative(i), 1u) << "above every bound";
    }
  }
}

TEST(Stats, ServerTimingCountsATransactionAtItsFirstQuery) {
  PoolStats stats;
  ServerTiming t;
  t.on_link(100, 200);
  t.on_request(1'000, stats.totals);
  EXPECT_EQ(t.query_start_us, 1'000u);
  // As PgBouncer's xact_count: counted when it starts, while still open.
  EXPECT_EQ(stats.totals.transactions, 1u);
  EXPECT_EQ(stats.totals.queries, 1u);
  t.on_request(1'200, stats.totals);  // a second message of the same query: started already
  EXPECT_EQ(stats.totals.queries, 1u);
  t.on_ready(stats, 'T', 150, 260, 1'500);  // BEGIN done: a query, the transaction still open
  EXPECT_EQ(stats.xact_time.count(), 0u);
  EXPECT_EQ(stats.query_time.count(), 1u);
  EXPECT_EQ(stats.totals.query_time_us, 500u);
  t.on_request(2'000, stats.totals);
  EXPECT_EQ(stats.totals.transactions, 1u);  // the same transaction
  EXPECT_EQ(stats.totals.queries, 2u);
  t.on_ready(stats, 'I', 180, 300, 2'250);  // COMMIT done
  EXPECT_EQ(stats.totals.transactions, 1u);
  EXPECT_EQ(stats.xact_time.count(), 1u);
  EXPECT_EQ(stats.query_time.count(), 2u);
  EXPECT_EQ(stats.totals.query_time_us, 750u);
  EXPECT_EQ(stats.totals.xact_time_us, 1'250u);  // from BEGIN's request to COMMIT's answer
  EXPECT_EQ(stats.totals.bytes_received, 80u);   // what the server socket sent since the link
  EXPECT_EQ(stats.totals.bytes_sent, 100u);
  // A ReadyForQuery without a request (an idle server's) counts nothing.
  t.on_ready(stats, 'I', 180, 300, 3'000);
  EXPECT_EQ(stats.totals.transactions, 1u);
  // The next request starts the next transaction.
  t.on_request(4'000, stats.totals);
  EXPECT_EQ(stats.totals.transactions, 2u);
}

TEST(Stats, RollKeepsTwoSnapshots) {
  PoolStats s;
  s.totals.queries = 1;
  s.roll();
  s.totals.queries = 5;
  s.roll();
  EXPECT_EQ(s.older.queries, 1u);
  EXPECT_EQ(s.newer.queries, 5u);
}

}  // namespace
}  // namespace pgsluice
