// The role check's query and its answer; see role_check.h.
#include "pooler/core/role_check.h"

#include <fmt/format.h>

#include "pgsluice/protocol/writer.h"

namespace pgsluice {

namespace {
// Schema-qualified, so that no search_path a client left can shadow the functions.
constexpr std::string_view kRoleQuery =
    "SELECT pg_catalog.pg_is_in_recovery(), "
    "pg_catalog.current_setting('transaction_read_only')";
}  // namespace

std::string RoleCheck::messages() {
  std::string out;
  protocol::write_query(out, kRoleQuery);
  return out;
}

std::optional<ServerRole> RoleCheck::parse_row(const protocol::DataRow& row) {
  if (row.values.size() != 2 || !row.values[0] || !row.values[1]) return std::nullopt;
  const std::string_view recovery = *row.values[0];
  const std::string_view read_only = *row.values[1];
  if ((recovery != "t" && recovery != "f") || (read_only != "on" && read_only != "off")) {
    return std::nullopt;
  }
  ServerRole role;
  role.hot_standby = recovery == "t";
  role.read_only = role.hot_standby || read_only == "on";
  return role;
}

void RoleCheck::start() {
  answer_.reset();
  error_.clear();
}

void RoleCheck::on_query_row(const protocol::DataRow& row) {
  answer_ = parse_row(row);
  if (!answer_) error_ = "the role check's answer could not be read";
}

void RoleCheck::on_query_done() {
  if (!answer_ && error_.empty()) error_ = "the role check returned no row";
}

void RoleCheck::on_query_error(std::string_view sqlstate, std::string_view message) {
  answer_.reset();
  error_ = fmt::format("{} ({})", message, sqlstate);
}

}  // namespace pgsluice
