// A replication client (members of Client, kept apart from client.cc): a StartupMessage with
// replication=true (physical) or replication=database (logical), as PgBouncer 1.23+ passes them
// through. The client gets a server connection of its own, opened with the same replication
// parameter and the client's other startup parameters, linked to it for its whole life and
// closed with it: session semantics whatever pool_mode says. Once the walsender has logged in,
// the client is greeted with its ParameterStatus set and the bytes of both sides are relayed as
// they come, unparsed: a walsender speaks the replication command language, answers
// START_REPLICATION and BASE_BACKUP with COPY in one or both directions for as long as the
// stream lasts, and none of the pooler's statement-level work (prepared statement renaming, the
// session-state checks, parameter sync, server_reset_query, server_check_query) applies to it.
// Memory stays bounded by the channels' high-water marks: a side whose peer does not drain
// stops being read (Channel::kHighWaterMark), as for every linked pair.
#include <spdlog/spdlog.h>

#include "pgsluice/protocol/startup.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/login_notice.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

bool Client::read_replication_parameter(const pp::StartupPacket& packet) {
  for (const auto& [name, value] : packet.parameters) {
    if (name != "replication") continue;
    std::optional<pp::ReplicationMode> mode = pp::parse_replication_parameter(value);
    if (!mode) {
      // PostgreSQL's answer to the same packet (ProcessStartupPacket): a client that asked
      // for a walsender must not be given a plain session instead.
      std::string message =
          fmt::format("invalid value for parameter \"replication\": \"{}\"", value);
      if (worker_.settings().log_pooler_errors) spdlog::warn("{} error: {}", who_.log_id, message);
      send_error("FATAL", sqlstate::kInvalidParameterValue, message,
                 "Valid values are: \"false\", 0, \"true\", 1, \"database\".");
      close(message);
      return false;
    }
    replication_ = *mode;
  }
  return true;
}

void Client::keep_replication_parameter(std::string_view name, std::string_view value) {
  login_.replication_parameters.emplace_back(name, value);
}

void Client::begin_replication() {
  if (worker_.settings().application_name_add_host) {
    // The walsender reports the name the pooler made (application_name_add_host), as a pooled
    // server would be set to it.
    const std::string* app = params_.reported.get("application_name");
    std::erase_if(login_.replication_parameters,
                  [](const auto& p) { return p.first == "application_name"; });
    if (app != nullptr) login_.replication_parameters.emplace_back("application_name", *app);
  }
  if (worker_.settings().log_connections) {
    spdlog::info("{} replication={}: opening a server connection of its own", who_.log_id,
                 pp::to_string(replication_));
  }
  set_state(State::welcome_wait);
  channel_.stop_reading();
  wait_started_ms_ = worker_.now_ms();
  pool_->request_replication(*this);
}

void Client::on_replication_ready(Server& server) {
  if (state_ != State::welcome_wait) return;
  if (!register_for_cancel()) return;
  server_ = &server;
  // The walsender's own ParameterStatus set (it got the client's parameters at its login), the
  // pooler's cancel key (a cancel reaches the walsender through Server::cancel_running_query).
  params_.reported = server.parameters();
  std::string& out = channel_.output();
  pp::write_authentication_ok(out);
  for (const auto& [name, value] : params_.reported.items())
    pp::write_parameter_status(out, name, value);
  pp::write_backend_key_data(out, cancel_.pid, cancel_.key);
  write_login_notice(out, worker_.settings().login_notify_message);
  pp::write_ready_for_query(out, pp::TransactionStatus::idle);
  channel_.flush();
  if (state_ == State::closing) return;   // the flush failed: the client is gone
  ++pool_->stats().totals.client_logins;  // PgBouncer counts a replication login too
  if (worker_.settings().log_connections) spdlog::info("{} login ok (replication)", who_.log_id);
  set_state(State::active);
  channel_.start_reading();
  relay_replication_input();
}

void Client::on_replication_refused(std::string_view code, std::string_view message) {
  server_ = nullptr;
  // PostgreSQL's SQLSTATE and message, after PgBouncer's "login failed" (PgBouncer sends only
  // those two words; the reason is what the client needs to fix its role or pg_hba.conf).
  fail(code.empty() ? std::string_view(sqlstate::kConnectionFailure) : code,
       fmt::format("login failed: {}", message), "login failed");
}

void Client::relay_replication_input() {
  if (server_ == nullptr) return;
  pp::FrameReader& in = channel_.input();
  if (in.unread_size() == 0) return;
  Channel& out = server_->channel();
  // Whole reads, not messages: CopyData of any size passes without waiting to be complete,
  // and nothing here needs a message boundary (the walsender frames what it reads).
  out.output().append(in.unread());
  in.skip(in.unread_size());
  out.flush();
  // The walsender cannot take more for now: reading resumes when it drains (on_server_drained).
  if (server_ != nullptr && out.over_high_water()) channel_.stop_reading();
}

}  // namespace pgsluice
