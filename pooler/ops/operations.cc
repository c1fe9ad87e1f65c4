// The operations object; see operations.h.
#include "pooler/ops/operations.h"

#include "pooler/core/pool_maintenance.h"
#include "pooler/core/worker.h"
#include "pooler/ops/client_limits.h"
#include "pooler/ops/client_timeouts.h"

namespace pgsluice {

void Operations::start_signals(Worker& primary) {
  shutdown_.start_signals(primary.loop());
}

bool Operations::admit(Worker& worker, Client& client) {
  return client_limits_admit(worker, client);
}

void Operations::maintain(Worker& primary, uint64_t now_ms) {
  maintain_pools(primary, now_ms);  // timeouts, limits, lifetimes (pool_maintenance.cc)
}

void Operations::enforce(Worker& primary, uint64_t now_ms) {
  enforce_client_timeouts(primary, now_ms);
  shutdown_.tick(now_ms);  // last: it may stop the worker
}

}  // namespace pgsluice
