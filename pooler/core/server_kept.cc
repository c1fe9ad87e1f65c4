// The `keep` action on a server: reading back the settings a client's transaction changed
// (pooler/session_state/kept_settings.h) before the server is released.
#include <spdlog/spdlog.h>

#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"

namespace pgsluice {

// PostgreSQL reports a parameter only when its value changes: a client's DateStyle=ISO set on
// a server that has 'ISO, MDY' brings no ParameterStatus, and the client's value would differ
// from the server's at every link, each link setting it again (PgBouncer keeps the canonical
// value for the same reason). The server's value is the one PostgreSQL would have reported to
// the client at its login, so the client is told it too.
void Server::adopt_canonical_values() {
  parameter_sync_owed_ = false;
  if (internal_failed_ || client_ == nullptr) return;
  std::vector<std::pair<std::string, std::string>> adopted;
  for (const auto& [name, value] : client_->tracked_parameters().items()) {
    if (tracked_parameter_name(name).empty()) continue;
    const std::string* current = tracked_.get(name);
    if (current != nullptr && *current != value) adopted.emplace_back(name, *current);
  }
  for (const auto& [name, value] : adopted) client_->on_server_parameter(name, value);
}

std::string_view Server::server_version() const {
  const std::string* version = tracked_.get("server_version");
  return version != nullptr ? std::string_view(*version) : std::string_view();
}

bool Server::read_back_kept_settings() {
  ParameterSet scratch;  // the client left meanwhile: only the server's side matters
  if (kept_.settle_known(pool_->set_values(), server_version(),
                         client_ != nullptr ? client_->session_settings() : scratch, extras_)) {
    return false;
  }
  const ParameterSet none;
  std::string query =
      kept_.begin_query(client_ != nullptr ? client_->session_settings() : none, extras_);
  if (query.empty()) {
    kept_.clear();
    return false;
  }
  // Sent at a transaction boundary with nothing owed: its replies come before anything the
  // client sends next, and the server stays linked until they have come.
  send_internal_query(query);
  return true;
}

void Server::sync_parameters(const Client& client) {
  std::string sync = build_parameter_sync_query(client.tracked_parameters(), tracked_,
                                                client.session_settings(), extras_);
  if (!sync.empty()) {
    send_internal_query(sync);
    parameter_sync_owed_ = true;
  }
}

void Server::resume_client_after_read_back() {
  // Released meanwhile, the client went on at once (Client::on_server_released).
  if (state_ != State::active || client_ == nullptr || kept_.awaiting()) return;
  if (!client_->input_held_for_read_back()) return;
  sync_parameters(*client_);
  client_->resume_input_after_read_back();
}

void Server::finish_kept_settings() {
  ParameterSet scratch;  // the client left meanwhile: only the server's side matters
  const ParameterSet none;
  const bool answered =
      kept_.finish(client_ != nullptr ? client_->startup_extras() : none, pool_->credentials().user,
                   client_ != nullptr ? client_->session_settings() : scratch, extras_,
                   &pool_->set_values(), server_version());
  if (!answered) {
    // What the server now has is unknown: it must not serve anyone else.
    spdlog::warn("{} could not read back the settings its client kept; closing at release",
                 log_id());
    timing.close_needed = true;
  }
}

}  // namespace pgsluice
