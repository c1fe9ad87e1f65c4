// The janitor's pool round (pool_maintenance.cc): Pool::maintain() for every pool of a worker,
// with the number of clients attached to each (min_pool_size is enforced only for pools with
// a client or a forced user).
#pragma once

#include <cstdint>

namespace pgsluice {

class Worker;

void maintain_pools(Worker& worker, uint64_t now_ms);

}  // namespace pgsluice
