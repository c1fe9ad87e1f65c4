// The `keep` action on a server: reading back the settings a client's transaction changed
// (pooler/session_state/kept_settings.h) before the server is released.
#include <spdlog/spdlog.h>

#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

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
  if (session_.kept.settle_known(pool_->set_values(), server_version(),
                                 client_ != nullptr ? client_->session_settings() : scratch,
                                 extras_)) {
    return false;
  }
  const ParameterSet none;
  std::string query =
      session_.kept.begin_query(client_ != nullptr ? client_->session_settings() : none, extras_);
  if (query.empty()) {
    session_.kept.forget_pending();
    return false;
  }
  // Sent at a transaction boundary with nothing owed: its replies come before anything the
  // client sends next, and the server stays linked until they have come.
  send_internal_query(query);
  return true;
}

bool Server::sync_parameters(const Client& client) {
  std::string sync = build_parameter_sync_query(client.tracked_parameters(), tracked_,
                                                client.session_settings(), extras_);
  if (sync.empty()) return false;
  send_internal_query(sync);
  parameter_sync_owed_ = true;
  sync_failure_.clear();
  return true;
}

void Server::resume_client_after_read_back() {
  // Released meanwhile, the client went on at once (Client::on_server_released).
  if (state_ != State::active || client_ == nullptr || session_.kept.awaiting()) return;
  if (!client_->input_held_for_read_back()) return;
  // The sync's answer resumes the client (finish_parameter_sync).
  if (sync_parameters(*client_)) return;
  client_->resume_input_after_read_back();
}

// The client's statements were held back until this answer (Client::on_server_linked): they
// run on this server only when it is in the client's state. A sync that failed (a setting the
// server refuses, a role that no longer exists) leaves the server as the previous client left
// it, or in a state nobody knows: it is closed, and the client's request gets the error instead
// of running anywhere.
bool Server::finish_parameter_sync() {
  parameter_sync_owed_ = false;
  if (sync_failure_.empty()) {
    adopt_canonical_values();
    return true;
  }
  std::string error = std::move(sync_failure_);
  sync_failure_.clear();
  Client* client = client_;
  client_ = nullptr;
  close("could not apply a client's session parameters");
  if (client != nullptr) client->refuse_held_request(std::move(error));
  return false;
}

void Server::note_sync_failure(const pp::ErrorFields* error) {
  std::string names;
  if (client_ != nullptr) {
    for (const auto& [name, value] : client_->session_settings().items()) {
      names += names.empty() ? "" : ", ";
      names += name;
    }
  }
  const std::string_view text = error != nullptr ? error->message : "malformed ErrorResponse";
  sync_failure_.clear();
  pp::write_error_response(
      sync_failure_,
      pp::ErrorNotice{
          .severity = "ERROR",
          .code = error != nullptr ? error->code : sqlstate::kInternalError,
          .message = fmt::format("pgsluice could not apply this session's settings on a "
                                 "server: {}",
                                 text),
          .detail =
              names.empty()
                  ? std::string("The statement was not run.")
                  : fmt::format("The statement was not run. This session's settings: {}.", names),
          .hint = "A setting or role that no server can take any more keeps failing; a new "
                  "connection starts without it."});
  spdlog::warn(
      "{} could not apply the session parameters of {}: {}; the client's statement "
      "is not run, the server is closed",
      log_id(), client_ != nullptr ? client_->log_id() : std::string("a client"), text);
}

bool Server::restore_startup_reported() {
  if (client_ == nullptr) {
    session_.kept.take_reported_resets(ParameterSet());
    return false;
  }
  const ParameterSet* defaults = pool_->welcome();
  std::string sets;
  for (const std::string& name : session_.kept.take_reported_resets(client_->startup_reported())) {
    const std::string* startup = client_->startup_reported().get(name);
    const std::string* now = tracked_.get(name);
    const std::string* fallback = defaults != nullptr ? defaults->get(name) : nullptr;
    // Only where the server is at its own default: a reset rolled back left the client's value.
    if (startup == nullptr || now == nullptr || fallback == nullptr || *now != *fallback ||
        *now == *startup) {
      continue;
    }
    sets += sets.empty() ? "SELECT " : ", ";
    sets += "pg_catalog.set_config(" + quote_literal(name) + ", " + quote_literal(*startup) +
            ", false)";
  }
  if (sets.empty()) return false;
  // Its ParameterStatus tells the client the value, as a direct connection's RESET would.
  send_internal_query(sets);
  parameter_sync_owed_ = true;
  sync_failure_.clear();
  return true;
}

void Server::finish_kept_settings() {
  ParameterSet scratch;  // the client left meanwhile: only the server's side matters
  const ParameterSet none;
  const bool answered = session_.kept.finish(
      client_ != nullptr ? client_->startup_extras() : none, pool_->credentials().user,
      client_ != nullptr ? client_->session_settings() : scratch, extras_, &pool_->set_values(),
      server_version());
  if (!answered) {
    // What the server now has is unknown: it must not serve anyone else.
    spdlog::warn("{} could not read back the settings its client kept; closing at release",
                 log_id());
    timing.close_needed = true;
  }
}

}  // namespace pgsluice
