// Backend message parser tests: every message from hand-written bytes (following the message
// format documentation, with values as PostgreSQL sends them), then malformed bodies.
#include "pgsluice/protocol/backend.h"

#include <gtest/gtest.h>

#include <string>

#include "framed_body.h"
#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/frontend.h"

namespace pgsluice::protocol {
namespace {

using namespace std::string_literals;

// --- Authentication ---

TEST(Authentication, Ok) {
  const std::string wire = "R\0\0\0\x08\0\0\0\0"s;
  Parsed<Authentication> a = parse_authentication(body_of(wire, 'R'));
  ASSERT_TRUE(a.ok()) << to_string(a.error);
  EXPECT_EQ(a.value.code, AuthCode::ok);
}

TEST(Authentication, CleartextPassword) {
  const std::string wire = "R\0\0\0\x08\0\0\0\x03"s;
  Parsed<Authentication> a = parse_authentication(body_of(wire, 'R'));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value.code, AuthCode::cleartext_password);
}

TEST(Authentication, Md5PasswordWithSalt) {
  const std::string wire = "R\0\0\0\x0c\0\0\0\x05\x9a\x1b\x2c\x3d"s;
  Parsed<Authentication> a = parse_authentication(body_of(wire, 'R'));
  ASSERT_TRUE(a.ok()) << to_string(a.error);
  EXPECT_EQ(a.value.code, AuthCode::md5_password);
  EXPECT_EQ(a.value.md5_salt, (std::array<uint8_t, 4>{0x9a, 0x1b, 0x2c, 0x3d}));
}

TEST(Authentication, SaslMechanisms) {
  const std::string wire =
      "R\0\0\0\x2a\0\0\0\x0a"
      "SCRAM-SHA-256-PLUS\0"
      "SCRAM-SHA-256\0"
      "\0"s;
  Parsed<Authentication> a = parse_authentication(body_of(wire, 'R'));
  ASSERT_TRUE(a.ok()) << to_string(a.error);
  EXPECT_EQ(a.value.code, AuthCode::sasl);
  ASSERT_EQ(a.value.mechanisms.size(), 2u);
  EXPECT_EQ(a.value.mechanisms[0], "SCRAM-SHA-256-PLUS");
  EXPECT_EQ(a.value.mechanisms[1], "SCRAM-SHA-256");
}

TEST(Authentication, SaslContinue) {
  const std::string wire =
      "R\0\0\0\x42\0\0\0\x0b"
      "r=rOprNGfwEbeRWgbNEkqOhh,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"s;
  Parsed<Authentication> a = parse_authentication(body_of(wire, 'R'));
  ASSERT_TRUE(a.ok()) << to_string(a.error);
  EXPECT_EQ(a.value.code, AuthCode::sasl_continue);
  EXPECT_EQ(a.value.data, "r=rOprNGfwEbeRWgbNEkqOhh,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
}

TEST(Authentication, SaslFinal) {
  const std::string wire =
      "R\0\0\0\x36\0\0\0\x0c"
      "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="s;
  Parsed<Authentication> a = parse_authentication(body_of(wire, 'R'));
  ASSERT_TRUE(a.ok()) << to_string(a.error);
  EXPECT_EQ(a.value.code, AuthCode::sasl_final);
  EXPECT_EQ(a.value.data, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
}

TEST(Authentication, CodesWithoutData) {
  const std::string kerberos = "R\0\0\0\x08\0\0\0\x02"s;
  const std::string gss = "R\0\0\0\x08\0\0\0\x07"s;
  const std::string sspi = "R\0\0\0\x08\0\0\0\x09"s;
  EXPECT_EQ(parse_authentication(body_of(kerberos, 'R')).value.code, AuthCode::kerberos_v5);
  EXPECT_EQ(parse_authentication(body_of(gss, 'R')).value.code, AuthCode::gss);
  EXPECT_EQ(parse_authentication(body_of(sspi, 'R')).value.code, AuthCode::sspi);
}

TEST(Authentication, GssContinueCarriesData) {
  const std::string wire = "R\0\0\0\x0b\0\0\0\x08\x60\x82\x01"s;
  Parsed<Authentication> a = parse_authentication(body_of(wire, 'R'));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value.code, AuthCode::gss_continue);
  EXPECT_EQ(a.value.data, "\x60\x82\x01"s);
}

TEST(Authentication, SaslContinueMayBeEmpty) {
  const std::string wire = "R\0\0\0\x08\0\0\0\x0b"s;
  Parsed<Authentication> a = parse_authentication(body_of(wire, 'R'));
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a.value.data.empty());
}

// --- BackendKeyData ---

TEST(BackendKeyData, Protocol30) {
  const std::string wire = "K\0\0\0\x0c\0\0\x30\x39\xde\xad\xbe\xef"s;
  Parsed<BackendKeyData> k = parse_backend_key_data(body_of(wire, 'K'));
  ASSERT_TRUE(k.ok()) << to_string(k.error);
  EXPECT_EQ(k.value.process_id, 12345);
  EXPECT_EQ(k.value.secret_key, "\xde\xad\xbe\xef"s);
}

TEST(BackendKeyData, Protocol32ThirtyTwoByteKey) {
  const std::string key(32, '\xa5');
  const std::string wire = "K\0\0\0\x28\0\0\x30\x39"s + key;
  Parsed<BackendKeyData> k = parse_backend_key_data(body_of(wire, 'K'));
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k.value.secret_key, key);
}

TEST(BackendKeyData, Protocol32MaximumKey) {
  const std::string wire = "K\0\0\x01\x08\0\0\x30\x39"s + std::string(256, 'k');
  Parsed<BackendKeyData> k = parse_backend_key_data(body_of(wire, 'K'));
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k.value.secret_key.size(), 256u);
}

// --- ParameterStatus, ReadyForQuery, CommandComplete ---

TEST(ParameterStatus, Parses) {
  const std::string wire =
      "S\0\0\0\x19"
      "client_encoding\0UTF8\0"s;
  Parsed<ParameterStatus> p = parse_parameter_status(body_of(wire, 'S'));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.name, "client_encoding");
  EXPECT_EQ(p.value.value, "UTF8");
}

TEST(ParameterStatus, EmptyValue) {
  const std::string wire =
      "S\0\0\0\x16"
      "application_name\0\0"s;
  Parsed<ParameterStatus> p = parse_parameter_status(body_of(wire, 'S'));
  ASSERT_TRUE(p.ok()) << to_string(p.error);
  EXPECT_EQ(p.value.name, "application_name");
  EXPECT_EQ(p.value.value, "");
}

class ReadyForQueryStatus : public ::testing::TestWithParam<char> {};

TEST_P(ReadyForQueryStatus, Parses) {
  const std::string wire = "Z\0\0\0\x05"s + GetParam();
  Parsed<ReadyForQuery> z = parse_ready_for_query(body_of(wire, 'Z'));
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z.value.status, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Statuses, ReadyForQueryStatus, ::testing::Values('I', 'T', 'E'));

TEST(CommandComplete, Tags) {
  const std::string select = "C\0\0\0\x0dSELECT 3\0"s;
  const std::string insert = "C\0\0\0\x0fINSERT 0 1\0"s;
  const std::string begin =
      "C\0\0\0\x0a"
      "BEGIN\0"s;
  EXPECT_EQ(parse_command_complete(body_of(select, 'C')).value.tag, "SELECT 3");
  EXPECT_EQ(parse_command_complete(body_of(insert, 'C')).value.tag, "INSERT 0 1");
  EXPECT_EQ(parse_command_complete(body_of(begin, 'C')).value.tag, "BEGIN");
}

// --- ErrorResponse, NoticeResponse ---

// What PostgreSQL 16 sends for SELECT * FROM nope.
const std::string kErrorResponse =
    "E\0\0\0\x67"
    "SERROR\0"
    "VERROR\0"
    "C42P01\0"
    "Mrelation \"nope\" does not exist\0"
    "P15\0"
    "Fparse_relation.c\0"
    "L1392\0"
    "RparserOpenTable\0"
    "\0"s;

TEST(ErrorResponse, PicksOutTheCommonFields) {
  Parsed<ErrorFields> e = parse_error_fields(body_of(kErrorResponse, 'E'));
  ASSERT_TRUE(e.ok()) << to_string(e.error);
  EXPECT_EQ(e.value.severity, "ERROR");
  EXPECT_EQ(e.value.severity_nonlocalized, "ERROR");
  EXPECT_EQ(e.value.code, "42P01");
  EXPECT_EQ(e.value.message, "relation \"nope\" does not exist");
  EXPECT_EQ(e.value.detail, "");
  EXPECT_EQ(e.value.hint, "");
}

TEST(ErrorResponse, KeepsEveryFieldInOrder) {
  Parsed<ErrorFields> e = parse_error_fields(body_of(kErrorResponse, 'E'));
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(e.value.fields.size(), 8u);
  std::string types;
  for (const auto& [t, v] : e.value.fields) types.push_back(t);
  EXPECT_EQ(types, "SVCMPFLR");
  EXPECT_EQ(e.value.field('P'), "15");
  EXPECT_EQ(e.value.field('F'), "parse_relation.c");
  EXPECT_EQ(e.value.field('R'), "parserOpenTable");
  EXPECT_EQ(e.value.field('W'), "");
}

TEST(ErrorResponse, DetailHintAndUnknownFields) {
  const std::string wire =
      "E\0\0\0\x38"
      "SFATAL\0"
      "C28P01\0"
      "Mbad\0"
      "Dsome detail\0"
      "Hsome hint\0"
      "Zfuture\0"
      "\0"s;
  Parsed<ErrorFields> e = parse_error_fields(body_of(wire, 'E'));
  ASSERT_TRUE(e.ok()) << to_string(e.error);
  EXPECT_EQ(e.value.severity, "FATAL");
  EXPECT_EQ(e.value.severity_nonlocalized, "");
  EXPECT_EQ(e.value.detail, "some detail");
  EXPECT_EQ(e.value.hint, "some hint");
  EXPECT_EQ(e.value.field('Z'), "future");
}

TEST(ErrorResponse, NoFieldsJustTheTerminator) {
  const std::string wire = "E\0\0\0\x05\0"s;
  Parsed<ErrorFields> e = parse_error_fields(body_of(wire, 'E'));
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e.value.fields.empty());
}

TEST(NoticeResponse, SameLayout) {
  const std::string wire =
      "N\0\0\0\x40"
      "SNOTICE\0"
      "VNOTICE\0"
      "C00000\0"
      "Mtable \"t\" does not exist, skipping\0"
      "\0"s;
  Parsed<ErrorFields> n = parse_error_fields(body_of(wire, 'N'));
  ASSERT_TRUE(n.ok()) << to_string(n.error);
  EXPECT_EQ(n.value.severity, "NOTICE");
  EXPECT_EQ(n.value.code, "00000");
  EXPECT_EQ(n.value.message, "table \"t\" does not exist, skipping");
}

// --- RowDescription, DataRow, ParameterDescription ---

TEST(RowDescription, TwoColumns) {
  // SELECT id, name FROM users: id int4 (table 16384, column 1), name text (column 2).
  const std::string wire =
      "T\0\0\0\x32"
      "\0\x02"
      "id\0"
      "\0\0\x40\0"
      "\0\x01"
      "\0\0\0\x17"
      "\0\x04"
      "\xff\xff\xff\xff"
      "\0\0"
      "name\0"
      "\0\0\x40\0"
      "\0\x02"
      "\0\0\0\x19"
      "\xff\xff"
      "\xff\xff\xff\xff"
      "\0\0"s;
  Parsed<RowDescription> t = parse_row_description(body_of(wire, 'T'));
  ASSERT_TRUE(t.ok()) << to_string(t.error);
  ASSERT_EQ(t.value.fields.size(), 2u);
  const FieldDescription& id = t.value.fields[0];
  EXPECT_EQ(id.name, "id");
  EXPECT_EQ(id.table_oid, 16384u);
  EXPECT_EQ(id.column_number, 1);
  EXPECT_EQ(id.type_oid, 23u);
  EXPECT_EQ(id.type_size, 4);
  EXPECT_EQ(id.type_modifier, -1);
  EXPECT_EQ(id.format, 0);
  const FieldDescription& name = t.value.fields[1];
  EXPECT_EQ(name.name, "name");
  EXPECT_EQ(name.column_number, 2);
  EXPECT_EQ(name.type_oid, 25u);
  EXPECT_EQ(name.type_size, -1);
}

TEST(RowDescription, NoColumns) {
  const std::string wire = "T\0\0\0\x06\0\0"s;
  Parsed<RowDescription> t = parse_row_description(body_of(wire, 'T'));
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t.value.fields.empty());
}

TEST(RowDescription, BinaryFormatColumn) {
  const std::string wire =
      "T\0\0\0\x1a\0\x01x\0\0\0\0\0\0\0\0\0\0\x14\0\x08\xff\xff\xff\xff\0\x01"s;
  Parsed<RowDescription> t = parse_row_description(body_of(wire, 'T'));
  ASSERT_TRUE(t.ok()) << to_string(t.error);
  EXPECT_EQ(t.value.fields[0].type_oid, 20u);
  EXPECT_EQ(t.value.fields[0].type_size, 8);
  EXPECT_EQ(t.value.fields[0].format, 1);
}

TEST(DataRow, ValuesNullAndEmpty) {
  const std::string wire =
      "D\0\0\0\x13"
      "\0\x03"
      "\0\0\0\x01"
      "1"
      "\xff\xff\xff\xff"
      "\0\0\0\0"s;
  Parsed<DataRow> d = parse_data_row(body_of(wire, 'D'));
  ASSERT_TRUE(d.ok()) << to_string(d.error);
  ASSERT_EQ(d.value.values.size(), 3u);
  EXPECT_EQ(d.value.values[0], std::optional<std::string_view>("1"));
  EXPECT_EQ(d.value.values[1], std::nullopt);
  EXPECT_EQ(d.value.values[2], std::optional<std::string_view>(""));
}

TEST(DataRow, NoColumns) {
  const std::string wire = "D\0\0\0\x06\0\0"s;
  Parsed<DataRow> d = parse_data_row(body_of(wire, 'D'));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d.value.values.empty());
}

TEST(DataRow, ValueContainingNulBytes) {
  const std::string wire = "D\0\0\0\x0d\0\x01\0\0\0\x03\0\x01\0"s;
  Parsed<DataRow> d = parse_data_row(body_of(wire, 'D'));
  ASSERT_TRUE(d.ok()) << to_string(d.error);
  EXPECT_EQ(d.value.values[0], std::optional<std::string_view>("\0\x01\0"s));
}

TEST(ParameterDescription, TwoTypes) {
  const std::string wire = "t\0\0\0\x0e\0\x02\0\0\0\x17\0\0\0\x19"s;
  Parsed<ParameterDescription> p = parse_parameter_description(body_of(wire, 't'));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.types, (std::vector<uint32_t>{23, 25}));
}

TEST(ParameterDescription, NoParameters) {
  const std::string wire = "t\0\0\0\x06\0\0"s;
  Parsed<ParameterDescription> p = parse_parameter_description(body_of(wire, 't'));
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.value.types.empty());
}

// --- COPY ---

TEST(CopyResponse, CopyInText) {
  const std::string wire = "G\0\0\0\x0b\0\0\x02\0\0\0\0"s;
  Parsed<CopyResponse> c = parse_copy_response(body_of(wire, 'G'));
  ASSERT_TRUE(c.ok()) << to_string(c.error);
  EXPECT_EQ(c.value.format, 0);
  EXPECT_EQ(c.value.column_formats, (std::vector<int16_t>{0, 0}));
}

TEST(CopyResponse, CopyOutBinary) {
  const std::string wire = "H\0\0\0\x0b\x01\0\x02\0\x01\0\x01"s;
  Parsed<CopyResponse> c = parse_copy_response(body_of(wire, 'H'));
  ASSERT_TRUE(c.ok()) << to_string(c.error);
  EXPECT_EQ(c.value.format, 1);
  EXPECT_EQ(c.value.column_formats, (std::vector<int16_t>{1, 1}));
}

TEST(CopyResponse, CopyBothNoColumns) {
  const std::string wire = "W\0\0\0\x07\0\0\0"s;
  Parsed<CopyResponse> c = parse_copy_response(body_of(wire, 'W'));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c.value.column_formats.empty());
}

// --- NotificationResponse, NegotiateProtocolVersion ---

TEST(NotificationResponse, Parses) {
  const std::string wire =
      "A\0\0\0\x10\0\0\x30\x39jobs\0"
      "42\0"s;
  Parsed<NotificationResponse> n = parse_notification_response(body_of(wire, 'A'));
  ASSERT_TRUE(n.ok()) << to_string(n.error);
  EXPECT_EQ(n.value.process_id, 12345);
  EXPECT_EQ(n.value.channel, "jobs");
  EXPECT_EQ(n.value.payload, "42");
}

TEST(NotificationResponse, EmptyPayload) {
  const std::string wire = "A\0\0\0\x0e\0\0\x30\x39jobs\0\0"s;
  Parsed<NotificationResponse> n = parse_notification_response(body_of(wire, 'A'));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n.value.payload, "");
}

TEST(NegotiateProtocolVersion, WithUnrecognizedOption) {
  const std::string wire = "v\0\0\0\x15\0\x03\0\x02\0\0\0\x01_pq_.foo\0"s;
  Parsed<NegotiateProtocolVersion> v = parse_negotiate_protocol_version(body_of(wire, 'v'));
  ASSERT_TRUE(v.ok()) << to_string(v.error);
  EXPECT_EQ(v.value.newest_version, (3 << 16) | 2);
  ASSERT_EQ(v.value.unrecognized_options.size(), 1u);
  EXPECT_EQ(v.value.unrecognized_options[0], "_pq_.foo");
}

TEST(NegotiateProtocolVersion, PostgreSQL15sAnswerTo32) {
  // Captured from PostgreSQL 15 answering a 3.2 StartupMessage: 3.0, whole.
  const std::string wire = "v\0\0\0\x0c\0\x03\0\0\0\0\0\0"s;
  Parsed<NegotiateProtocolVersion> v = parse_negotiate_protocol_version(body_of(wire, 'v'));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value.newest_version, 196608);
  EXPECT_TRUE(v.value.unrecognized_options.empty());
}

// --- messages without a body ---

class EmptyBackendMessage : public ::testing::TestWithParam<char> {};

TEST_P(EmptyBackendMessage, HasNoBody) {
  const std::string wire = std::string(1, GetParam()) + "\0\0\0\x04"s;
  EXPECT_EQ(expect_empty_body(body_of(wire, GetParam())), ParseError::ok);
  const std::string with_byte = std::string(1, GetParam()) + "\0\0\0\x05x"s;
  EXPECT_EQ(expect_empty_body(body_of(with_byte, GetParam())), ParseError::trailing_bytes);
}

// ParseComplete, BindComplete, CloseComplete, NoData, EmptyQueryResponse, PortalSuspended,
// CopyDone.
INSTANTIATE_TEST_SUITE_P(Types, EmptyBackendMessage,
                         ::testing::Values('1', '2', '3', 'n', 'I', 's', 'c'));

// --- a whole server stream ---

TEST(ServerStream, EveryMessageParses) {
  // Startup reply, then a simple query's reply and an error with a failed transaction.
  const std::string stream =
      "R\0\0\0\x08\0\0\0\0"
      "S\0\0\0\x18server_version\0"
      "18.0\0"
      "K\0\0\0\x0c\0\0\x12\x34\xde\xad\xbe\xef"
      "Z\0\0\0\x05I"
      "T\0\0\0\x1a\0\x01n\0\0\0\0\0\0\0\0\0\0\x17\0\x04\xff\xff\xff\xff\0\0"
      "D\0\0\0\x0b\0\x01\0\0\0\x01"
      "1"
      "C\0\0\0\x0dSELECT 1\0"
      "Z\0\0\0\x05T"s +
      kErrorResponse +
      "Z\0\0\0\x05"
      "E"s;
  FrameReader reader;
  reader.append(stream);
  std::string types;
  for (;;) {
    FrameResult r = reader.next();
    if (r.status != FrameStatus::complete) {
      EXPECT_EQ(r.status, FrameStatus::need_more);
      break;
    }
    types.push_back(r.message.type);
    const std::string_view body = r.message.body;
    ParseError error = ParseError::unknown_type;
    switch (r.message.type) {
      case 'R':
        error = parse_authentication(body).error;
        break;
      case 'S':
        error = parse_parameter_status(body).error;
        break;
      case 'K':
        error = parse_backend_key_data(body).error;
        break;
      case 'Z':
        error = parse_ready_for_query(body).error;
        break;
      case 'T':
        error = parse_row_description(body).error;
        break;
      case 'D':
        error = parse_data_row(body).error;
        break;
      case 'C':
        error = parse_command_complete(body).error;
        break;
      case 'E':
        error = parse_error_fields(body).error;
        break;
      default:
        break;
    }
    EXPECT_EQ(error, ParseError::ok) << r.message.type;
  }
  EXPECT_EQ(types, "RSKZTDCZEZ");
}

// --- malformed bodies ---

using ErrorOf = ParseError (*)(std::string_view);

struct BackendErrorCase {
  std::string name;
  ErrorOf parse;
  std::string body;
  ParseError error;
};

ParseError auth_error(std::string_view b) {
  return parse_authentication(b).error;
}
ParseError key_error(std::string_view b) {
  return parse_backend_key_data(b).error;
}
ParseError status_error(std::string_view b) {
  return parse_parameter_status(b).error;
}
ParseError ready_error(std::string_view b) {
  return parse_ready_for_query(b).error;
}
ParseError fields_error(std::string_view b) {
  return parse_error_fields(b).error;
}
ParseError complete_error(std::string_view b) {
  return parse_command_complete(b).error;
}
ParseError row_desc_error(std::string_view b) {
  return parse_row_description(b).error;
}
ParseError data_row_error(std::string_view b) {
  return parse_data_row(b).error;
}
ParseError param_desc_error(std::string_view b) {
  return parse_parameter_description(b).error;
}
ParseError copy_error(std::string_view b) {
  return parse_copy_response(b).error;
}
ParseError notify_error(std::string_view b) {
  return parse_notification_response(b).error;
}
ParseError negotiate_error(std::string_view b) {
  return parse_negotiate_protocol_version(b).error;
}

class BackendErrors : public ::testing::TestWithParam<BackendErrorCase> {};

TEST_P(BackendErrors, Rejects) {
  // A copy with no spare capacity past its end, so that an over-read would be caught by ASan.
  const std::string body = GetParam().body;
  EXPECT_EQ(GetParam().parse(body), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, BackendErrors,
    ::testing::Values(
        BackendErrorCase{"AuthEmpty", auth_error, ""s, ParseError::truncated},
        BackendErrorCase{"AuthShortCode", auth_error, "\0\0\0"s, ParseError::truncated},
        BackendErrorCase{"AuthOkTrailing", auth_error, "\0\0\0\0\0"s, ParseError::trailing_bytes},
        BackendErrorCase{"AuthCleartextTrailing", auth_error, "\0\0\0\x03x"s,
                         ParseError::trailing_bytes},
        BackendErrorCase{"AuthGssTrailing", auth_error, "\0\0\0\x07x"s, ParseError::trailing_bytes},
        BackendErrorCase{"AuthMd5ShortSalt", auth_error, "\0\0\0\x05\x01\x02\x03"s,
                         ParseError::truncated},
        BackendErrorCase{"AuthMd5NoSalt", auth_error, "\0\0\0\x05"s, ParseError::truncated},
        BackendErrorCase{"AuthMd5LongSalt", auth_error, "\0\0\0\x05\x01\x02\x03\x04\x05"s,
                         ParseError::trailing_bytes},
        BackendErrorCase{"AuthSaslNoListTerminator", auth_error, "\0\0\0\x0aSCRAM-SHA-256\0"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"AuthSaslMechanismNoNul", auth_error, "\0\0\0\x0aSCRAM"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"AuthSaslEmptyList", auth_error, "\0\0\0\x0a"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"AuthSaslTrailing", auth_error, "\0\0\0\x0aSCRAM-SHA-256\0\0x"s,
                         ParseError::trailing_bytes},
        BackendErrorCase{"AuthScmCredential", auth_error, "\0\0\0\x06"s, ParseError::bad_value},
        BackendErrorCase{"AuthUnknownCode", auth_error, "\0\0\0\x63"s, ParseError::bad_value},
        BackendErrorCase{"AuthNegativeCode", auth_error, "\xff\xff\xff\xff"s,
                         ParseError::bad_value},
        BackendErrorCase{"KeyEmpty", key_error, ""s, ParseError::truncated},
        BackendErrorCase{"KeyNoSecret", key_error, "\0\0\x30\x39"s, ParseError::truncated},
        BackendErrorCase{"KeyThreeByteSecret", key_error, "\0\0\x30\x39\x01\x02\x03"s,
                         ParseError::truncated},
        BackendErrorCase{"Key257ByteSecret", key_error, "\0\0\x30\x39"s + std::string(257, 'k'),
                         ParseError::bad_value},
        BackendErrorCase{"StatusEmpty", status_error, ""s, ParseError::truncated},
        BackendErrorCase{"StatusNameNoNul", status_error, "TimeZone"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"StatusNoValue", status_error, "TimeZone\0"s, ParseError::truncated},
        BackendErrorCase{"StatusValueNoNul", status_error, "TimeZone\0UTC"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"StatusTrailing", status_error, "TimeZone\0UTC\0\0"s,
                         ParseError::trailing_bytes},
        BackendErrorCase{"ReadyEmpty", ready_error, ""s, ParseError::truncated},
        BackendErrorCase{"ReadyBadStatus", ready_error, "X"s, ParseError::bad_value},
        BackendErrorCase{"ReadyLowercase", ready_error, "i"s, ParseError::bad_value},
        BackendErrorCase{"ReadyTrailing", ready_error, "II"s, ParseError::trailing_bytes},
        BackendErrorCase{"FieldsEmpty", fields_error, ""s, ParseError::missing_terminator},
        BackendErrorCase{"FieldsNoTerminator", fields_error, "SERROR\0"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"FieldsValueNoNul", fields_error, "SERROR\0Mbroken"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"FieldsTypeWithoutValue", fields_error, "SERROR\0M"s,
                         ParseError::truncated},
        BackendErrorCase{"FieldsTrailing", fields_error, "SERROR\0\0x"s,
                         ParseError::trailing_bytes},
        BackendErrorCase{"CompleteEmpty", complete_error, ""s, ParseError::truncated},
        BackendErrorCase{"CompleteNoNul", complete_error, "SELECT 1"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"CompleteTrailing", complete_error, "SELECT 1\0\0"s,
                         ParseError::trailing_bytes},
        BackendErrorCase{"RowDescEmpty", row_desc_error, ""s, ParseError::truncated},
        BackendErrorCase{"RowDescNegativeCount", row_desc_error, "\xff\xff"s,
                         ParseError::bad_value},
        BackendErrorCase{"RowDescMissingField", row_desc_error, "\0\x01"s, ParseError::truncated},
        BackendErrorCase{"RowDescNameNoNul", row_desc_error, "\0\x01name"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"RowDescShortFixedPart", row_desc_error,
                         "\0\x01n\0\0\0\0\0\0\0\0\0\0\x17\0\x04\xff\xff\xff\xff\0"s,
                         ParseError::truncated},
        BackendErrorCase{"RowDescSecondFieldMissing", row_desc_error,
                         "\0\x02n\0\0\0\0\0\0\0\0\0\0\x17\0\x04\xff\xff\xff\xff\0\0"s,
                         ParseError::truncated},
        BackendErrorCase{"RowDescTrailing", row_desc_error, "\0\0\0"s, ParseError::trailing_bytes},
        BackendErrorCase{"DataRowEmpty", data_row_error, ""s, ParseError::truncated},
        BackendErrorCase{"DataRowNegativeCount", data_row_error, "\x80\0"s, ParseError::bad_value},
        BackendErrorCase{"DataRowLengthMinus2", data_row_error, "\0\x01\xff\xff\xff\xfe"s,
                         ParseError::bad_value},
        BackendErrorCase{"DataRowMinInt", data_row_error, "\0\x01\x80\0\0\0"s,
                         ParseError::bad_value},
        BackendErrorCase{"DataRowShortValue", data_row_error,
                         "\0\x01\0\0\0\x05"
                         "abc"s,
                         ParseError::truncated},
        BackendErrorCase{"DataRowMissingColumn", data_row_error, "\0\x02\0\0\0\x01x"s,
                         ParseError::truncated},
        BackendErrorCase{"DataRowShortLength", data_row_error, "\0\x01\0\0"s,
                         ParseError::truncated},
        BackendErrorCase{"DataRowTrailing", data_row_error, "\0\x01\0\0\0\x01xy"s,
                         ParseError::trailing_bytes},
        BackendErrorCase{"ParamDescEmpty", param_desc_error, ""s, ParseError::truncated},
        BackendErrorCase{"ParamDescNegativeCount", param_desc_error, "\xff\xff"s,
                         ParseError::bad_value},
        BackendErrorCase{"ParamDescMissingType", param_desc_error, "\0\x02\0\0\0\x17"s,
                         ParseError::truncated},
        BackendErrorCase{"ParamDescTrailing", param_desc_error, "\0\x01\0\0\0\x17\0"s,
                         ParseError::trailing_bytes},
        BackendErrorCase{"CopyEmpty", copy_error, ""s, ParseError::truncated},
        BackendErrorCase{"CopyBadFormat", copy_error, "\x02\0\0"s, ParseError::bad_value},
        BackendErrorCase{"CopyNoCount", copy_error, "\0"s, ParseError::truncated},
        BackendErrorCase{"CopyNegativeCount", copy_error, "\0\xff\xff"s, ParseError::bad_value},
        BackendErrorCase{"CopyBadColumnFormat", copy_error, "\0\0\x01\0\x02"s,
                         ParseError::bad_value},
        BackendErrorCase{"CopyNegativeColumnFormat", copy_error, "\x01\0\x01\xff\xff"s,
                         ParseError::bad_value},
        BackendErrorCase{"CopyMissingColumnFormat", copy_error, "\0\0\x02\0\0"s,
                         ParseError::truncated},
        BackendErrorCase{"CopyTrailing", copy_error, "\0\0\0\0"s, ParseError::trailing_bytes},
        BackendErrorCase{"NotifyEmpty", notify_error, ""s, ParseError::truncated},
        BackendErrorCase{"NotifyNoChannel", notify_error, "\0\0\x30\x39"s, ParseError::truncated},
        BackendErrorCase{"NotifyChannelNoNul", notify_error, "\0\0\x30\x39jobs"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"NotifyNoPayload", notify_error, "\0\0\x30\x39jobs\0"s,
                         ParseError::truncated},
        BackendErrorCase{"NotifyTrailing", notify_error, "\0\0\x30\x39jobs\0\0\0"s,
                         ParseError::trailing_bytes},
        BackendErrorCase{"NegotiateEmpty", negotiate_error, ""s, ParseError::truncated},
        BackendErrorCase{"NegotiateNoCount", negotiate_error, "\0\0\0\x02"s, ParseError::truncated},
        BackendErrorCase{"NegotiateNegativeCount", negotiate_error, "\0\0\0\x02\xff\xff\xff\xff"s,
                         ParseError::bad_value},
        BackendErrorCase{"NegotiateNegativeMinor", negotiate_error, "\xff\xff\xff\xff\0\0\0\0"s,
                         ParseError::bad_value},
        BackendErrorCase{"NegotiateMissingOption", negotiate_error, "\0\0\0\x02\0\0\0\x02_pq_.a\0"s,
                         ParseError::truncated},
        BackendErrorCase{"NegotiateHugeCount", negotiate_error, "\0\0\0\x02\x7f\xff\xff\xff"s,
                         ParseError::truncated},
        BackendErrorCase{"NegotiateOptionNoNul", negotiate_error, "\0\0\0\x02\0\0\0\x01_pq_.a"s,
                         ParseError::missing_terminator},
        BackendErrorCase{"NegotiateTrailing", negotiate_error, "\0\0\0\x02\0\0\0\0x"s,
                         ParseError::trailing_bytes}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pgsluice::protocol
