// max_db_client_connections and max_user_client_connections (PgBouncer 1.24): a login over
// either limit is refused with PgBouncer's message ("client connections exceeded
// (max_db_client_connections)") and SQLSTATE 53300, as max_client_conn is. Console sessions
// count too, and one over a limit is refused unless its user is in admin_users (PgBouncer 1.25:
// an administrator can always get in). The count walks the worker's clients, and only when a
// limit is set.
#pragma once

#include <cstddef>
#include <string>

namespace pgsluice {

class Client;
class Worker;

// Which limit a new client would exceed: nullptr when none (pure: unit-tested).
const char* exceeded_client_limit(size_t same_db, size_t same_user, int max_db, int max_user);

// Checks the client (its user and database known, not yet counted); fails it and returns false
// when over a limit.
bool client_limits_admit(Worker& worker, Client& client);

}  // namespace pgsluice
