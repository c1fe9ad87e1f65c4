// Per-pool statistics: the counters SHOW STATS and /metrics report (pool_counters.h, with
// PgBouncer's names and meanings), fixed-bucket latency histograms, PgBouncer's stats_period log
// line, and the timing state a server connection carries while it serves a client. Everything
// here is updated on the hot path, so it is plain integers: no allocation, no locking (a pool
// belongs to one worker).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "pooler/core/pool_counters.h"

namespace pgsluice {

// Monotonic microseconds (uv_hrtime), for query, transaction and wait times.
uint64_t now_us();

// log_stats: the line logged at every stats_period tick, with PgBouncer's words, so that what
// reads PgBouncer's log reads it too: "stats: 10 xacts/s, 20 queries/s, …, wait 1000 us".
std::string stats_log_line(const PoolAverages& averages);

// A latency histogram with fixed bucket bounds (Prometheus `le`, in microseconds): from 100 µs
// to 10 s, roughly 1-2.5-5 per decade, enough to tell a pooled 200 µs query from a 50 ms one.
class Histogram {
 public:
  static constexpr std::array<uint64_t, 16> kBoundsUs = {
      100,    250,     500,     1'000,   2'500,     5'000,     10'000,    25'000,
      50'000, 100'000, 250'000, 500'000, 1'000'000, 2'500'000, 5'000'000, 10'000'000};

  // Inline, and a scan up from the smallest bound: a pooled query or transaction takes well under
  // a millisecond, so the scan stops after a compare or two (a binary search takes four, and a
  // call: 61 instructions an observation, two per transaction).
  void observe(uint64_t us) {
    size_t i = 0;
    while (i < kBoundsUs.size() && us > kBoundsUs[i]) ++i;
    ++buckets_[i];
    ++count_;
    sum_us_ += us;
  }
  Histogram& operator+=(const Histogram& o);
  // Observations <= kBoundsUs[i] (cumulative, as Prometheus wants).
  [[nodiscard]] uint64_t cumulative(size_t i) const;
  [[nodiscard]] uint64_t count() const { return count_; }
  [[nodiscard]] uint64_t sum_us() const { return sum_us_; }

 private:
  std::array<uint64_t, kBoundsUs.size() + 1> buckets_{};  // the last one: above every bound
  uint64_t count_ = 0;
  uint64_t sum_us_ = 0;
};

struct PoolStats {
  PoolCounters totals;
  // Snapshots at the last two stats_period ticks (PgBouncer's newer_stats / older_stats).
  PoolCounters newer;
  PoolCounters older;
  Histogram xact_time;
  Histogram query_time;
  Histogram wait_time;

  // A stats_period tick.
  void roll() {
    older = newer;
    newer = totals;
  }
};

// What a server connection measures while linked: when the running query and transaction
// started (0: none), and what it has already counted of its socket's bytes.
struct ServerTiming {
  uint64_t query_start_us = 0;
  uint64_t xact_start_us = 0;
  uint64_t counted_sent = 0;      // server socket bytes already added to bytes_received
  uint64_t counted_received = 0;  // server socket bytes already added to bytes_sent
  uint64_t connect_ms = 0;        // loop time the connection was started
  bool close_needed = false;      // RECONNECT / RELOAD: close instead of reuse at the next release

  // A client message that starts work (Query, Parse, Bind, Execute, FunctionCall). `now` is the
  // worker's loop-turn time (Worker::turn_now_us), as PgBouncer's cached time: one clock read
  // per loop turn instead of two per transaction. Counts a query when it starts one: as
  // PgBouncer counts them, a query is what the client sends until the next ReadyForQuery, so a
  // pipeline up to its Sync is one, and so is a Parse + Sync on its own (psycopg prepares that
  // way). Counts a transaction at its first query, as PgBouncer counts xact_count (client.c):
  // one still open is counted already, and tools that compare the two see the same numbers.
  void on_request(uint64_t now, PoolCounters& counters) {
    if (query_start_us != 0) return;
    query_start_us = now;
    ++counters.queries;
    if (xact_start_us == 0) {
      xact_start_us = query_start_us;
      ++counters.transactions;
    }
  }
  // A ReadyForQuery for the client, with the server's transaction status and the server
  // socket's byte counters.
  void on_ready(PoolStats& stats, char status, uint64_t socket_sent, uint64_t socket_received,
                uint64_t now);
  // The link ended: bytes up to here are counted, a half-done transaction is forgotten.
  void on_unlink(PoolStats& stats, uint64_t socket_sent, uint64_t socket_received);
  // A new link: bytes before it (the pooler's own queries) are not the client's.
  void on_link(uint64_t socket_sent, uint64_t socket_received) {
    counted_sent = socket_sent;
    counted_received = socket_received;
    query_start_us = xact_start_us = 0;
  }
};

}  // namespace pgsluice
