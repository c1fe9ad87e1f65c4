// Pinning without starving (issue 18): a pool's pins are counted over every worker and never
// take its last session_state_pin_reserve servers, and a pinned server is unpinned as soon as
// its session holds nothing that pinned it.
#include <spdlog/spdlog.h>

#include <charconv>
#include <utility>

#include "pgsluice/protocol/backend.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/shared_limits.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace {

// Everything the pin action pins for, counted in one row; 0 means the session could serve
// anyone again (LOAD is never undone: such a server is closed instead, never checked).
constexpr std::string_view kPinCheckQuery =
    "SELECT (SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = "
    "pg_catalog.pg_backend_pid()) + (SELECT count(*) FROM pg_catalog.pg_listening_channels()) + "
    "(SELECT count(*) FROM pg_catalog.pg_prepared_statements WHERE from_sql AND name !~ "
    "'^pgsluice_s[0-9]+$') + (SELECT count(*) "
    "FROM pg_catalog.pg_cursors WHERE is_holdable) + (SELECT count(*) FROM pg_catalog.pg_class "
    "WHERE relnamespace = pg_catalog.pg_my_temp_schema())";

constexpr uint64_t kPinCheckIntervalMs = 1000;

}  // namespace

bool Server::pin(std::string why, bool past_reserve) {
  if (session_.pin.pinned) return true;
  const int limit =
      pool_->pool_size() - (past_reserve ? 0 : worker_->settings().session_state_pin_reserve);
  if (!SharedLimits::try_pin(pool_->limit_slots(), limit)) return false;
  session_.pin.pinned = true;
  session_.pin.why = std::move(why);
  session_.pin.may_end = false;
  session_.pin.checked_ms = worker_->now_ms();
  return true;
}

void Server::forget_other_clients_sequences(const Client& client) {
  if (session_.sequences_of == client.id() || !session_.link_untouched) return;
  send_internal_query("DISCARD SEQUENCES");
  session_.sequences_of = client.id();
}

void Server::unpin() {
  if (!session_.pin.pinned) return;
  session_.pin.pinned = false;
  session_.pin.why.clear();
  session_.pin.may_end = false;
  SharedLimits::unpin(pool_->limit_slots());
}

bool Server::run_boundary_checks() {
  // Pinned or not: the server's settings must be known when it is released at last.
  if (session_.kept.any() && read_back_kept_settings()) return true;
  if (session_.kept.resets_reported() && restore_startup_reported()) return true;
  return session_.pin.pinned && check_pin();
}

bool Server::check_pin() {
  if (session_.dirty.needs_close() || session_.pin.check_awaiting) return false;
  const uint64_t now = worker_->now_ms();
  if (!session_.pin.may_end && now < session_.pin.checked_ms + kPinCheckIntervalMs) return false;
  session_.pin.may_end = false;
  session_.pin.checked_ms = now;
  session_.pin.check_awaiting = true;
  session_.pin.check_held = -1;
  send_internal_query(std::string(kPinCheckQuery));
  return true;
}

void Server::on_pin_check_row(std::string_view data_row_body) {
  auto row = protocol::parse_data_row(data_row_body);
  if (!row || row.value.values.size() != 1 || !row.value.values[0]) return;
  const std::string_view text = *row.value.values[0];
  int64_t held = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), held);
  if (ec == std::errc() && end == text.data() + text.size()) session_.pin.check_held = held;
}

void Server::finish_pin_check() {
  session_.pin.check_awaiting = false;
  if (session_.pin.check_held != 0) return;  // still held, or no answer: the pin stays
  if (client_ != nullptr) {
    spdlog::info("{} unpinned from {}: its session holds nothing that pinned it", client_->log_id(),
                 log_id());
  }
  unpin();
}

}  // namespace pgsluice
