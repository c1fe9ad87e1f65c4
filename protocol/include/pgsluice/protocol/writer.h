// Builders for the messages the pooler writes itself. Each appends one complete message (type,
// length, body) to `out`, so that several can be batched into one socket write.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/frontend.h"

namespace pgsluice::protocol {

// Writes one message whose length word is patched in at end().
class MessageWriter {
 public:
  MessageWriter(std::string& out, char type);  // type 0: a startup-phase packet (no type byte)
  MessageWriter(const MessageWriter&) = delete;
  MessageWriter& operator=(const MessageWriter&) = delete;
  ~MessageWriter();  // calls end() if it was not called

  MessageWriter& i8(uint8_t v);
  MessageWriter& i16(int16_t v);
  MessageWriter& i32(int32_t v);
  MessageWriter& u32(uint32_t v);
  MessageWriter& cstring(std::string_view s);
  MessageWriter& bytes(std::string_view s);
  void end();

 private:
  std::string& out_;
  size_t length_pos_;
  bool ended_ = false;
};

// The fields of an ErrorResponse or NoticeResponse the pooler sends.
struct ErrorNotice {
  std::string_view severity = "ERROR";  // ERROR, FATAL, PANIC, WARNING, NOTICE, LOG, INFO, DEBUG
  // The {} initializers let callers omit fields in designated initializers under -Wextra.
  std::string_view code{};  // SQLSTATE, five characters
  std::string_view message{};
  std::string_view detail{};  // optional
  std::string_view hint{};    // optional
};

// --- backend messages (pooler → client) ---
void write_error_response(std::string& out, const ErrorNotice& error);
void write_notice_response(std::string& out, const ErrorNotice& notice);
void write_ready_for_query(std::string& out, char status);
inline void write_ready_for_query(std::string& out, TransactionStatus status) {
  write_ready_for_query(out, static_cast<char>(status));
}
void write_authentication_ok(std::string& out);
void write_authentication_cleartext_password(std::string& out);
void write_authentication_md5_password(std::string& out, std::array<uint8_t, 4> salt);
void write_authentication_sasl(std::string& out, std::span<const std::string_view> mechanisms);
void write_authentication_sasl_continue(std::string& out, std::string_view data);
void write_authentication_sasl_final(std::string& out, std::string_view data);
void write_parameter_status(std::string& out, std::string_view name, std::string_view value);
void write_backend_key_data(std::string& out, int32_t process_id, std::string_view secret_key);
// `newest_version` whole (major << 16 | minor), as PostgreSQL sends it and libpq reads it.
void write_negotiate_protocol_version(std::string& out, int32_t newest_version,
                                      std::span<const std::string_view> unrecognized_options);
void write_parse_complete(std::string& out);
void write_bind_complete(std::string& out);
void write_close_complete(std::string& out);
void write_no_data(std::string& out);
void write_empty_query_response(std::string& out);
void write_command_complete(std::string& out, std::string_view tag);
void write_row_description(std::string& out, std::span<const FieldDescription> fields);
// A RowDescription of text columns of the given types (the admin console's result sets).
void write_text_row_description(std::string& out, std::span<const std::string_view> names,
                                std::span<const uint32_t> type_oids);
void write_data_row(std::string& out, std::span<const std::optional<std::string_view>> values);

// --- frontend messages (pooler → server) ---
void write_startup_message(std::string& out, int32_t version,
                           std::span<const std::pair<std::string_view, std::string_view>> params);
void write_ssl_request(std::string& out);
void write_cancel_request(std::string& out, int32_t process_id, std::string_view secret_key);
void write_password_message(std::string& out, std::string_view password);
void write_sasl_initial_response(std::string& out, std::string_view mechanism,
                                 std::string_view data);
void write_sasl_response(std::string& out, std::string_view data);
void write_query(std::string& out, std::string_view sql);
void write_parse(std::string& out, std::string_view statement, std::string_view query,
                 std::span<const uint32_t> parameter_types);
// A Bind whose fields after the statement name are copied from a client's Bind.
void write_bind_renamed(std::string& out, std::string_view portal, std::string_view statement,
                        std::string_view after_statement);
void write_describe(std::string& out, char kind, std::string_view name);
inline void write_describe(std::string& out, DescribeTarget target, std::string_view name) {
  write_describe(out, static_cast<char>(target), name);
}
void write_execute(std::string& out, std::string_view portal, int32_t max_rows);
void write_close(std::string& out, char kind, std::string_view name);
inline void write_close(std::string& out, DescribeTarget target, std::string_view name) {
  write_close(out, static_cast<char>(target), name);
}
void write_sync(std::string& out);
void write_flush(std::string& out);
void write_terminate(std::string& out);

// Common PostgreSQL type OIDs for the admin console's columns.
inline constexpr uint32_t kOidInt4 = 23;
inline constexpr uint32_t kOidInt8 = 20;
inline constexpr uint32_t kOidText = 25;
inline constexpr uint32_t kOidNumeric = 1700;
inline constexpr uint32_t kOidTimestampTz = 1184;

}  // namespace pgsluice::protocol
