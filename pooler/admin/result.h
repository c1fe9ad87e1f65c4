// One admin console reply: a result set (columns with type OIDs, text rows) or a command tag,
// with notices, or an error; and its encoding as protocol messages, for the simple query
// protocol (everything at once) and the extended one (RowDescription at Describe, rows at
// Execute). Built per command on the console: allocation here is fine, it is off the hot path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgsluice {

struct AdminColumn {
  std::string name;
  uint32_t type_oid = 0;
};

struct AdminNotice {
  std::string message;
  std::string detail;
};

struct AdminError {
  std::string sqlstate;
  std::string message;
};

class AdminResult {
 public:
  // Result sets.
  AdminResult& column(std::string_view name, uint32_t type_oid);
  AdminResult& text(std::string_view name);  // a text column
  AdminResult& int4(std::string_view name);
  AdminResult& int8(std::string_view name);
  AdminResult& numeric(std::string_view name);

  // Rows: start one with row(), then add values in column order.
  AdminResult& row();
  AdminResult& add(std::string_view value);
  AdminResult& add(const char* value) { return add(std::string_view(value)); }
  AdminResult& add(const std::string& value) { return add(std::string_view(value)); }
  AdminResult& add(int64_t value);
  AdminResult& add(uint64_t value);
  AdminResult& add(int value) { return add(static_cast<int64_t>(value)); }
  AdminResult& add(bool value) { return add(static_cast<int64_t>(value ? 1 : 0)); }
  AdminResult& add_null();

  void set_tag(std::string tag) { tag_ = std::move(tag); }
  void notice(std::string message, std::string detail = {});
  static AdminResult failure(std::string sqlstate, std::string message);
  // A command that answers later (PAUSE, WAIT_CLOSE, …): the session holds the client.
  static AdminResult pending();

  [[nodiscard]] const std::vector<AdminColumn>& columns() const { return columns_; }
  [[nodiscard]] const std::vector<std::vector<std::optional<std::string>>>& rows() const {
    return rows_;
  }
  [[nodiscard]] const std::string& tag() const { return tag_; }
  [[nodiscard]] const std::optional<AdminError>& error() const { return error_; }
  [[nodiscard]] bool is_pending() const { return pending_; }
  [[nodiscard]] bool has_rows() const { return !columns_.empty(); }

  // Simple query protocol: notices, RowDescription, DataRows, CommandComplete (or the error).
  // No ReadyForQuery: the session adds it.
  void write_simple(std::string& out) const;
  // Extended protocol pieces.
  void write_row_description(std::string& out) const;  // NoData when there are no columns
  void write_execute(std::string& out) const;          // notices, DataRows, CommandComplete
  void write_error(std::string& out) const;

 private:
  std::vector<AdminColumn> columns_;
  std::vector<std::vector<std::optional<std::string>>> rows_;
  std::vector<AdminNotice> notices_;
  std::string tag_;
  std::optional<AdminError> error_;
  bool pending_ = false;
};

}  // namespace pgsluice
