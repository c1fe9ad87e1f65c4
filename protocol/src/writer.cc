// Builders for the messages the pooler writes itself, to clients (as a server) and to servers
// (as a client). Every function appends one complete message.
#include "pgsluice/protocol/writer.h"

#include "pgsluice/protocol/bytes.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/startup.h"

namespace pgsluice::protocol {

namespace {

// The authentication request codes are Int32 on the wire.
void write_auth(std::string& out, AuthCode code, std::string_view data = {}) {
  MessageWriter(out, backend::kAuthentication).i32(static_cast<int32_t>(code)).bytes(data).end();
}

void write_empty(std::string& out, char type) {
  MessageWriter(out, type).end();
}

void write_error_fields(std::string& out, char type, const ErrorNotice& e) {
  MessageWriter w(out, type);
  // V (the non-localized severity) exists since 9.6; the pooler never localizes, so both carry
  // the same word.
  w.i8('S').cstring(e.severity);
  w.i8('V').cstring(e.severity);
  w.i8('C').cstring(e.code);
  w.i8('M').cstring(e.message);
  if (!e.detail.empty()) w.i8('D').cstring(e.detail);
  if (!e.hint.empty()) w.i8('H').cstring(e.hint);
  w.i8(0);
  w.end();
}

// The typlen PostgreSQL reports for the console's column types; -1 means variable length.
int16_t type_size_of(uint32_t oid) {
  switch (oid) {
    case kOidInt4:
      return 4;
    case kOidInt8:
    case kOidTimestampTz:
      return 8;
    default:
      return -1;
  }
}

}  // namespace

MessageWriter::MessageWriter(std::string& out, char type) : out_(out) {
  if (type != 0) out_.push_back(type);
  length_pos_ = out_.size();
  put_u32(out_, 0);  // patched by end()
}

MessageWriter::~MessageWriter() {
  if (!ended_) end();
}

MessageWriter& MessageWriter::i8(uint8_t v) {
  put_u8(out_, v);
  return *this;
}

MessageWriter& MessageWriter::i16(int16_t v) {
  put_i16(out_, v);
  return *this;
}

MessageWriter& MessageWriter::i32(int32_t v) {
  put_i32(out_, v);
  return *this;
}

MessageWriter& MessageWriter::u32(uint32_t v) {
  put_u32(out_, v);
  return *this;
}

MessageWriter& MessageWriter::cstring(std::string_view s) {
  put_cstring(out_, s);
  return *this;
}

MessageWriter& MessageWriter::bytes(std::string_view s) {
  put_bytes(out_, s);
  return *this;
}

void MessageWriter::end() {
  if (ended_) return;
  // The length word counts itself and the body, not the type byte.
  store_u32(out_.data() + length_pos_, static_cast<uint32_t>(out_.size() - length_pos_));
  ended_ = true;
}

// --- backend messages ---

void write_error_response(std::string& out, const ErrorNotice& error) {
  write_error_fields(out, backend::kErrorResponse, error);
}

void write_notice_response(std::string& out, const ErrorNotice& notice) {
  write_error_fields(out, backend::kNoticeResponse, notice);
}

void write_ready_for_query(std::string& out, char status) {
  MessageWriter(out, backend::kReadyForQuery).i8(static_cast<uint8_t>(status)).end();
}

void write_authentication_ok(std::string& out) {
  write_auth(out, AuthCode::ok);
}

void write_authentication_cleartext_password(std::string& out) {
  write_auth(out, AuthCode::cleartext_password);
}

void write_authentication_md5_password(std::string& out, std::array<uint8_t, 4> salt) {
  write_auth(out, AuthCode::md5_password,
             std::string_view(reinterpret_cast<const char*>(salt.data()), salt.size()));
}

void write_authentication_sasl(std::string& out, std::span<const std::string_view> mechanisms) {
  MessageWriter w(out, backend::kAuthentication);
  w.i32(static_cast<int32_t>(AuthCode::sasl));
  for (std::string_view m : mechanisms) w.cstring(m);
  w.i8(0);  // the empty string that ends the list
  w.end();
}

void write_authentication_sasl_continue(std::string& out, std::string_view data) {
  write_auth(out, AuthCode::sasl_continue, data);
}

void write_authentication_sasl_final(std::string& out, std::string_view data) {
  write_auth(out, AuthCode::sasl_final, data);
}

void write_parameter_status(std::string& out, std::string_view name, std::string_view value) {
  MessageWriter(out, backend::kParameterStatus).cstring(name).cstring(value).end();
}

void write_backend_key_data(std::string& out, int32_t process_id, std::string_view secret_key) {
  MessageWriter(out, backend::kBackendKeyData).i32(process_id).bytes(secret_key).end();
}

void write_negotiate_protocol_version(std::string& out, int32_t newest_version,
                                      std::span<const std::string_view> unrecognized_options) {
  MessageWriter w(out, backend::kNegotiateProtocolVersion);
  w.i32(newest_version).i32(static_cast<int32_t>(unrecognized_options.size()));
  for (std::string_view option : unrecognized_options) w.cstring(option);
  w.end();
}

void write_parse_complete(std::string& out) {
  write_empty(out, backend::kParseComplete);
}
void write_bind_complete(std::string& out) {
  write_empty(out, backend::kBindComplete);
}
void write_close_complete(std::string& out) {
  write_empty(out, backend::kCloseComplete);
}
void write_no_data(std::string& out) {
  write_empty(out, backend::kNoData);
}
void write_empty_query_response(std::string& out) {
  write_empty(out, backend::kEmptyQueryResponse);
}

void write_command_complete(std::string& out, std::string_view tag) {
  MessageWriter(out, backend::kCommandComplete).cstring(tag).end();
}

void write_row_description(std::string& out, std::span<const FieldDescription> fields) {
  MessageWriter w(out, backend::kRowDescription);
  w.i16(static_cast<int16_t>(fields.size()));
  for (const FieldDescription& f : fields) {
    w.cstring(f.name)
        .u32(f.table_oid)
        .i16(f.column_number)
        .u32(f.type_oid)
        .i16(f.type_size)
        .i32(f.type_modifier)
        .i16(f.format);
  }
  w.end();
}

void write_text_row_description(std::string& out, std::span<const std::string_view> names,
                                std::span<const uint32_t> type_oids) {
  MessageWriter w(out, backend::kRowDescription);
  w.i16(static_cast<int16_t>(names.size()));
  for (size_t i = 0; i < names.size(); ++i) {
    // A column without a listed type is text: the console renders every value as text anyway.
    const uint32_t oid = i < type_oids.size() ? type_oids[i] : kOidText;
    w.cstring(names[i])
        .u32(0)  // not a table column
        .i16(0)  // no column number
        .u32(oid)
        .i16(type_size_of(oid))
        .i32(-1)  // no type modifier
        .i16(0);  // text format
  }
  w.end();
}

void write_data_row(std::string& out, std::span<const std::optional<std::string_view>> values) {
  MessageWriter w(out, backend::kDataRow);
  w.i16(static_cast<int16_t>(values.size()));
  for (const auto& v : values) {
    if (!v) {
      w.i32(-1);  // SQL NULL
      continue;
    }
    w.i32(static_cast<int32_t>(v->size())).bytes(*v);
  }
  w.end();
}

// --- frontend messages ---

void write_startup_message(std::string& out, int32_t version,
                           std::span<const std::pair<std::string_view, std::string_view>> params) {
  MessageWriter w(out, 0);
  w.i32(version);
  for (const auto& [name, value] : params) w.cstring(name).cstring(value);
  w.i8(0);  // the terminator after the last name/value pair
  w.end();
}

void write_ssl_request(std::string& out) {
  MessageWriter(out, 0).i32(kSSLRequestCode).end();
}

void write_cancel_request(std::string& out, int32_t process_id, std::string_view secret_key) {
  MessageWriter(out, 0).i32(kCancelRequestCode).i32(process_id).bytes(secret_key).end();
}

void write_password_message(std::string& out, std::string_view password) {
  MessageWriter(out, frontend::kPasswordMessage).cstring(password).end();
}

void write_sasl_initial_response(std::string& out, std::string_view mechanism,
                                 std::string_view data) {
  MessageWriter(out, frontend::kPasswordMessage)
      .cstring(mechanism)
      .i32(static_cast<int32_t>(data.size()))
      .bytes(data)
      .end();
}

void write_sasl_response(std::string& out, std::string_view data) {
  MessageWriter(out, frontend::kPasswordMessage).bytes(data).end();
}

void write_query(std::string& out, std::string_view sql) {
  MessageWriter(out, frontend::kQuery).cstring(sql).end();
}

void write_parse(std::string& out, std::string_view statement, std::string_view query,
                 std::span<const uint32_t> parameter_types) {
  MessageWriter w(out, frontend::kParse);
  w.cstring(statement).cstring(query).i16(static_cast<int16_t>(parameter_types.size()));
  for (uint32_t oid : parameter_types) w.u32(oid);
  w.end();
}

void write_bind_renamed(std::string& out, std::string_view portal, std::string_view statement,
                        std::string_view after_statement) {
  MessageWriter(out, frontend::kBind)
      .cstring(portal)
      .cstring(statement)
      .bytes(after_statement)
      .end();
}

void write_describe(std::string& out, char kind, std::string_view name) {
  MessageWriter(out, frontend::kDescribe).i8(static_cast<uint8_t>(kind)).cstring(name).end();
}

void write_execute(std::string& out, std::string_view portal, int32_t max_rows) {
  MessageWriter(out, frontend::kExecute).cstring(portal).i32(max_rows).end();
}

void write_close(std::string& out, char kind, std::string_view name) {
  MessageWriter(out, frontend::kClose).i8(static_cast<uint8_t>(kind)).cstring(name).end();
}

void write_sync(std::string& out) {
  write_empty(out, frontend::kSync);
}
void write_flush(std::string& out) {
  write_empty(out, frontend::kFlush);
}
void write_terminate(std::string& out) {
  write_empty(out, frontend::kTerminate);
}

}  // namespace pgsluice::protocol
