// The console's per-connection lists: SHOW CLIENTS and SHOW SERVERS, and SHOW SOCKETS / SHOW
// ACTIVE_SOCKETS, which list both (connections still logging in too) with PgBouncer 1.25's
// buffer columns; and SHOW DNS_HOSTS / DNS_ZONES, PgBouncer's DNS cache, which pgsluice does not
// have (each server connection asks the system's resolver): their columns, and no rows.
#pragma once

#include "pooler/admin/result.h"

namespace pgsluice {

class Worker;

AdminResult show_clients(Worker& worker);
AdminResult show_servers(Worker& worker);
// active_only: ACTIVE_SOCKETS, the connections with bytes in a buffer (received and not yet
// handled, or queued to send).
AdminResult show_sockets(Worker& worker, bool active_only);
AdminResult show_dns_hosts();
AdminResult show_dns_zones();

}  // namespace pgsluice
