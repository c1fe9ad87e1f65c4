// Parsers for the backend (server → client) messages the pooler looks into. Each takes the body
// of a message (after the length word) and returns views into it; nothing is copied.
// ParseComplete, BindComplete, CloseComplete, NoData, EmptyQueryResponse, PortalSuspended and
// CopyDone have no body: check them with expect_empty_body() from frontend.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "pgsluice/protocol/result.h"

namespace pgsluice::protocol {

enum class AuthCode : int32_t {
  ok = 0,
  kerberos_v5 = 2,
  cleartext_password = 3,
  md5_password = 5,
  gss = 7,
  gss_continue = 8,
  sspi = 9,
  sasl = 10,
  sasl_continue = 11,
  sasl_final = 12,
};

struct Authentication {
  AuthCode code = AuthCode::ok;
  std::array<uint8_t, 4> md5_salt{};         // md5_password
  std::vector<std::string_view> mechanisms;  // sasl: the list, without the final empty string
  std::string_view data;                     // sasl_continue, sasl_final, gss_continue
};

struct BackendKeyData {
  int32_t process_id = 0;
  std::string_view secret_key;  // 4 bytes in 3.0, 4 to 256 bytes in 3.2
};

struct ParameterStatus {
  std::string_view name;
  std::string_view value;
};

// ReadyForQuery's status byte, by name.
enum class TransactionStatus : char {
  idle = 'I',      // no transaction block: a pooled server may go back to the pool here
  in_block = 'T',  // inside BEGIN … COMMIT
  failed = 'E',    // inside a failed transaction block: only ROLLBACK is accepted
};

struct ReadyForQuery {
  char status = 'I';  // the byte as it came: 'I', 'T' or 'E' (checked by the parser)
  [[nodiscard]] TransactionStatus transaction_status() const {
    return static_cast<TransactionStatus>(status);
  }
};

// ErrorResponse and NoticeResponse: typed fields, with the common ones picked out.
struct ErrorFields {
  std::vector<std::pair<char, std::string_view>> fields;  // every field in arrival order
  std::string_view severity;                              // 'S' (localized)
  std::string_view severity_nonlocalized;                 // 'V'
  std::string_view code;                                  // 'C', the SQLSTATE
  std::string_view message;                               // 'M'
  std::string_view detail;                                // 'D'
  std::string_view hint;                                  // 'H'

  [[nodiscard]] std::string_view field(char type) const;  // empty when absent
};

struct CommandComplete {
  std::string_view tag;
};

struct FieldDescription {
  std::string_view name;
  uint32_t table_oid = 0;
  int16_t column_number = 0;
  uint32_t type_oid = 0;
  int16_t type_size = 0;
  int32_t type_modifier = 0;
  int16_t format = 0;
};

struct RowDescription {
  std::vector<FieldDescription> fields;
};

struct DataRow {
  std::vector<std::optional<std::string_view>> values;  // nullopt: SQL NULL
};

struct ParameterDescription {
  std::vector<uint32_t> types;
};

// CopyInResponse, CopyOutResponse and CopyBothResponse share one layout.
struct CopyResponse {
  int8_t format = 0;  // 0 text, 1 binary
  std::vector<int16_t> column_formats;
};

struct NotificationResponse {
  int32_t process_id = 0;
  std::string_view channel;
  std::string_view payload;
};

// PostgreSQL sends the whole version it will speak (major << 16 | minor: 196608 for 3.0), though
// the protocol documentation calls the field the "newest minor version"; libpq reads it whole.
struct NegotiateProtocolVersion {
  int32_t newest_version = 0;
  std::vector<std::string_view> unrecognized_options;
};

Parsed<Authentication> parse_authentication(std::string_view body);
Parsed<BackendKeyData> parse_backend_key_data(std::string_view body);
Parsed<ParameterStatus> parse_parameter_status(std::string_view body);
Parsed<ReadyForQuery> parse_ready_for_query(std::string_view body);
Parsed<ErrorFields> parse_error_fields(std::string_view body);  // ErrorResponse, NoticeResponse
Parsed<CommandComplete> parse_command_complete(std::string_view body);
Parsed<RowDescription> parse_row_description(std::string_view body);
Parsed<DataRow> parse_data_row(std::string_view body);
Parsed<ParameterDescription> parse_parameter_description(std::string_view body);
Parsed<CopyResponse> parse_copy_response(std::string_view body);
Parsed<NotificationResponse> parse_notification_response(std::string_view body);
Parsed<NegotiateProtocolVersion> parse_negotiate_protocol_version(std::string_view body);

}  // namespace pgsluice::protocol
