// SHOW PEERS and SHOW PEER_POOLS: PgBouncer 1.25's peering commands, its columns and types.
#pragma once

#include <cstddef>

#include "pooler/admin/result.h"

namespace pgsluice {

class Worker;

// SHOW PEERS: the [peers] lines by peer id (peer_id, host, port, pool_size), this process's own
// line included when the section has one; pool_size is the one in force.
AdminResult show_peers(Worker& worker);
// SHOW PEER_POOLS: per peer that cancel requests were forwarded to, the requests and the
// connections in flight (peer_forwarder.h says which count is which).
AdminResult show_peer_pools(Worker& worker);
// SHOW LISTS' peer_pools.
size_t peer_pool_count(Worker& worker);

}  // namespace pgsluice
