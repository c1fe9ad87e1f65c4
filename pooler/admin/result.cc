// Admin console replies and their protocol encoding; see admin_result.h.
#include "pooler/admin/result.h"

#include <span>

#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

AdminResult& AdminResult::column(std::string_view name, uint32_t type_oid) {
  columns_.push_back({std::string(name), type_oid});
  return *this;
}
AdminResult& AdminResult::text(std::string_view name) {
  return column(name, pp::kOidText);
}
AdminResult& AdminResult::int4(std::string_view name) {
  return column(name, pp::kOidInt4);
}
AdminResult& AdminResult::int8(std::string_view name) {
  return column(name, pp::kOidInt8);
}
AdminResult& AdminResult::numeric(std::string_view name) {
  return column(name, pp::kOidNumeric);
}

AdminResult& AdminResult::row() {
  rows_.emplace_back();
  rows_.back().reserve(columns_.size());
  return *this;
}
AdminResult& AdminResult::add(std::string_view value) {
  rows_.back().emplace_back(std::string(value));
  return *this;
}
AdminResult& AdminResult::add(int64_t value) {
  return add(std::to_string(value));
}
AdminResult& AdminResult::add(uint64_t value) {
  return add(std::to_string(value));
}
AdminResult& AdminResult::add_null() {
  rows_.back().emplace_back(std::nullopt);
  return *this;
}

void AdminResult::notice(std::string message, std::string detail) {
  notices_.push_back({std::move(message), std::move(detail)});
}

AdminResult AdminResult::failure(std::string sqlstate, std::string message) {
  AdminResult r;
  r.error_ = AdminError{std::move(sqlstate), std::move(message)};
  return r;
}

AdminResult AdminResult::pending() {
  AdminResult r;
  r.pending_ = true;
  return r;
}

void AdminResult::write_error(std::string& out) const {
  if (!error_) return;
  pp::ErrorNotice e{.severity = "ERROR",
                    .code = error_->sqlstate,
                    .message = error_->message,
                    .detail = {},
                    .hint = {}};
  pp::write_error_response(out, e);
}

void AdminResult::write_row_description(std::string& out) const {
  if (columns_.empty()) {
    pp::write_no_data(out);
    return;
  }
  std::vector<std::string_view> names;
  std::vector<uint32_t> oids;
  names.reserve(columns_.size());
  oids.reserve(columns_.size());
  for (const AdminColumn& c : columns_) {
    names.push_back(c.name);
    oids.push_back(c.type_oid);
  }
  pp::write_text_row_description(out, names, oids);
}

void AdminResult::write_execute(std::string& out) const {
  if (error_) {
    write_error(out);
    return;
  }
  for (const AdminNotice& n : notices_) {
    pp::ErrorNotice notice{.severity = "NOTICE",
                           .code = sqlstate::kSuccessfulCompletion,
                           .message = n.message,
                           .detail = n.detail,
                           .hint = {}};
    pp::write_notice_response(out, notice);
  }
  std::vector<std::optional<std::string_view>> values;
  for (const auto& row : rows_) {
    values.clear();
    for (const auto& v : row) {
      values.push_back(v ? std::optional<std::string_view>(*v) : std::nullopt);
    }
    pp::write_data_row(out, values);
  }
  pp::write_command_complete(out, tag_);
}

void AdminResult::write_simple(std::string& out) const {
  if (error_) {
    write_error(out);
    return;
  }
  if (!columns_.empty()) write_row_description(out);
  write_execute(out);
}

}  // namespace pgsluice
