// Message builder tests: the exact bytes of each message (written by hand from the message format
// documentation) and build → frame → parse round trips through the library's own parsers.
#include "pgsluice/protocol/writer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/startup.h"

namespace pgsluice::protocol {
namespace {

using namespace std::string_literals;

// The one complete message in `out`: checks that the length word covers exactly what was written.
Message only_message(const std::string& out, FramePhase phase = FramePhase::regular) {
  FrameResult r = next_message(out, phase, kDefaultMaxMessageLength);
  EXPECT_EQ(r.status, FrameStatus::complete) << to_string(r.error);
  EXPECT_EQ(r.message.wire.size(), out.size());
  return r.message;
}

// --- MessageWriter ---

TEST(MessageWriter, PatchesTheLengthAtEnd) {
  std::string out;
  MessageWriter w(out, 'Q');
  w.cstring("SELECT 1");
  EXPECT_EQ(out, "Q\0\0\0\0SELECT 1\0"s);  // placeholder until end()
  w.end();
  EXPECT_EQ(out, "Q\0\0\0\x0dSELECT 1\0"s);
}

TEST(MessageWriter, EveryFieldType) {
  std::string out;
  MessageWriter(out, 'x').i8(0xfe).i16(-2).i32(-3).u32(0x80000000u).cstring("ab").bytes("cd").end();
  EXPECT_EQ(out,
            "x\0\0\0\x14\xfe\xff\xfe\xff\xff\xff\xfd\x80\0\0\0"
            "ab\0"
            "cd"s);
}

TEST(MessageWriter, StartupPacketHasNoTypeByte) {
  std::string out;
  MessageWriter(out, 0).i32(kSSLRequestCode).end();
  EXPECT_EQ(out, "\0\0\0\x08\x04\xd2\x16\x2f"s);
}

TEST(MessageWriter, DestructorEnds) {
  std::string out;
  { MessageWriter(out, 'S'); }
  EXPECT_EQ(out, "S\0\0\0\x04"s);
  out.clear();
  {
    MessageWriter w(out, 'Z');
    w.i8('I');
  }
  EXPECT_EQ(out, "Z\0\0\0\x05I"s);
}

TEST(MessageWriter, EndTwiceIsHarmless) {
  std::string out;
  MessageWriter w(out, 'S');
  w.end();
  w.end();
  EXPECT_EQ(out, "S\0\0\0\x04"s);
}

TEST(MessageWriter, AppendsAfterExistingBytes) {
  std::string out = "prefix";
  write_sync(out);
  write_ready_for_query(out, 'T');
  EXPECT_EQ(out, "prefixS\0\0\0\x04Z\0\0\0\x05T"s);
}

TEST(MessageWriter, LargeBodyLength) {
  std::string out;
  const std::string big(70000, 'y');
  MessageWriter(out, 'd').bytes(big).end();
  EXPECT_EQ(out.substr(0, 5), "d\0\x01\x11\x74"s);  // 70004
  EXPECT_EQ(only_message(out).body, big);
}

// --- backend messages: exact bytes ---

TEST(WriteBackend, ErrorResponseExact) {
  std::string out;
  write_error_response(out, {.severity = "ERROR", .code = "08P01", .message = "bad"});
  EXPECT_EQ(out,
            "E\0\0\0\x1fSERROR\0VERROR\0"
            "C08P01\0Mbad\0\0"s);
}

TEST(WriteBackend, ErrorResponseWithDetailAndHintRoundTrip) {
  std::string out;
  write_error_response(out, {.severity = "FATAL",
                             .code = "53300",
                             .message = "too many clients",
                             .detail = "pool full",
                             .hint = "try later"});
  Message m = only_message(out);
  EXPECT_EQ(m.type, 'E');
  Parsed<ErrorFields> e = parse_error_fields(m.body);
  ASSERT_TRUE(e.ok()) << to_string(e.error);
  std::string types;
  for (const auto& [t, v] : e.value.fields) types.push_back(t);
  EXPECT_EQ(types, "SVCMDH");
  EXPECT_EQ(e.value.severity, "FATAL");
  EXPECT_EQ(e.value.severity_nonlocalized, "FATAL");
  EXPECT_EQ(e.value.code, "53300");
  EXPECT_EQ(e.value.message, "too many clients");
  EXPECT_EQ(e.value.detail, "pool full");
  EXPECT_EQ(e.value.hint, "try later");
}

TEST(WriteBackend, ErrorResponseDefaultSeverityAndHintOnly) {
  std::string out;
  write_error_response(out, {.code = "42000", .message = "m", .hint = "h"});
  Parsed<ErrorFields> e = parse_error_fields(only_message(out).body);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.value.severity, "ERROR");
  std::string types;
  for (const auto& [t, v] : e.value.fields) types.push_back(t);
  EXPECT_EQ(types, "SVCMH");
}

TEST(WriteBackend, NoticeResponse) {
  std::string out;
  write_notice_response(out, {.severity = "NOTICE", .code = "00000", .message = "hello"});
  Message m = only_message(out);
  EXPECT_EQ(m.type, 'N');
  Parsed<ErrorFields> n = parse_error_fields(m.body);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n.value.severity, "NOTICE");
  EXPECT_EQ(n.value.message, "hello");
  EXPECT_EQ(n.value.fields.size(), 4u);
}

TEST(WriteBackend, ReadyForQuery) {
  for (char status : {'I', 'T', 'E'}) {
    std::string out;
    write_ready_for_query(out, status);
    EXPECT_EQ(out, "Z\0\0\0\x05"s + status);
    EXPECT_EQ(parse_ready_for_query(only_message(out).body).value.status, status);
  }
}

TEST(WriteBackend, AuthenticationOk) {
  std::string out;
  write_authentication_ok(out);
  EXPECT_EQ(out, "R\0\0\0\x08\0\0\0\0"s);
  EXPECT_EQ(parse_authentication(only_message(out).body).value.code, AuthCode::ok);
}

TEST(WriteBackend, AuthenticationCleartextPassword) {
  std::string out;
  write_authentication_cleartext_password(out);
  EXPECT_EQ(out, "R\0\0\0\x08\0\0\0\x03"s);
  EXPECT_EQ(parse_authentication(only_message(out).body).value.code, AuthCode::cleartext_password);
}

TEST(WriteBackend, AuthenticationMd5Password) {
  std::string out;
  write_authentication_md5_password(out, {0x01, 0xff, 0x00, 0x7f});
  EXPECT_EQ(out, "R\0\0\0\x0c\0\0\0\x05\x01\xff\0\x7f"s);
  Parsed<Authentication> a = parse_authentication(only_message(out).body);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value.code, AuthCode::md5_password);
  EXPECT_EQ(a.value.md5_salt, (std::array<uint8_t, 4>{0x01, 0xff, 0x00, 0x7f}));
}

TEST(WriteBackend, AuthenticationSasl) {
  std::string out;
  const std::vector<std::string_view> mechanisms = {"SCRAM-SHA-256"};
  write_authentication_sasl(out, mechanisms);
  EXPECT_EQ(out, "R\0\0\0\x17\0\0\0\x0aSCRAM-SHA-256\0\0"s);
  Parsed<Authentication> a = parse_authentication(only_message(out).body);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value.mechanisms, mechanisms);
}

TEST(WriteBackend, AuthenticationSaslTwoMechanismsRoundTrip) {
  std::string out;
  const std::vector<std::string_view> mechanisms = {"SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"};
  write_authentication_sasl(out, mechanisms);
  Parsed<Authentication> a = parse_authentication(only_message(out).body);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value.code, AuthCode::sasl);
  EXPECT_EQ(a.value.mechanisms, mechanisms);
}

TEST(WriteBackend, AuthenticationSaslContinueAndFinal) {
  std::string out;
  write_authentication_sasl_continue(out, "r=abc,s=c2FsdA==,i=4096");
  Parsed<Authentication> a = parse_authentication(only_message(out).body);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value.code, AuthCode::sasl_continue);
  EXPECT_EQ(a.value.data, "r=abc,s=c2FsdA==,i=4096");
  out.clear();
  write_authentication_sasl_final(out, "v=xyz");
  EXPECT_EQ(out, "R\0\0\0\x0d\0\0\0\x0cv=xyz"s);
  a = parse_authentication(only_message(out).body);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value.code, AuthCode::sasl_final);
  EXPECT_EQ(a.value.data, "v=xyz");
}

TEST(WriteBackend, ParameterStatus) {
  std::string out;
  write_parameter_status(out, "TimeZone", "UTC");
  EXPECT_EQ(out, "S\0\0\0\x11TimeZone\0UTC\0"s);
  Parsed<ParameterStatus> p = parse_parameter_status(only_message(out).body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.name, "TimeZone");
  EXPECT_EQ(p.value.value, "UTC");
}

TEST(WriteBackend, BackendKeyDataFourByteKey) {
  std::string out;
  write_backend_key_data(out, 12345, "\xde\xad\xbe\xef"s);
  EXPECT_EQ(out, "K\0\0\0\x0c\0\0\x30\x39\xde\xad\xbe\xef"s);
  Parsed<BackendKeyData> k = parse_backend_key_data(only_message(out).body);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k.value.process_id, 12345);
}

TEST(WriteBackend, BackendKeyData32ByteKeyRoundTrip) {
  std::string key;
  for (int i = 0; i < 32; ++i) key.push_back(static_cast<char>(i * 7));
  std::string out;
  write_backend_key_data(out, -5, key);
  Parsed<BackendKeyData> k = parse_backend_key_data(only_message(out).body);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k.value.process_id, -5);
  EXPECT_EQ(k.value.secret_key, key);
}

TEST(WriteBackend, NegotiateProtocolVersion) {
  std::string out;
  const std::vector<std::string_view> options = {"_pq_.a", "_pq_.bb"};
  write_negotiate_protocol_version(out, kProtocolVersion32, options);
  EXPECT_EQ(out, "v\0\0\0\x1b\0\x03\0\x02\0\0\0\x02_pq_.a\0_pq_.bb\0"s);
  Parsed<NegotiateProtocolVersion> v = parse_negotiate_protocol_version(only_message(out).body);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value.newest_version, kProtocolVersion32);
  EXPECT_EQ(v.value.unrecognized_options, options);
}

TEST(WriteBackend, NegotiateFromTheNegotiationResult) {
  StartupPacket packet;
  packet.version = (3 << 16) | 9999;
  packet.parameters = {{"user", "u"}, {"_pq_.x", "1"}};
  VersionNegotiation n = negotiate_protocol_version(packet);
  ASSERT_TRUE(n.send_negotiate);
  std::string out;
  write_negotiate_protocol_version(out, n.accepted_version, n.unrecognized_options);
  // What libpq 18 reads: the whole version, 3.2, never a bare minor number (which it would take
  // for a "pre-3.0 protocol version" and fail the connection).
  EXPECT_EQ(out.substr(5, 4), "\0\x03\0\x02"s);
  Parsed<NegotiateProtocolVersion> v = parse_negotiate_protocol_version(only_message(out).body);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value.newest_version, kProtocolVersion32);
  ASSERT_EQ(v.value.unrecognized_options.size(), 1u);
  EXPECT_EQ(v.value.unrecognized_options[0], "_pq_.x");
}

struct EmptyWriterCase {
  void (*write)(std::string&);
  char type;
};

class WriteEmptyMessage : public ::testing::TestWithParam<EmptyWriterCase> {};

TEST_P(WriteEmptyMessage, IsTypeAndLengthFour) {
  std::string out;
  GetParam().write(out);
  EXPECT_EQ(out, std::string(1, GetParam().type) + "\0\0\0\x04"s);
  EXPECT_EQ(expect_empty_body(only_message(out).body), ParseError::ok);
}

INSTANTIATE_TEST_SUITE_P(Messages, WriteEmptyMessage,
                         ::testing::Values(EmptyWriterCase{write_parse_complete, '1'},
                                           EmptyWriterCase{write_bind_complete, '2'},
                                           EmptyWriterCase{write_close_complete, '3'},
                                           EmptyWriterCase{write_no_data, 'n'},
                                           EmptyWriterCase{write_empty_query_response, 'I'},
                                           EmptyWriterCase{write_sync, 'S'},
                                           EmptyWriterCase{write_flush, 'H'},
                                           EmptyWriterCase{write_terminate, 'X'}));

TEST(WriteBackend, CommandComplete) {
  std::string out;
  write_command_complete(out, "SHOW");
  EXPECT_EQ(out, "C\0\0\0\x09SHOW\0"s);
  EXPECT_EQ(parse_command_complete(only_message(out).body).value.tag, "SHOW");
}

TEST(WriteBackend, RowDescriptionRoundTrip) {
  const std::vector<FieldDescription> fields = {
      {.name = "id",
       .table_oid = 16384,
       .column_number = 1,
       .type_oid = 23,
       .type_size = 4,
       .type_modifier = -1,
       .format = 0},
      {.name = "payload",
       .table_oid = 16384,
       .column_number = 2,
       .type_oid = 17,
       .type_size = -1,
       .type_modifier = -1,
       .format = 1},
  };
  std::string out;
  write_row_description(out, fields);
  Parsed<RowDescription> t = parse_row_description(only_message(out).body);
  ASSERT_TRUE(t.ok()) << to_string(t.error);
  ASSERT_EQ(t.value.fields.size(), 2u);
  for (size_t i = 0; i < fields.size(); ++i) {
    EXPECT_EQ(t.value.fields[i].name, fields[i].name);
    EXPECT_EQ(t.value.fields[i].table_oid, fields[i].table_oid);
    EXPECT_EQ(t.value.fields[i].column_number, fields[i].column_number);
    EXPECT_EQ(t.value.fields[i].type_oid, fields[i].type_oid);
    EXPECT_EQ(t.value.fields[i].type_size, fields[i].type_size);
    EXPECT_EQ(t.value.fields[i].type_modifier, fields[i].type_modifier);
    EXPECT_EQ(t.value.fields[i].format, fields[i].format);
  }
}

TEST(WriteBackend, TextRowDescriptionExact) {
  std::string out;
  const std::vector<std::string_view> names = {"n"};
  const std::vector<uint32_t> types = {kOidInt4};
  write_text_row_description(out, names, types);
  EXPECT_EQ(out,
            "T\0\0\0\x1a\0\x01n\0"
            "\0\0\0\0"          // table oid
            "\0\0"              // column number
            "\0\0\0\x17"        // int4
            "\0\x04"            // size 4
            "\xff\xff\xff\xff"  // typmod -1
            "\0\0"s);           // text
}

TEST(WriteBackend, TextRowDescriptionTypeSizes) {
  std::string out;
  const std::vector<std::string_view> names = {"database", "count", "total", "avg", "since"};
  const std::vector<uint32_t> types = {kOidText, kOidInt4, kOidInt8, kOidNumeric, kOidTimestampTz};
  write_text_row_description(out, names, types);
  Parsed<RowDescription> t = parse_row_description(only_message(out).body);
  ASSERT_TRUE(t.ok()) << to_string(t.error);
  ASSERT_EQ(t.value.fields.size(), 5u);
  const int16_t sizes[] = {-1, 4, 8, -1, 8};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(t.value.fields[i].name, names[i]);
    EXPECT_EQ(t.value.fields[i].type_oid, types[i]);
    EXPECT_EQ(t.value.fields[i].type_size, sizes[i]) << i;
    EXPECT_EQ(t.value.fields[i].table_oid, 0u);
    EXPECT_EQ(t.value.fields[i].column_number, 0);
    EXPECT_EQ(t.value.fields[i].type_modifier, -1);
    EXPECT_EQ(t.value.fields[i].format, 0);
  }
}

TEST(WriteBackend, DataRowExact) {
  std::string out;
  const std::vector<std::optional<std::string_view>> values = {"42", std::nullopt, ""};
  write_data_row(out, values);
  EXPECT_EQ(out,
            "D\0\0\0\x14\0\x03\0\0\0\x02"
            "42\xff\xff\xff\xff\0\0\0\0"s);
  Parsed<DataRow> d = parse_data_row(only_message(out).body);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value.values, values);
}

TEST(WriteBackend, DataRowBinaryValueRoundTrip) {
  std::string out;
  const std::string binary = "\0\x01\0\xff"s;
  const std::vector<std::optional<std::string_view>> values = {binary};
  write_data_row(out, values);
  Parsed<DataRow> d = parse_data_row(only_message(out).body);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value.values[0], std::optional<std::string_view>(binary));
}

// --- frontend messages ---

TEST(WriteFrontend, StartupMessageExact) {
  std::string out;
  const std::vector<std::pair<std::string_view, std::string_view>> params = {{"user", "alice"},
                                                                             {"database", "shop"}};
  write_startup_message(out, kProtocolVersion30, params);
  EXPECT_EQ(out, "\0\0\0\x22\0\x03\0\0user\0alice\0database\0shop\0\0"s);
}

TEST(WriteFrontend, StartupMessageRoundTrip32) {
  std::string out;
  const std::vector<std::pair<std::string_view, std::string_view>> params = {
      {"user", "bob"}, {"application_name", "pgsluice"}, {"options", ""}};
  write_startup_message(out, kProtocolVersion32, params);
  Message m = only_message(out, FramePhase::startup);
  EXPECT_EQ(m.type, 0);
  Parsed<StartupPacket> p = parse_startup_packet(m.body);
  ASSERT_TRUE(p.ok()) << to_string(p.error);
  EXPECT_EQ(p.value.kind, StartupKind::startup_message);
  EXPECT_EQ(p.value.version, kProtocolVersion32);
  EXPECT_EQ(p.value.parameters, params);
}

TEST(WriteFrontend, SSLRequest) {
  std::string out;
  write_ssl_request(out);
  EXPECT_EQ(out, "\0\0\0\x08\x04\xd2\x16\x2f"s);
  EXPECT_EQ(parse_startup_packet(only_message(out, FramePhase::startup).body).value.kind,
            StartupKind::ssl_request);
}

TEST(WriteFrontend, CancelRequest30) {
  std::string out;
  write_cancel_request(out, 12345, "\xde\xad\xbe\xef"s);
  EXPECT_EQ(out, "\0\0\0\x10\x04\xd2\x16\x2e\0\0\x30\x39\xde\xad\xbe\xef"s);
}

TEST(WriteFrontend, CancelRequest32RoundTrip) {
  const std::string key(64, '\x11');
  std::string out;
  write_cancel_request(out, 777, key);
  EXPECT_EQ(out.size(), 12u + key.size());
  Parsed<StartupPacket> p = parse_startup_packet(only_message(out, FramePhase::startup).body);
  ASSERT_TRUE(p.ok()) << to_string(p.error);
  EXPECT_EQ(p.value.kind, StartupKind::cancel_request);
  EXPECT_EQ(p.value.cancel_pid, 777);
  EXPECT_EQ(p.value.cancel_key, key);
}

TEST(WriteFrontend, PasswordMessage) {
  std::string out;
  write_password_message(out, "secret");
  EXPECT_EQ(out, "p\0\0\0\x0bsecret\0"s);
  EXPECT_EQ(parse_password_message(only_message(out).body).value.password, "secret");
}

TEST(WriteFrontend, SASLInitialResponse) {
  std::string out;
  write_sasl_initial_response(out, "SCRAM-SHA-256", "n,,n=,r=abc");
  EXPECT_EQ(out, "p\0\0\0\x21SCRAM-SHA-256\0\0\0\0\x0bn,,n=,r=abc"s);
  Parsed<SASLInitialResponse> s = parse_sasl_initial_response(only_message(out).body);
  ASSERT_TRUE(s.ok()) << to_string(s.error);
  EXPECT_EQ(s.value.mechanism, "SCRAM-SHA-256");
  EXPECT_EQ(s.value.data, std::optional<std::string_view>("n,,n=,r=abc"));
}

TEST(WriteFrontend, SASLResponse) {
  std::string out;
  write_sasl_response(out, "c=biws,r=abc,p=xyz");
  EXPECT_EQ(out,
            "p\0\0\0\x16"
            "c=biws,r=abc,p=xyz"s);
  EXPECT_EQ(parse_sasl_response(only_message(out).body).value.data, "c=biws,r=abc,p=xyz");
}

TEST(WriteFrontend, Query) {
  std::string out;
  write_query(out, "DISCARD ALL");
  EXPECT_EQ(out,
            "Q\0\0\0\x10"
            "DISCARD ALL\0"s);
  EXPECT_EQ(parse_query(only_message(out).body).value.sql, "DISCARD ALL");
}

TEST(WriteFrontend, ParseExact) {
  std::string out;
  const std::vector<uint32_t> types = {23};
  write_parse(out, "s1", "SELECT $1", types);
  EXPECT_EQ(out, "P\0\0\0\x17s1\0SELECT $1\0\0\x01\0\0\0\x17"s);
  Parsed<Parse> p = parse_parse(only_message(out).body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.statement, "s1");
  EXPECT_EQ(p.value.query, "SELECT $1");
  EXPECT_EQ(p.value.parameter_types, types);
}

TEST(WriteFrontend, ParseUnnamedNoTypes) {
  std::string out;
  write_parse(out, "", "SELECT 1", {});
  Parsed<Parse> p = parse_parse(only_message(out).body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.statement, "");
  EXPECT_TRUE(p.value.parameter_types.empty());
}

TEST(WriteFrontend, BindRenamedKeepsEverythingAfterTheStatement) {
  // A client's Bind of statement "s1" with one text parameter and one result format.
  const std::string client =
      "B\0\0\0\x1b"
      "p1\0"
      "s1\0"
      "\0\x01\0\0"
      "\0\x01\0\0\0\x03"
      "abc"
      "\0\x01\0\x01"s;
  Parsed<Bind> original = parse_bind(only_message(client).body);
  ASSERT_TRUE(original.ok()) << to_string(original.error);
  std::string out;
  write_bind_renamed(out, original.value.portal, "PGSLUICE_7", original.value.after_statement);
  Parsed<Bind> renamed = parse_bind(only_message(out).body);
  ASSERT_TRUE(renamed.ok()) << to_string(renamed.error);
  EXPECT_EQ(renamed.value.portal, "p1");
  EXPECT_EQ(renamed.value.statement, "PGSLUICE_7");
  EXPECT_EQ(renamed.value.after_statement, original.value.after_statement);
  EXPECT_EQ(renamed.value.parameter_formats, original.value.parameter_formats);
  EXPECT_EQ(renamed.value.parameters, original.value.parameters);
  EXPECT_EQ(renamed.value.result_formats, (std::vector<int16_t>{1}));
  EXPECT_EQ(out.size(), client.size() + 8);  // "PGSLUICE_7" is 8 bytes longer than "s1"
}

TEST(WriteFrontend, Describe) {
  std::string out;
  write_describe(out, 'S', "s1");
  EXPECT_EQ(out,
            "D\0\0\0\x08S"
            "s1\0"s);
  Parsed<Describe> d = parse_describe(only_message(out).body);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value.kind, 'S');
  EXPECT_EQ(d.value.name, "s1");
}

TEST(WriteFrontend, Execute) {
  std::string out;
  write_execute(out, "", 0);
  EXPECT_EQ(out, "E\0\0\0\x09\0\0\0\0\0"s);
  out.clear();
  write_execute(out, "p1", 100);
  Parsed<Execute> e = parse_execute(only_message(out).body);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.value.portal, "p1");
  EXPECT_EQ(e.value.max_rows, 100);
}

TEST(WriteFrontend, Close) {
  std::string out;
  write_close(out, 'P', "");
  EXPECT_EQ(out, "C\0\0\0\x06P\0"s);
  out.clear();
  write_close(out, 'S', "PGSLUICE_1");
  Parsed<Close> c = parse_close(only_message(out).body);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value.kind, 'S');
  EXPECT_EQ(c.value.name, "PGSLUICE_1");
}

// --- batching ---

TEST(Batching, SeveralMessagesInOneBufferFrameBackIdentically) {
  std::string out;
  write_authentication_ok(out);
  write_parameter_status(out, "server_version", "18.0");
  write_backend_key_data(out, 1, "\x01\x02\x03\x04"s);
  write_ready_for_query(out, 'I');
  const std::vector<std::string_view> names = {"a"};
  const std::vector<uint32_t> types = {kOidText};
  write_text_row_description(out, names, types);
  const std::vector<std::optional<std::string_view>> row = {"x"};
  write_data_row(out, row);
  write_command_complete(out, "SHOW");
  write_ready_for_query(out, 'I');

  FrameReader reader;
  for (char c : out) reader.append(std::string_view(&c, 1));  // one byte at a time
  std::string seen;
  for (;;) {
    FrameResult r = reader.next();
    if (r.status != FrameStatus::complete) break;
    seen.push_back(r.message.type);
    EXPECT_TRUE(is_known_message(Direction::backend, r.message.type));
  }
  EXPECT_EQ(seen, "RSKZTDCZ");
  EXPECT_EQ(reader.unread_size(), 0u);
}

}  // namespace
}  // namespace pgsluice::protocol
