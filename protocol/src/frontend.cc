// Parsers for the frontend messages the pooler inspects (Query, the extended protocol, COPY
// from the client, authentication responses). All results are views into the body.
#include "pgsluice/protocol/frontend.h"

#include <algorithm>

#include "parse_helpers.h"
#include "pgsluice/protocol/bytes.h"

namespace pgsluice::protocol {

namespace {

// Describe and Close name their target the same way: 'S' statement or 'P' portal.
bool valid_target_kind(char kind) {
  return kind == 'S' || kind == 'P';
}

}  // namespace

Parsed<Query> parse_query(std::string_view body) {
  ByteReader r(body);
  Query q;
  if (!r.read_cstring(q.sql)) return cstring_error(r);
  if (auto e = finish(r); e != ParseError::ok) return e;
  return q;
}

Parsed<Parse> parse_parse(std::string_view body) {
  ByteReader r(body);
  Parse p;
  if (!r.read_cstring(p.statement)) return cstring_error(r);
  if (!r.read_cstring(p.query)) return cstring_error(r);
  int16_t count = 0;
  if (!r.read_i16(count)) return ParseError::truncated;
  if (count < 0) return ParseError::bad_value;
  p.parameter_types.reserve(bounded_reserve(count, r.remaining(), 4));
  for (int i = 0; i < count; ++i) {
    uint32_t oid = 0;
    if (!r.read_u32(oid)) return ParseError::truncated;
    p.parameter_types.push_back(oid);
  }
  if (auto e = finish(r); e != ParseError::ok) return e;
  return p;
}

Parsed<Bind> parse_bind(std::string_view body) {
  ByteReader r(body);
  Bind b;
  if (!r.read_cstring(b.portal)) return cstring_error(r);
  if (!r.read_cstring(b.statement)) return cstring_error(r);
  b.after_statement = r.rest();

  // Format codes are not checked against 0/1 here: the server rejects them with its own
  // SQLSTATE, and the pooler forwards the bytes unchanged either way.
  int16_t format_count = 0;
  if (!r.read_i16(format_count)) return ParseError::truncated;
  if (format_count < 0) return ParseError::bad_value;
  b.parameter_formats.reserve(bounded_reserve(format_count, r.remaining(), 2));
  for (int i = 0; i < format_count; ++i) {
    int16_t format = 0;
    if (!r.read_i16(format)) return ParseError::truncated;
    b.parameter_formats.push_back(format);
  }

  int16_t value_count = 0;
  if (!r.read_i16(value_count)) return ParseError::truncated;
  if (value_count < 0) return ParseError::bad_value;
  b.parameters.reserve(bounded_reserve(value_count, r.remaining(), 4));
  for (int i = 0; i < value_count; ++i) {
    int32_t length = 0;
    if (!r.read_i32(length)) return ParseError::truncated;
    if (length == -1) {  // -1 is SQL NULL, and no value bytes follow
      b.parameters.emplace_back(std::nullopt);
      continue;
    }
    if (length < -1) return ParseError::bad_value;
    std::string_view value;
    if (!r.read_bytes(static_cast<size_t>(length), value)) return ParseError::truncated;
    b.parameters.emplace_back(value);
  }

  int16_t result_count = 0;
  if (!r.read_i16(result_count)) return ParseError::truncated;
  if (result_count < 0) return ParseError::bad_value;
  b.result_formats.reserve(bounded_reserve(result_count, r.remaining(), 2));
  for (int i = 0; i < result_count; ++i) {
    int16_t format = 0;
    if (!r.read_i16(format)) return ParseError::truncated;
    b.result_formats.push_back(format);
  }
  if (auto e = finish(r); e != ParseError::ok) return e;
  return b;
}

Parsed<Describe> parse_describe(std::string_view body) {
  ByteReader r(body);
  Describe d;
  uint8_t kind = 0;
  if (!r.read_u8(kind)) return ParseError::truncated;
  d.kind = static_cast<char>(kind);
  if (!valid_target_kind(d.kind)) return ParseError::bad_value;
  if (!r.read_cstring(d.name)) return cstring_error(r);
  if (auto e = finish(r); e != ParseError::ok) return e;
  return d;
}

Parsed<Execute> parse_execute(std::string_view body) {
  ByteReader r(body);
  Execute x;
  if (!r.read_cstring(x.portal)) return cstring_error(r);
  // Any max_rows is valid: zero or a negative value both mean "no limit" to the server.
  if (!r.read_i32(x.max_rows)) return ParseError::truncated;
  if (auto e = finish(r); e != ParseError::ok) return e;
  return x;
}

Parsed<Close> parse_close(std::string_view body) {
  ByteReader r(body);
  Close c;
  uint8_t kind = 0;
  if (!r.read_u8(kind)) return ParseError::truncated;
  c.kind = static_cast<char>(kind);
  if (!valid_target_kind(c.kind)) return ParseError::bad_value;
  if (!r.read_cstring(c.name)) return cstring_error(r);
  if (auto e = finish(r); e != ParseError::ok) return e;
  return c;
}

Parsed<CopyData> parse_copy_data(std::string_view body) {
  return CopyData{body};
}

Parsed<CopyFail> parse_copy_fail(std::string_view body) {
  ByteReader r(body);
  CopyFail f;
  if (!r.read_cstring(f.message)) return cstring_error(r);
  if (auto e = finish(r); e != ParseError::ok) return e;
  return f;
}

Parsed<PasswordMessage> parse_password_message(std::string_view body) {
  ByteReader r(body);
  PasswordMessage p;
  if (!r.read_cstring(p.password)) return cstring_error(r);
  if (auto e = finish(r); e != ParseError::ok) return e;
  return p;
}

Parsed<SASLInitialResponse> parse_sasl_initial_response(std::string_view body) {
  ByteReader r(body);
  SASLInitialResponse s;
  if (!r.read_cstring(s.mechanism)) return cstring_error(r);
  int32_t length = 0;
  if (!r.read_i32(length)) return ParseError::truncated;
  if (length < -1) return ParseError::bad_value;
  if (length >= 0) {
    std::string_view data;
    if (!r.read_bytes(static_cast<size_t>(length), data)) return ParseError::truncated;
    s.data = data;
  }
  if (auto e = finish(r); e != ParseError::ok) return e;
  return s;
}

Parsed<SASLResponse> parse_sasl_response(std::string_view body) {
  return SASLResponse{body};
}

ParseError expect_empty_body(std::string_view body) {
  return body.empty() ? ParseError::ok : ParseError::trailing_bytes;
}

}  // namespace pgsluice::protocol
