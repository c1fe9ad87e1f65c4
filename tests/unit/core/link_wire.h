// The messages the link tests send and expect, each built whole by protocol/'s writers (or, for
// the few the pooler never writes itself, field by field), and show_wire(): bytes printed one
// message per line with every byte visible, so that two streams compare exactly and a
// difference reads as a protocol trace.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pgsluice/protocol/writer.h"

namespace pgsluice::test_support::wire {

namespace pp = pgsluice::protocol;

// --- frontend (the test as a client, or what the fake PostgreSQL expects to receive) ---

inline std::string startup(std::string_view user, std::string_view database,
                           int32_t version = 3 << 16) {
  std::string out;
  const std::pair<std::string_view, std::string_view> params[] = {{"user", user},
                                                                  {"database", database}};
  pp::write_startup_message(out, version, params);
  return out;
}
// A StartupMessage with one setting besides user and database (`work_mem=abc`).
inline std::string startup_with(std::string_view user, std::string_view database,
                                std::string_view name, std::string_view value) {
  std::string out;
  const std::pair<std::string_view, std::string_view> params[] = {
      {"user", user}, {"database", database}, {name, value}};
  pp::write_startup_message(out, 3 << 16, params);
  return out;
}
inline std::string query(std::string_view sql) {
  std::string out;
  pp::write_query(out, sql);
  return out;
}
inline std::string parse(std::string_view statement, std::string_view sql) {
  std::string out;
  pp::write_parse(out, statement, sql, {});
  return out;
}
// A Bind of `statement` to the unnamed portal, without parameters, results in text.
inline std::string bind(std::string_view statement) {
  std::string out;
  // After the statement name: no parameter format codes, no parameters, no result formats.
  pp::write_bind_renamed(out, "", statement, std::string_view("\0\0\0\0\0\0", 6));
  return out;
}
inline std::string execute() {
  std::string out;
  pp::write_execute(out, "", 0);
  return out;
}
inline std::string describe_statement(std::string_view statement) {
  std::string out;
  pp::write_describe(out, 'S', statement);
  return out;
}
inline std::string close_statement(std::string_view statement) {
  std::string out;
  pp::write_close(out, 'S', statement);
  return out;
}
inline std::string sync() {
  std::string out;
  pp::write_sync(out);
  return out;
}
inline std::string terminate() {
  std::string out;
  pp::write_terminate(out);
  return out;
}
// CopyData and CopyDone are the same bytes in both directions.
inline std::string copy_data(std::string_view data) {
  std::string out;
  pp::MessageWriter(out, 'd').bytes(data);
  return out;
}
inline std::string copy_done() {
  std::string out;
  pp::MessageWriter(out, 'c');
  return out;
}

// --- backend (the test as PostgreSQL, or what the client expects to receive) ---

inline std::string ready(char status) {
  std::string out;
  pp::write_ready_for_query(out, status);
  return out;
}
inline std::string command_complete(std::string_view tag) {
  std::string out;
  pp::write_command_complete(out, tag);
  return out;
}
// A RowDescription of one text-format column.
inline std::string row_description(std::string_view column, uint32_t type_oid) {
  std::string out;
  const std::string_view names[] = {column};
  const uint32_t oids[] = {type_oid};
  pp::write_text_row_description(out, names, oids);
  return out;
}
inline std::string data_row(std::optional<std::string_view> value) {
  std::string out;
  const std::optional<std::string_view> values[] = {value};
  pp::write_data_row(out, values);
  return out;
}
inline std::string parse_complete() {
  std::string out;
  pp::write_parse_complete(out);
  return out;
}
inline std::string close_complete() {
  std::string out;
  pp::write_close_complete(out);
  return out;
}
// A ParameterDescription of a statement without parameters.
inline std::string no_parameters() {
  std::string out;
  pp::MessageWriter(out, 't').i16(0);
  return out;
}
inline std::string bind_complete() {
  std::string out;
  pp::write_bind_complete(out);
  return out;
}
inline std::string error(std::string_view code, std::string_view message) {
  std::string out;
  pp::write_error_response(out,
                           pp::ErrorNotice{.severity = "ERROR", .code = code, .message = message});
  return out;
}
// CopyInResponse for text COPY of `columns` columns.
inline std::string copy_in_response(int16_t columns) {
  std::string out;
  pp::MessageWriter m(out, 'G');
  m.i8(0).i16(columns);
  for (int16_t i = 0; i < columns; ++i) m.i16(0);
  return out;
}
inline std::string parameter_status(std::string_view name, std::string_view value) {
  std::string out;
  pp::write_parameter_status(out, name, value);
  return out;
}
inline std::string authentication_ok() {
  std::string out;
  pp::write_authentication_ok(out);
  return out;
}

// --- reading ---

// One message per line: its type, then its body with printable ASCII as is and every other
// byte as \xNN; `startup` says the stream opens with a startup packet (no type byte). Bytes
// after the last whole message end the text as "partial: …".
std::string show_wire(std::string_view bytes, bool startup = false);
// The messages of `bytes` one by one (type, body); a partial tail is dropped.
struct Message {
  char type = 0;
  std::string body;
};
std::vector<Message> split(std::string_view bytes);

}  // namespace pgsluice::test_support::wire
