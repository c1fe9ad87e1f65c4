// Counters, averages and histograms; see stats.h.
#include "pooler/core/stats.h"

#include <fmt/format.h>
#include <uv.h>

namespace pgsluice {

uint64_t now_us() {
  return uv_hrtime() / 1000;
}

PoolCounters& PoolCounters::operator+=(const PoolCounters& o) {
  server_assignments += o.server_assignments;
  transactions += o.transactions;
  queries += o.queries;
  bytes_received += o.bytes_received;
  bytes_sent += o.bytes_sent;
  xact_time_us += o.xact_time_us;
  query_time_us += o.query_time_us;
  wait_time_us += o.wait_time_us;
  client_parse_count += o.client_parse_count;
  server_parse_count += o.server_parse_count;
  bind_count += o.bind_count;
  prepared_evictions += o.prepared_evictions;
  prepared_retries += o.prepared_retries;
  return *this;
}

PoolAverages compute_averages(const PoolCounters& cur, const PoolCounters& old,
                              uint64_t duration_us) {
  PoolAverages avg;
  if (duration_us == 0) return avg;
  // Counters only grow, but a pool's snapshot may predate a reload that replaced nothing; guard
  // against wrap-around all the same, since a negative rate would print as 18 quintillion.
  auto delta = [](uint64_t a, uint64_t b) { return a >= b ? a - b : 0; };
  auto rate = [&](uint64_t a, uint64_t b) { return delta(a, b) * 1'000'000 / duration_us; };
  const uint64_t queries = delta(cur.queries, old.queries);
  const uint64_t xacts = delta(cur.transactions, old.transactions);
  const uint64_t assignments = delta(cur.server_assignments, old.server_assignments);
  avg.server_assignments = rate(cur.server_assignments, old.server_assignments);
  avg.transactions = rate(cur.transactions, old.transactions);
  avg.queries = rate(cur.queries, old.queries);
  avg.bytes_received = rate(cur.bytes_received, old.bytes_received);
  avg.bytes_sent = rate(cur.bytes_sent, old.bytes_sent);
  if (queries > 0) avg.query_time_us = delta(cur.query_time_us, old.query_time_us) / queries;
  if (xacts > 0) avg.xact_time_us = delta(cur.xact_time_us, old.xact_time_us) / xacts;
  // As PgBouncer 1.2x: the wait per server assignment (not per client).
  if (assignments > 0) avg.wait_time_us = delta(cur.wait_time_us, old.wait_time_us) / assignments;
  avg.client_parse_count = rate(cur.client_parse_count, old.client_parse_count);
  avg.server_parse_count = rate(cur.server_parse_count, old.server_parse_count);
  avg.bind_count = rate(cur.bind_count, old.bind_count);
  return avg;
}

std::string stats_log_line(const PoolAverages& a) {
  return fmt::format(
      "stats: {} xacts/s, {} queries/s, {} client parses/s, {} server parses/s, {} binds/s, in {} "
      "B/s, out {} B/s, xact {} us, query {} us, wait {} us",
      a.transactions, a.queries, a.client_parse_count, a.server_parse_count, a.bind_count,
      a.bytes_received, a.bytes_sent, a.xact_time_us, a.query_time_us, a.wait_time_us);
}

Histogram& Histogram::operator+=(const Histogram& o) {
  for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  sum_us_ += o.sum_us_;
  return *this;
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t total = 0;
  for (size_t j = 0; j <= i && j < buckets_.size(); ++j) total += buckets_[j];
  return total;
}

void ServerTiming::on_ready(PoolStats& stats, char status, uint64_t socket_sent,
                            uint64_t socket_received, uint64_t now) {
  stats.totals.bytes_received += socket_sent - counted_sent;
  stats.totals.bytes_sent += socket_received - counted_received;
  counted_sent = socket_sent;
  counted_received = socket_received;
  if (query_start_us == 0 && (status != 'I' || xact_start_us == 0)) return;
  if (query_start_us != 0) {
    const uint64_t d = now - query_start_us;
    stats.totals.query_time_us += d;
    stats.query_time.observe(d);
    query_start_us = 0;
  }
  if (status == 'I' && xact_start_us != 0) {
    const uint64_t d = now - xact_start_us;
    stats.totals.xact_time_us += d;
    ++stats.totals.transactions;
    stats.xact_time.observe(d);
    xact_start_us = 0;
  }
}

void ServerTiming::on_unlink(PoolStats& stats, uint64_t socket_sent, uint64_t socket_received) {
  stats.totals.bytes_received += socket_sent - counted_sent;
  stats.totals.bytes_sent += socket_received - counted_received;
  counted_sent = socket_sent;
  counted_received = socket_received;
  query_start_us = xact_start_us = 0;
}

}  // namespace pgsluice
