// Parsers for the backend messages the pooler inspects (authentication, session state, errors,
// result metadata, COPY, notifications, version negotiation). All results are views into the body.
#include "pgsluice/protocol/backend.h"

#include <algorithm>
#include <cstring>

#include "parse_helpers.h"
#include "pgsluice/protocol/bytes.h"

namespace pgsluice::protocol {

namespace {

constexpr size_t kMinSecretKeyLength = 4;
constexpr size_t kMaxSecretKeyLength = 256;

}  // namespace

std::string_view ErrorFields::field(char type) const {
  for (const auto& [t, value] : fields) {
    if (t == type) return value;
  }
  return {};
}

Parsed<Authentication> parse_authentication(std::string_view body) {
  ByteReader r(body);
  Authentication a;
  int32_t code = 0;
  if (!r.read_i32(code)) return ParseError::truncated;
  switch (code) {
    case static_cast<int32_t>(AuthCode::ok):
    case static_cast<int32_t>(AuthCode::kerberos_v5):
    case static_cast<int32_t>(AuthCode::cleartext_password):
    case static_cast<int32_t>(AuthCode::gss):
    case static_cast<int32_t>(AuthCode::sspi):
      break;
    case static_cast<int32_t>(AuthCode::md5_password): {
      std::string_view salt;
      if (!r.read_bytes(a.md5_salt.size(), salt)) return ParseError::truncated;
      // A fixed-size copy: GCC 12 at -O2 cannot see that read_bytes returned exactly four bytes
      // and warns (stringop-overflow) about std::copy.
      std::memcpy(a.md5_salt.data(), salt.data(), a.md5_salt.size());
      break;
    }
    case static_cast<int32_t>(AuthCode::sasl):
      // The mechanism list ends with an empty string, i.e. a lone NUL byte.
      for (;;) {
        std::string_view mechanism;
        if (!r.read_cstring(mechanism)) return ParseError::missing_terminator;
        if (mechanism.empty()) break;
        a.mechanisms.push_back(mechanism);
      }
      break;
    case static_cast<int32_t>(AuthCode::gss_continue):
    case static_cast<int32_t>(AuthCode::sasl_continue):
    case static_cast<int32_t>(AuthCode::sasl_final):
      // The payload has no length of its own: the message length delimits it.
      (void)r.read_bytes(r.remaining(), a.data);
      break;
    default:
      // 6 (SCMCredential) was removed from the protocol long ago; anything else is unknown.
      return ParseError::bad_value;
  }
  a.code = static_cast<AuthCode>(code);
  if (auto e = finish(r); e != ParseError::ok) return e;
  return a;
}

Parsed<BackendKeyData> parse_backend_key_data(std::string_view body) {
  ByteReader r(body);
  BackendKeyData k;
  if (!r.read_i32(k.process_id)) return ParseError::truncated;
  // Protocol 3.2 lets the key run to the end of the message (up to 256 bytes); in 3.0 it is
  // exactly 4 bytes, which the same rule accepts.
  if (r.remaining() < kMinSecretKeyLength) return ParseError::truncated;
  if (r.remaining() > kMaxSecretKeyLength) return ParseError::bad_value;
  (void)r.read_bytes(r.remaining(), k.secret_key);
  return k;
}

Parsed<ParameterStatus> parse_parameter_status(std::string_view body) {
  ByteReader r(body);
  ParameterStatus p;
  if (!r.read_cstring(p.name)) return cstring_error(r);
  if (!r.read_cstring(p.value)) return cstring_error(r);
  if (auto e = finish(r); e != ParseError::ok) return e;
  return p;
}

Parsed<ReadyForQuery> parse_ready_for_query(std::string_view body) {
  ByteReader r(body);
  uint8_t status = 0;
  if (!r.read_u8(status)) return ParseError::truncated;
  if (status != 'I' && status != 'T' && status != 'E') return ParseError::bad_value;
  if (auto e = finish(r); e != ParseError::ok) return e;
  return ReadyForQuery{static_cast<char>(status)};
}

Parsed<ErrorFields> parse_error_fields(std::string_view body) {
  ByteReader r(body);
  ErrorFields f;
  for (;;) {
    uint8_t type = 0;
    // The field list ends with a zero type byte; a body that stops before it lacks it.
    if (!r.read_u8(type)) return ParseError::missing_terminator;
    if (type == 0) break;
    std::string_view value;
    if (!r.read_cstring(value)) return cstring_error(r);
    const char t = static_cast<char>(type);
    f.fields.emplace_back(t, value);
    // Unknown field types are kept but not picked out: the documentation says clients must
    // ignore types they do not recognize, since more may be added.
    switch (t) {
      case 'S':
        f.severity = value;
        break;
      case 'V':
        f.severity_nonlocalized = value;
        break;
      case 'C':
        f.code = value;
        break;
      case 'M':
        f.message = value;
        break;
      case 'D':
        f.detail = value;
        break;
      case 'H':
        f.hint = value;
        break;
      default:
        break;
    }
  }
  if (auto e = finish(r); e != ParseError::ok) return e;
  return f;
}

Parsed<CommandComplete> parse_command_complete(std::string_view body) {
  ByteReader r(body);
  CommandComplete c;
  if (!r.read_cstring(c.tag)) return cstring_error(r);
  if (auto e = finish(r); e != ParseError::ok) return e;
  return c;
}

Parsed<RowDescription> parse_row_description(std::string_view body) {
  ByteReader r(body);
  RowDescription d;
  int16_t count = 0;
  if (!r.read_i16(count)) return ParseError::truncated;
  if (count < 0) return ParseError::bad_value;
  // Each field is at least a NUL and 18 bytes of fixed-size parts.
  d.fields.reserve(bounded_reserve(count, r.remaining(), 19));
  for (int i = 0; i < count; ++i) {
    FieldDescription fd;
    if (!r.read_cstring(fd.name)) return cstring_error(r);
    if (!r.read_u32(fd.table_oid) || !r.read_i16(fd.column_number) || !r.read_u32(fd.type_oid) ||
        !r.read_i16(fd.type_size) || !r.read_i32(fd.type_modifier) || !r.read_i16(fd.format)) {
      return ParseError::truncated;
    }
    d.fields.push_back(fd);
  }
  if (auto e = finish(r); e != ParseError::ok) return e;
  return d;
}

Parsed<DataRow> parse_data_row(std::string_view body) {
  ByteReader r(body);
  DataRow row;
  int16_t count = 0;
  if (!r.read_i16(count)) return ParseError::truncated;
  if (count < 0) return ParseError::bad_value;
  row.values.reserve(bounded_reserve(count, r.remaining(), 4));
  for (int i = 0; i < count; ++i) {
    int32_t length = 0;
    if (!r.read_i32(length)) return ParseError::truncated;
    if (length == -1) {  // SQL NULL: no value bytes follow
      row.values.emplace_back(std::nullopt);
      continue;
    }
    if (length < -1) return ParseError::bad_value;
    std::string_view value;
    if (!r.read_bytes(static_cast<size_t>(length), value)) return ParseError::truncated;
    row.values.emplace_back(value);
  }
  if (auto e = finish(r); e != ParseError::ok) return e;
  return row;
}

Parsed<ParameterDescription> parse_parameter_description(std::string_view body) {
  ByteReader r(body);
  ParameterDescription d;
  int16_t count = 0;
  if (!r.read_i16(count)) return ParseError::truncated;
  if (count < 0) return ParseError::bad_value;
  d.types.reserve(bounded_reserve(count, r.remaining(), 4));
  for (int i = 0; i < count; ++i) {
    uint32_t oid = 0;
    if (!r.read_u32(oid)) return ParseError::truncated;
    d.types.push_back(oid);
  }
  if (auto e = finish(r); e != ParseError::ok) return e;
  return d;
}

Parsed<CopyResponse> parse_copy_response(std::string_view body) {
  ByteReader r(body);
  CopyResponse c;
  uint8_t format = 0;
  if (!r.read_u8(format)) return ParseError::truncated;
  if (format > 1) return ParseError::bad_value;
  c.format = static_cast<int8_t>(format);
  int16_t count = 0;
  if (!r.read_i16(count)) return ParseError::truncated;
  if (count < 0) return ParseError::bad_value;
  c.column_formats.reserve(bounded_reserve(count, r.remaining(), 2));
  for (int i = 0; i < count; ++i) {
    int16_t column_format = 0;
    if (!r.read_i16(column_format)) return ParseError::truncated;
    if (column_format != 0 && column_format != 1) return ParseError::bad_value;
    c.column_formats.push_back(column_format);
  }
  if (auto e = finish(r); e != ParseError::ok) return e;
  return c;
}

Parsed<NotificationResponse> parse_notification_response(std::string_view body) {
  ByteReader r(body);
  NotificationResponse n;
  if (!r.read_i32(n.process_id)) return ParseError::truncated;
  if (!r.read_cstring(n.channel)) return cstring_error(r);
  if (!r.read_cstring(n.payload)) return cstring_error(r);
  if (auto e = finish(r); e != ParseError::ok) return e;
  return n;
}

Parsed<NegotiateProtocolVersion> parse_negotiate_protocol_version(std::string_view body) {
  ByteReader r(body);
  NegotiateProtocolVersion v;
  int32_t count = 0;
  if (!r.read_i32(v.newest_version) || !r.read_i32(count)) return ParseError::truncated;
  if (v.newest_version < 0 || count < 0) return ParseError::bad_value;
  v.unrecognized_options.reserve(bounded_reserve(count, r.remaining(), 1));
  for (int32_t i = 0; i < count; ++i) {
    std::string_view option;
    if (!r.read_cstring(option)) return cstring_error(r);
    v.unrecognized_options.push_back(option);
  }
  if (auto e = finish(r); e != ParseError::ok) return e;
  return v;
}

}  // namespace pgsluice::protocol
