// The periodic role check of an idle server (server_role_check_interval, pool_maintenance.cc):
// one query that asks the server whether it is in recovery and read-only, the way libpq asks a
// server too old to report in_hot_standby. PostgreSQL 14+ also reports a changed
// in_hot_standby with the answer (any query would do for those); older servers report nothing,
// so the answer is the only thing that tells a promoted standby from a standby.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pooler/core/host_roles.h"
#include "pooler/core/server_query.h"

namespace pgsluice {

class RoleCheck final : public ServerQuerySink {
 public:
  // The Query message (simple protocol: one round trip, nothing left prepared on the server).
  static std::string messages();
  // The role in the query's one row: pg_is_in_recovery() and transaction_read_only, as text.
  static std::optional<ServerRole> parse_row(const protocol::DataRow& row);

  // Before each check: nothing answered yet.
  void start();
  // The role the last check found; empty before the first answer, or when it failed.
  [[nodiscard]] const std::optional<ServerRole>& answer() const { return answer_; }
  // Why the last check failed (an ErrorResponse, a row that could not be read); empty if not.
  [[nodiscard]] const std::string& error() const { return error_; }

  void on_query_row(const protocol::DataRow& row) override;
  void on_query_error(std::string_view sqlstate, std::string_view message) override;
  void on_query_done() override;
  void on_query_lost(std::string_view /*reason*/) override {}  // the server is closing anyway

 private:
  std::optional<ServerRole> answer_;
  std::string error_;
};

}  // namespace pgsluice
