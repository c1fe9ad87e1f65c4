// Counters, averages and histograms; see stats.h.
#include "pooler/core/stats.h"

#include <fmt/format.h>
#include <uv.h>

namespace pgsluice {

uint64_t now_us() {
  return uv_hrtime() / 1000;
}

std::string stats_log_line(const PoolAverages& a) {
  return fmt::format(
      "stats: {} xacts/s, {} queries/s, {} client parses/s, {} server parses/s, {} binds/s, {} "
      "client "
      "logins/s, in {} B/s, out {} B/s, xact {} us, query {} us, wait {} us",
      a.transactions, a.queries, a.client_parse_count, a.server_parse_count, a.bind_count,
      a.client_logins, a.bytes_received, a.bytes_sent, a.xact_time_us, a.query_time_us,
      a.wait_time_us);
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
