// See client_limits.h.
#include "pooler/ops/client_limits.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/worker.h"

namespace pgsluice {

const char* exceeded_client_limit(size_t same_db, size_t same_user, int max_db, int max_user) {
  if (max_db > 0 && same_db >= static_cast<size_t>(max_db)) {
    return "client connections exceeded (max_db_client_connections)";
  }
  if (max_user > 0 && same_user >= static_cast<size_t>(max_user)) {
    return "client connections exceeded (max_user_client_connections)";
  }
  return nullptr;
}

bool client_limits_admit(Worker& worker, Client& client) {
  const Config& config = worker.config();
  // A [databases] or [users] value above 0 replaces the main section's (PgBouncer's precedence).
  const int max_db = config.max_db_client_connections_for(client.database());
  const int max_user = config.max_user_client_connections_for(client.user());
  if (max_db <= 0 && max_user <= 0) return true;
  if (client.is_admin_console()) {
    const std::vector<std::string>& admins = config.settings.admin_users;
    if (std::find(admins.begin(), admins.end(), client.user()) != admins.end()) return true;
  }
  size_t same_db = 0;
  size_t same_user = 0;
  // The limit counts every worker's clients: the others are parked while they are counted.
  WorldPause pause = worker.pause_world();
  worker.for_each_client([&](Client& c) {
    // Clients still in their startup packet have not been admitted (this one among them).
    if (&c == &client || c.state() == Client::State::startup ||
        c.state() == Client::State::closing) {
      return;
    }
    if (c.database() == client.database()) ++same_db;
    if (c.user() == client.user()) ++same_user;
  });
  const char* limit = exceeded_client_limit(same_db, same_user, max_db, max_user);
  if (limit == nullptr) return true;
  client.fail(sqlstate::kTooManyConnections, limit);
  return false;
}

}  // namespace pgsluice
