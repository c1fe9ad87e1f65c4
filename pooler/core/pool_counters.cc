// Sums and PgBouncer's averages of the pool counters, one kPoolCounters row at a time; see
// pool_counters.h.
#include "pooler/core/pool_counters.h"

namespace pgsluice {

PoolCounters& PoolCounters::operator+=(const PoolCounters& o) {
  for (const PoolCounterInfo& counter : kPoolCounters) this->*counter.field += o.*counter.field;
  return *this;
}

PoolAverages compute_averages(const PoolCounters& cur, const PoolCounters& old,
                              uint64_t duration_us) {
  PoolAverages avg;
  if (duration_us == 0) return avg;
  // Counters only grow, but a pool's snapshot may predate a reload that replaced nothing; guard
  // against wrap-around all the same, since a negative rate would print as 18 quintillion.
  auto delta = [&](uint64_t PoolCounters::*field) {
    return cur.*field >= old.*field ? cur.*field - old.*field : 0;
  };
  // A time per event of the period; 0 when there was none.
  auto per = [&](uint64_t time, uint64_t PoolCounters::*events) {
    const uint64_t n = delta(events);
    return n > 0 ? time / n : 0;
  };
  for (const PoolCounterInfo& counter : kPoolCounters) {
    const uint64_t d = delta(counter.field);
    uint64_t& out = avg.*counter.field;
    switch (counter.average) {
      case Average::none:
        break;
      case Average::per_second:
        out = d * 1'000'000 / duration_us;
        break;
      case Average::per_query:
        out = per(d, &PoolCounters::queries);
        break;
      case Average::per_transaction:
        out = per(d, &PoolCounters::transactions);
        break;
      case Average::per_server_assignment:
        out = per(d, &PoolCounters::server_assignments);
        break;
    }
  }
  return avg;
}

}  // namespace pgsluice
