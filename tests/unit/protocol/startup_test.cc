// Startup phase tests: StartupMessage, SSLRequest, GSSENCRequest and CancelRequest from
// hand-written bytes, malformed packets, and the choice of protocol version (3.0 / 3.2).
#include "pgsluice/protocol/startup.h"

#include <gtest/gtest.h>

#include <string>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/frame.h"

namespace pgsluice::protocol {
namespace {

using namespace std::string_literals;

// The body of the single startup packet in `wire` (checked by the framer first).
std::string body_of(const std::string& wire) {
  FrameResult r = next_message(wire, FramePhase::startup, kDefaultMaxMessageLength);
  EXPECT_EQ(r.status, FrameStatus::complete) << to_string(r.error);
  EXPECT_EQ(r.message.wire.size(), wire.size());
  return std::string(r.message.body);
}

// psql 16 connecting to database "shop" as "alice" (protocol 3.0).
const std::string kPsqlStartup =
    "\0\0\0\x4d"  // length 77
    "\0\x03\0\0"  // 3.0
    "user\0alice\0"
    "database\0shop\0"
    "application_name\0psql\0"
    "client_encoding\0UTF8\0"
    "\0"s;

TEST(StartupMessage, ParsesPsqlStartup) {
  const std::string body = body_of(kPsqlStartup);
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok()) << to_string(p.error);
  EXPECT_EQ(p.value.kind, StartupKind::startup_message);
  EXPECT_EQ(p.value.version, kProtocolVersion30);
  ASSERT_EQ(p.value.parameters.size(), 4u);
  EXPECT_EQ(p.value.parameters[0].first, "user");
  EXPECT_EQ(p.value.parameters[0].second, "alice");
  EXPECT_EQ(p.value.parameters[3].first, "client_encoding");
  EXPECT_EQ(p.value.parameters[3].second, "UTF8");
  EXPECT_EQ(p.value.parameter("database"), "shop");
  EXPECT_EQ(p.value.parameter("application_name"), "psql");
}

TEST(StartupMessage, MissingParameterIsEmpty) {
  const std::string body = body_of(kPsqlStartup);
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.value.parameter("options").empty());
  EXPECT_TRUE(p.value.parameter("").empty());
}

TEST(StartupMessage, Version32) {
  const std::string body = "\0\x03\0\x02user\0bob\0\0"s;
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.version, kProtocolVersion32);
  EXPECT_EQ(p.value.version, 196610);
  EXPECT_EQ(p.value.parameter("user"), "bob");
}

TEST(StartupMessage, EmptyValueIsAllowed) {
  const std::string body = "\0\x03\0\0user\0bob\0options\0\0\0"s;
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok()) << to_string(p.error);
  ASSERT_EQ(p.value.parameters.size(), 2u);
  EXPECT_EQ(p.value.parameters[1].first, "options");
  EXPECT_EQ(p.value.parameters[1].second, "");
}

TEST(StartupMessage, NoParametersJustTheTerminator) {
  const std::string body = "\0\x03\0\0\0"s;
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.value.parameters.empty());
}

TEST(StartupMessage, DuplicateParameterLookupFindsTheFirst) {
  const std::string body = "\0\x03\0\0user\0a\0user\0b\0\0"s;
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.parameters.size(), 2u);
  EXPECT_EQ(p.value.parameter("user"), "a");
}

struct StartupErrorCase {
  std::string name;
  std::string body;
  ParseError error;
};

class StartupErrors : public ::testing::TestWithParam<StartupErrorCase> {};

TEST_P(StartupErrors, Rejects) {
  Parsed<StartupPacket> p = parse_startup_packet(GetParam().body);
  EXPECT_FALSE(p.ok());
  EXPECT_EQ(p.error, GetParam().error) << to_string(p.error);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, StartupErrors,
    ::testing::Values(
        StartupErrorCase{"Empty", ""s, ParseError::truncated},
        StartupErrorCase{"ThreeBytes", "\0\x03\0"s, ParseError::truncated},
        StartupErrorCase{"NoTerminatorAtAll", "\0\x03\0\0"s, ParseError::missing_terminator},
        StartupErrorCase{"NoFinalTerminator", "\0\x03\0\0user\0bob\0"s,
                         ParseError::missing_terminator},
        StartupErrorCase{"NameWithoutNul", "\0\x03\0\0user"s, ParseError::missing_terminator},
        StartupErrorCase{"ValueWithoutNul", "\0\x03\0\0user\0bo"s, ParseError::missing_terminator},
        StartupErrorCase{"ValueMissing", "\0\x03\0\0user\0"s, ParseError::truncated},
        StartupErrorCase{"TrailingAfterTerminator", "\0\x03\0\0user\0bob\0\0x"s,
                         ParseError::trailing_bytes},
        StartupErrorCase{"Version2", "\0\x02\0\0user\0bob\0\0"s, ParseError::bad_value},
        StartupErrorCase{"Version4", "\0\x04\0\0user\0bob\0\0"s, ParseError::bad_value},
        StartupErrorCase{"UnknownRequestCode", "\x04\xd2\x16\x31"s, ParseError::bad_value},
        StartupErrorCase{"SSLRequestWithExtra", "\x04\xd2\x16\x2f\0"s, ParseError::trailing_bytes},
        StartupErrorCase{"GSSENCRequestWithExtra", "\x04\xd2\x16\x30\0\0\0\0"s,
                         ParseError::trailing_bytes},
        StartupErrorCase{"CancelWithoutPid", "\x04\xd2\x16\x2e\0\0"s, ParseError::truncated},
        StartupErrorCase{"CancelWithoutKey", "\x04\xd2\x16\x2e\0\0\x30\x39"s,
                         ParseError::truncated},
        StartupErrorCase{"CancelKeyThreeBytes", "\x04\xd2\x16\x2e\0\0\x30\x39\x01\x02\x03"s,
                         ParseError::truncated},
        StartupErrorCase{"CancelKey257Bytes",
                         "\x04\xd2\x16\x2e\0\0\x30\x39"s + std::string(257, 'k'),
                         ParseError::bad_value}),
    [](const auto& info) { return info.param.name; });

TEST(SSLRequest, Parses) {
  const std::string wire = "\0\0\0\x08\x04\xd2\x16\x2f"s;  // 8, 80877103
  const std::string body = body_of(wire);
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.kind, StartupKind::ssl_request);
  EXPECT_EQ(kSSLRequestCode, 80877103);
}

TEST(GSSENCRequest, Parses) {
  const std::string wire = "\0\0\0\x08\x04\xd2\x16\x30"s;  // 8, 80877104
  const std::string body = body_of(wire);
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.kind, StartupKind::gssenc_request);
  EXPECT_EQ(kGSSENCRequestCode, 80877104);
}

TEST(CancelRequest, Protocol30FourByteKey) {
  // 16, 80877102, pid 12345, key 0xdeadbeef.
  const std::string wire = "\0\0\0\x10\x04\xd2\x16\x2e\0\0\x30\x39\xde\xad\xbe\xef"s;
  const std::string body = body_of(wire);
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok()) << to_string(p.error);
  EXPECT_EQ(p.value.kind, StartupKind::cancel_request);
  EXPECT_EQ(p.value.cancel_pid, 12345);
  EXPECT_EQ(p.value.cancel_key, "\xde\xad\xbe\xef"s);
  EXPECT_EQ(kCancelRequestCode, 80877102);
}

TEST(CancelRequest, Protocol32LongKey) {
  // 3.2: length 12 + 32, key of 32 bytes.
  const std::string key(32, '\x5a');
  const std::string wire = "\0\0\0\x2c\x04\xd2\x16\x2e\0\0\x30\x39"s + key;
  const std::string body = body_of(wire);
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.cancel_pid, 12345);
  EXPECT_EQ(p.value.cancel_key, key);
}

TEST(CancelRequest, MaximumKeyOf256Bytes) {
  std::string key;
  for (int i = 0; i < 256; ++i) key.push_back(static_cast<char>(i));
  const std::string body = "\x04\xd2\x16\x2e\x7f\xff\xff\xff"s + key;
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.cancel_pid, INT32_MAX);
  EXPECT_EQ(p.value.cancel_key.size(), kMaxCancelKeyLength);
  EXPECT_EQ(p.value.cancel_key, key);
}

TEST(StartupPacket, FramedThroughTheReader) {
  FrameReader reader(FramePhase::startup);
  reader.append("\0\0\0\x08\x04\xd2\x16\x2f"s + kPsqlStartup);
  FrameResult ssl = reader.next();
  ASSERT_EQ(ssl.status, FrameStatus::complete);
  EXPECT_EQ(parse_startup_packet(ssl.message.body).value.kind, StartupKind::ssl_request);
  FrameResult startup = reader.next();
  ASSERT_EQ(startup.status, FrameStatus::complete);
  Parsed<StartupPacket> p = parse_startup_packet(startup.message.body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.parameter("user"), "alice");
}

// --- version negotiation ---

StartupPacket startup(int32_t version,
                      std::vector<std::pair<std::string_view, std::string_view>> params = {}) {
  StartupPacket p;
  p.version = version;
  p.parameters = std::move(params);
  return p;
}

TEST(Negotiate, Version30WithoutOptions) {
  VersionNegotiation n = negotiate_protocol_version(startup(kProtocolVersion30, {{"user", "a"}}));
  EXPECT_EQ(n.accepted_version, kProtocolVersion30);
  EXPECT_FALSE(n.send_negotiate);
  EXPECT_TRUE(n.unrecognized_options.empty());
}

TEST(Negotiate, Version32WithoutOptions) {
  VersionNegotiation n = negotiate_protocol_version(startup(kProtocolVersion32, {{"user", "a"}}));
  EXPECT_EQ(n.accepted_version, kProtocolVersion32);
  EXPECT_FALSE(n.send_negotiate);
}

TEST(Negotiate, NewerMinorFallsBackTo32) {
  VersionNegotiation n = negotiate_protocol_version(startup((3 << 16) | 3));
  EXPECT_EQ(n.accepted_version, kProtocolVersion32);
  EXPECT_TRUE(n.send_negotiate);
  EXPECT_EQ(n.newest_minor, 2);
  EXPECT_TRUE(n.unrecognized_options.empty());
}

TEST(Negotiate, GreaseVersion9999) {
  // libpq 18 can send 3.9999 to check that servers negotiate instead of failing.
  VersionNegotiation n = negotiate_protocol_version(startup((3 << 16) | 9999));
  EXPECT_EQ(n.accepted_version, kProtocolVersion32);
  EXPECT_TRUE(n.send_negotiate);
  EXPECT_EQ(n.newest_minor, 2);
}

TEST(Negotiate, Version31IsAnsweredWith30) {
  VersionNegotiation n = negotiate_protocol_version(startup((3 << 16) | 1));
  EXPECT_EQ(n.accepted_version, kProtocolVersion30);
  EXPECT_TRUE(n.send_negotiate);
  EXPECT_EQ(n.newest_minor, 0);
}

TEST(Negotiate, ProtocolOptionsAreUnrecognized) {
  VersionNegotiation n = negotiate_protocol_version(startup(
      kProtocolVersion32,
      {{"user", "a"}, {"_pq_.report_parameters", "x"}, {"database", "d"}, {"_pq_.other", "1"}}));
  EXPECT_EQ(n.accepted_version, kProtocolVersion32);
  EXPECT_TRUE(n.send_negotiate);
  EXPECT_EQ(n.newest_minor, 2);
  ASSERT_EQ(n.unrecognized_options.size(), 2u);
  EXPECT_EQ(n.unrecognized_options[0], "_pq_.report_parameters");
  EXPECT_EQ(n.unrecognized_options[1], "_pq_.other");
}

TEST(Negotiate, ProtocolOptionsOn30NameMinor0) {
  VersionNegotiation n = negotiate_protocol_version(startup(kProtocolVersion30, {{"_pq_.x", "1"}}));
  EXPECT_EQ(n.accepted_version, kProtocolVersion30);
  EXPECT_TRUE(n.send_negotiate);
  EXPECT_EQ(n.newest_minor, 0);
  ASSERT_EQ(n.unrecognized_options.size(), 1u);
}

TEST(Negotiate, OnlyThePqPrefixCounts) {
  VersionNegotiation n = negotiate_protocol_version(
      startup(kProtocolVersion30, {{"_pq_", "1"}, {"pq_.x", "1"}, {"_PQ_.x", "1"}}));
  EXPECT_FALSE(n.send_negotiate);
  EXPECT_TRUE(n.unrecognized_options.empty());
}

TEST(Negotiate, ServerLimitedTo30) {
  VersionNegotiation n =
      negotiate_protocol_version(startup(kProtocolVersion32), kProtocolVersion30);
  EXPECT_EQ(n.accepted_version, kProtocolVersion30);
  EXPECT_TRUE(n.send_negotiate);
  EXPECT_EQ(n.newest_minor, 0);
  n = negotiate_protocol_version(startup(kProtocolVersion30), kProtocolVersion30);
  EXPECT_FALSE(n.send_negotiate);
}

TEST(Negotiate, FromParsedPacket) {
  const std::string body = "\0\x03\0\x05user\0u\0_pq_.test\0on\0\0"s;
  Parsed<StartupPacket> p = parse_startup_packet(body);
  ASSERT_TRUE(p.ok());
  VersionNegotiation n = negotiate_protocol_version(p.value);
  EXPECT_EQ(n.accepted_version, kProtocolVersion32);
  EXPECT_TRUE(n.send_negotiate);
  EXPECT_EQ(n.newest_minor, 2);
  ASSERT_EQ(n.unrecognized_options.size(), 1u);
  EXPECT_EQ(n.unrecognized_options[0], "_pq_.test");
}

// --- the server's NegotiateProtocolVersion, when pgsluice logs in with 3.2 ---

// A server's NegotiateProtocolVersion parsed from its wire bytes (the options are views into
// `wire`, which the caller keeps).
NegotiateProtocolVersion server_answer(std::string_view wire) {
  Parsed<NegotiateProtocolVersion> v = parse_negotiate_protocol_version(wire.substr(5));
  EXPECT_TRUE(v.ok()) << to_string(v.error);
  return v.value;
}

TEST(ServerNegotiation, PostgreSQL17AnswersWith30) {
  // The bytes PostgreSQL 15 sends when asked for 3.2: the version whole, 196608 = 3.0.
  NegotiateProtocolVersion v = server_answer("v\0\0\0\x0c\0\x03\0\0\0\0\0\0"s);
  ServerVersionAnswer a = accept_server_negotiation(kProtocolVersion32, v);
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(a.version, kProtocolVersion30);
}

TEST(ServerNegotiation, NoUpgradeAboveWhatWasAsked) {
  // A NegotiateProtocolVersion only ever lowers the version: 3.2 (or more) for 3.2 asked is not
  // a server's answer, and 3.2 asked with 3.0 in the StartupMessage neither.
  NegotiateProtocolVersion v = server_answer("v\0\0\0\x0c\0\x03\0\x02\0\0\0\0"s);
  EXPECT_NE(accept_server_negotiation(kProtocolVersion32, v).error, "");
  EXPECT_NE(accept_server_negotiation(kProtocolVersion30, v).error, "");
  v.newest_version = kProtocolVersion30;
  EXPECT_NE(accept_server_negotiation(kProtocolVersion30, v).error, "");
}

TEST(ServerNegotiation, ABareMinorOrAnotherMajorIsRefused) {
  // "2" alone would be protocol 0.2: no server's answer (and what libpq calls pre-3.0).
  NegotiateProtocolVersion v = server_answer("v\0\0\0\x0c\0\0\0\x00\0\0\0\0"s);
  EXPECT_NE(accept_server_negotiation(kProtocolVersion32, v).error, "");
  v.newest_version = (4 << 16);
  EXPECT_NE(accept_server_negotiation(kProtocolVersion32, v).error, "");
}

TEST(ServerNegotiation, Version31IsRefused) {
  NegotiateProtocolVersion v = server_answer("v\0\0\0\x0c\0\x03\0\x01\0\0\0\0"s);
  ServerVersionAnswer a = accept_server_negotiation(kProtocolVersion32, v);
  EXPECT_NE(a.error.find("3.1"), std::string::npos) << a.error;
}

TEST(ServerNegotiation, AnOptionNeverSentIsRefused) {
  const std::string wire = "v\0\0\0\x15\0\x03\0\0\0\0\0\x01_pq_.foo\0"s;
  NegotiateProtocolVersion v = server_answer(wire);
  ServerVersionAnswer a = accept_server_negotiation(kProtocolVersion32, v);
  EXPECT_NE(a.error.find("_pq_.foo"), std::string::npos) << a.error;
}

// PostgreSQL's ProcessStartupPacket and parse_bool_with_len decide what a walsender is; the
// pooler must read the parameter the same way, or a client refused by PostgreSQL would get a
// plain session through pgsluice (or the other way round).
TEST(ReplicationParameter, ReadAsPostgreSQLReadsIt) {
  for (std::string_view v : {"true", "t", "TR", "True", "yes", "y", "YE", "on", "ON", "1"}) {
    EXPECT_EQ(parse_replication_parameter(v), ReplicationMode::physical) << v;
  }
  for (std::string_view v : {"false", "f", "FALS", "no", "n", "off", "of", "OFF", "0"}) {
    EXPECT_EQ(parse_replication_parameter(v), ReplicationMode::none) << v;
  }
  EXPECT_EQ(parse_replication_parameter("database"), ReplicationMode::logical);
  // Not a prefix, too short to tell on from off, too long, another case of "database", blank.
  for (std::string_view v :
       {"o", "onn", "truex", "yess", "2", "10", "Database", "", " true", "replication"}) {
    EXPECT_EQ(parse_replication_parameter(v), std::nullopt) << v;
  }
  EXPECT_EQ(to_string(ReplicationMode::none), "none");
  EXPECT_EQ(to_string(ReplicationMode::physical), "physical");
  EXPECT_EQ(to_string(ReplicationMode::logical), "logical");
}

}  // namespace
}  // namespace pgsluice::protocol
