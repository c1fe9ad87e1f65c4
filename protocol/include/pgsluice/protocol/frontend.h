// Parsers for the frontend (client → server) messages the pooler looks into. Each takes the body
// of a message (after the length word) and returns views into it; nothing is copied.
// Sync, Flush and Terminate have no body: check them with expect_empty_body().
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pgsluice/protocol/result.h"

namespace pgsluice::protocol {

struct Query {
  std::string_view sql;
};

struct Parse {
  std::string_view statement;  // empty: the unnamed statement
  std::string_view query;
  std::vector<uint32_t> parameter_types;
};

struct Bind {
  std::string_view portal;
  std::string_view statement;
  // Everything after the statement name (format codes, parameter values, result formats): a
  // rewrite of the statement name copies it unchanged.
  std::string_view after_statement;
  std::vector<int16_t> parameter_formats;
  std::vector<std::optional<std::string_view>> parameters;  // nullopt: SQL NULL (length -1)
  std::vector<int16_t> result_formats;
};

// What a Describe or a Close is about: the first byte of its body.
enum class DescribeTarget : char {
  statement = 'S',
  portal = 'P',
};

struct Describe {
  char kind = 'S';  // the byte as it came: 'S' or 'P' (checked by the parser)
  std::string_view name;
  [[nodiscard]] DescribeTarget target() const { return static_cast<DescribeTarget>(kind); }
};

struct Execute {
  std::string_view portal;
  int32_t max_rows = 0;
};

struct Close {
  char kind = 'S';  // the byte as it came: 'S' or 'P' (checked by the parser)
  std::string_view name;
  [[nodiscard]] DescribeTarget target() const { return static_cast<DescribeTarget>(kind); }
};

struct CopyData {
  std::string_view data;
};

struct CopyFail {
  std::string_view message;
};

struct PasswordMessage {
  std::string_view password;
};

struct SASLInitialResponse {
  std::string_view mechanism;
  std::optional<std::string_view> data;  // nullopt when the length is -1
};

struct SASLResponse {
  std::string_view data;
};

Parsed<Query> parse_query(std::string_view body);
Parsed<Parse> parse_parse(std::string_view body);
Parsed<Bind> parse_bind(std::string_view body);
Parsed<Describe> parse_describe(std::string_view body);
Parsed<Execute> parse_execute(std::string_view body);
Parsed<Close> parse_close(std::string_view body);
Parsed<CopyData> parse_copy_data(std::string_view body);
Parsed<CopyFail> parse_copy_fail(std::string_view body);
Parsed<PasswordMessage> parse_password_message(std::string_view body);
Parsed<SASLInitialResponse> parse_sasl_initial_response(std::string_view body);
Parsed<SASLResponse> parse_sasl_response(std::string_view body);

// For messages defined without a body (Sync, Flush, Terminate, CopyDone, ParseComplete, …).
ParseError expect_empty_body(std::string_view body);

}  // namespace pgsluice::protocol
