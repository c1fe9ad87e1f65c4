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
  return shutdown_.admit(client) && client_limits_admit(worker, client);
}

void Operations::maintain(Worker& worker, uint64_t now_ms) {
  maintain_pools(worker, now_ms);  // timeouts, limits, lifetimes (pool_maintenance.cc)
  enforce_client_timeouts(worker, now_ms);
}

void Operations::progress(Worker&, uint64_t now_ms) {
  shutdown_.tick(now_ms);
}

}  // namespace pgsluice
