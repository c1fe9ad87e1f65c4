// Frontend message parser tests: every message from hand-written bytes (following the message
// format documentation), then malformed bodies with the error each must give.
#include "pgsluice/protocol/frontend.h"

#include <gtest/gtest.h>

#include <string>

#include "framed_body.h"
#include "pgsluice/protocol/frame.h"

namespace pgsluice::protocol {
namespace {

using namespace std::string_literals;

TEST(Query, Parses) {
  const std::string wire = "Q\0\0\0\x0eSELECT 1;\0"s;
  Parsed<Query> q = parse_query(body_of(wire, 'Q'));
  ASSERT_TRUE(q.ok()) << to_string(q.error);
  EXPECT_EQ(q.value.sql, "SELECT 1;");
}

TEST(Query, EmptyQueryString) {
  const std::string wire = "Q\0\0\0\x05\0"s;
  Parsed<Query> q = parse_query(body_of(wire, 'Q'));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.value.sql, "");
}

TEST(Query, MultiStatementWithNewlines) {
  const std::string wire =
      "Q\0\0\0\x1d"
      "BEGIN;\nSELECT 1;\nCOMMIT;\0"s;
  Parsed<Query> q = parse_query(body_of(wire, 'Q'));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.value.sql, "BEGIN;\nSELECT 1;\nCOMMIT;");
}

TEST(Parse, NamedWithParameterTypes) {
  // "s1", "SELECT $1::int + $2", 2 parameter types: int4 (23), int8 (20).
  const std::string wire =
      "P\0\0\0\x25"
      "s1\0"
      "SELECT $1::int + $2\0"
      "\0\x02"
      "\0\0\0\x17"
      "\0\0\0\x14"s;
  Parsed<Parse> p = parse_parse(body_of(wire, 'P'));
  ASSERT_TRUE(p.ok()) << to_string(p.error);
  EXPECT_EQ(p.value.statement, "s1");
  EXPECT_EQ(p.value.query, "SELECT $1::int + $2");
  EXPECT_EQ(p.value.parameter_types, (std::vector<uint32_t>{23, 20}));
}

TEST(Parse, UnnamedWithoutTypes) {
  const std::string wire = "P\0\0\0\x10\0SELECT 1\0\0\0"s;
  Parsed<Parse> p = parse_parse(body_of(wire, 'P'));
  ASSERT_TRUE(p.ok()) << to_string(p.error);
  EXPECT_EQ(p.value.statement, "");
  EXPECT_EQ(p.value.query, "SELECT 1");
  EXPECT_TRUE(p.value.parameter_types.empty());
}

TEST(Parse, UnspecifiedTypeIsZero) {
  const std::string wire = "P\0\0\0\x15\0SELECT $1\0\0\x01\0\0\0\0"s;
  Parsed<Parse> p = parse_parse(body_of(wire, 'P'));
  ASSERT_TRUE(p.ok()) << to_string(p.error);
  EXPECT_EQ(p.value.parameter_types, (std::vector<uint32_t>{0}));
}

// Portal "p1", statement "s1"; parameter formats text, binary; parameters "42", NULL and an
// 8-byte binary int8; one result format, text.
const std::string kBind =
    "B\0\0\0\x2c"
    "p1\0"
    "s1\0"
    "\0\x02\0\0\0\x01"
    "\0\x03"
    "\0\0\0\x02"
    "42"
    "\xff\xff\xff\xff"
    "\0\0\0\x08\0\0\0\0\0\0\x01\0"
    "\0\x01\0\0"s;

TEST(Bind, ParsesEveryPart) {
  Parsed<Bind> b = parse_bind(body_of(kBind, 'B'));
  ASSERT_TRUE(b.ok()) << to_string(b.error);
  EXPECT_EQ(b.value.portal, "p1");
  EXPECT_EQ(b.value.statement, "s1");
  EXPECT_EQ(b.value.parameter_formats, (std::vector<int16_t>{0, 1}));
  ASSERT_EQ(b.value.parameters.size(), 3u);
  EXPECT_EQ(b.value.parameters[0], std::optional<std::string_view>("42"));
  EXPECT_EQ(b.value.parameters[1], std::nullopt);
  EXPECT_EQ(b.value.parameters[2], std::optional<std::string_view>("\0\0\0\0\0\0\x01\0"s));
  EXPECT_EQ(b.value.result_formats, (std::vector<int16_t>{0}));
}

TEST(Bind, AfterStatementIsTheRestOfTheBody) {
  std::string_view body = body_of(kBind, 'B');
  Parsed<Bind> b = parse_bind(body);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value.after_statement, body.substr(6));
  EXPECT_EQ(b.value.after_statement.data() + b.value.after_statement.size(),
            body.data() + body.size());
}

TEST(Bind, AllUnnamedAndEmpty) {
  const std::string wire = "B\0\0\0\x0c\0\0\0\0\0\0\0\0"s;
  Parsed<Bind> b = parse_bind(body_of(wire, 'B'));
  ASSERT_TRUE(b.ok()) << to_string(b.error);
  EXPECT_EQ(b.value.portal, "");
  EXPECT_EQ(b.value.statement, "");
  EXPECT_TRUE(b.value.parameter_formats.empty());
  EXPECT_TRUE(b.value.parameters.empty());
  EXPECT_TRUE(b.value.result_formats.empty());
  EXPECT_EQ(b.value.after_statement, "\0\0\0\0\0\0"s);
}

TEST(Bind, EmptyStringValueIsNotNull) {
  const std::string wire = "B\0\0\0\x10\0\0\0\0\0\x01\0\0\0\0\0\0"s;
  Parsed<Bind> b = parse_bind(body_of(wire, 'B'));
  ASSERT_TRUE(b.ok()) << to_string(b.error);
  ASSERT_EQ(b.value.parameters.size(), 1u);
  ASSERT_TRUE(b.value.parameters[0].has_value());
  EXPECT_EQ(*b.value.parameters[0], "");
}

TEST(Describe, Statement) {
  const std::string wire =
      "D\0\0\0\x08S"
      "s1\0"s;
  Parsed<Describe> d = parse_describe(body_of(wire, 'D'));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value.kind, 'S');
  EXPECT_EQ(d.value.name, "s1");
}

TEST(Describe, UnnamedPortal) {
  const std::string wire = "D\0\0\0\x06P\0"s;
  Parsed<Describe> d = parse_describe(body_of(wire, 'D'));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value.kind, 'P');
  EXPECT_EQ(d.value.name, "");
}

TEST(Execute, UnnamedPortalAllRows) {
  const std::string wire = "E\0\0\0\x09\0\0\0\0\0"s;
  Parsed<Execute> e = parse_execute(body_of(wire, 'E'));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.value.portal, "");
  EXPECT_EQ(e.value.max_rows, 0);
}

TEST(Execute, NamedPortalTenRows) {
  const std::string wire = "E\0\0\0\x0bp1\0\0\0\0\x0a"s;
  Parsed<Execute> e = parse_execute(body_of(wire, 'E'));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.value.portal, "p1");
  EXPECT_EQ(e.value.max_rows, 10);
}

TEST(Close, Statement) {
  const std::string wire =
      "C\0\0\0\x08S"
      "s1\0"s;
  Parsed<Close> c = parse_close(body_of(wire, 'C'));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value.kind, 'S');
  EXPECT_EQ(c.value.name, "s1");
}

TEST(Close, Portal) {
  const std::string wire =
      "C\0\0\0\x08P"
      "p1\0"s;
  Parsed<Close> c = parse_close(body_of(wire, 'C'));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value.kind, 'P');
  EXPECT_EQ(c.value.name, "p1");
}

TEST(CopyData, IsTheWholeBody) {
  const std::string wire =
      "d\0\0\0\x0a"
      "1\tfoo\n"s;
  Parsed<CopyData> c = parse_copy_data(body_of(wire, 'd'));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value.data, "1\tfoo\n");
}

TEST(CopyData, MayBeEmptyOrBinary) {
  const std::string wire = "d\0\0\0\x04"s;
  EXPECT_TRUE(parse_copy_data(body_of(wire, 'd')).ok());
  const std::string binary = "d\0\0\0\x07\0\xff\0"s;
  Parsed<CopyData> c = parse_copy_data(body_of(binary, 'd'));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value.data, "\0\xff\0"s);
}

TEST(CopyDone, HasNoBody) {
  const std::string wire = "c\0\0\0\x04"s;
  EXPECT_EQ(expect_empty_body(body_of(wire, 'c')), ParseError::ok);
}

TEST(CopyFail, Parses) {
  const std::string wire =
      "f\0\0\0\x0c"
      "aborted\0"s;
  Parsed<CopyFail> f = parse_copy_fail(body_of(wire, 'f'));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f.value.message, "aborted");
}

TEST(PasswordMessage, Cleartext) {
  const std::string wire = "p\0\0\0\x0bsecret\0"s;
  Parsed<PasswordMessage> p = parse_password_message(body_of(wire, 'p'));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.password, "secret");
}

TEST(PasswordMessage, Md5) {
  const std::string wire =
      "p\0\0\0\x28md5"
      "0123456789abcdef0123456789abcdef\0"s;
  Parsed<PasswordMessage> p = parse_password_message(body_of(wire, 'p'));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value.password, "md50123456789abcdef0123456789abcdef");
}

TEST(SASLInitialResponse, ScramClientFirstMessage) {
  const std::string wire =
      "p\0\0\0\x32"
      "SCRAM-SHA-256\0"
      "\0\0\0\x1c"
      "n,,n=,r=rOprNGfwEbeRWgbNEkqO"s;
  Parsed<SASLInitialResponse> s = parse_sasl_initial_response(body_of(wire, 'p'));
  ASSERT_TRUE(s.ok()) << to_string(s.error);
  EXPECT_EQ(s.value.mechanism, "SCRAM-SHA-256");
  ASSERT_TRUE(s.value.data.has_value());
  EXPECT_EQ(*s.value.data, "n,,n=,r=rOprNGfwEbeRWgbNEkqO");
}

TEST(SASLInitialResponse, NoData) {
  const std::string wire = "p\0\0\0\x16SCRAM-SHA-256\0\xff\xff\xff\xff"s;
  Parsed<SASLInitialResponse> s = parse_sasl_initial_response(body_of(wire, 'p'));
  ASSERT_TRUE(s.ok()) << to_string(s.error);
  EXPECT_FALSE(s.value.data.has_value());
}

TEST(SASLInitialResponse, EmptyDataIsNotAbsent) {
  const std::string wire = "p\0\0\0\x16SCRAM-SHA-256\0\0\0\0\0"s;
  Parsed<SASLInitialResponse> s = parse_sasl_initial_response(body_of(wire, 'p'));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s.value.data.has_value());
  EXPECT_EQ(*s.value.data, "");
}

TEST(SASLResponse, ScramClientFinalMessage) {
  const std::string wire =
      "p\0\0\0\x52"
      "c=biws,r=rOprNGfwEbeRWgbNEkqOhh,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="s;
  Parsed<SASLResponse> s = parse_sasl_response(body_of(wire, 'p'));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value.data,
            "c=biws,r=rOprNGfwEbeRWgbNEkqOhh,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
}

TEST(EmptyBody, SyncFlushTerminate) {
  for (const std::string& wire : {"S\0\0\0\x04"s, "H\0\0\0\x04"s, "X\0\0\0\x04"s}) {
    EXPECT_EQ(expect_empty_body(body_of(wire, wire[0])), ParseError::ok);
  }
}

TEST(EmptyBody, AnyByteIsTrailing) {
  const std::string wire = "S\0\0\0\x05\0"s;
  EXPECT_EQ(expect_empty_body(body_of(wire, 'S')), ParseError::trailing_bytes);
}

TEST(Parsers, ResultsAreViewsIntoTheBody) {
  const std::string wire = "Q\0\0\0\x0eSELECT 1;\0"s;
  std::string_view body = body_of(wire, 'Q');
  Parsed<Query> q = parse_query(body);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.value.sql.data(), body.data());
}

// --- malformed bodies ---

using ErrorOf = ParseError (*)(std::string_view);

struct FrontendErrorCase {
  std::string name;
  ErrorOf parse;
  std::string body;
  ParseError error;
};

ParseError query_error(std::string_view b) {
  return parse_query(b).error;
}
ParseError parse_error(std::string_view b) {
  return parse_parse(b).error;
}
ParseError bind_error(std::string_view b) {
  return parse_bind(b).error;
}
ParseError describe_error(std::string_view b) {
  return parse_describe(b).error;
}
ParseError execute_error(std::string_view b) {
  return parse_execute(b).error;
}
ParseError close_error(std::string_view b) {
  return parse_close(b).error;
}
ParseError copy_fail_error(std::string_view b) {
  return parse_copy_fail(b).error;
}
ParseError password_error(std::string_view b) {
  return parse_password_message(b).error;
}
ParseError sasl_initial_error(std::string_view b) {
  return parse_sasl_initial_response(b).error;
}

class FrontendErrors : public ::testing::TestWithParam<FrontendErrorCase> {};

TEST_P(FrontendErrors, Rejects) {
  // A copy with no spare capacity past its end, so that an over-read would be caught by ASan.
  const std::string body = GetParam().body;
  EXPECT_EQ(GetParam().parse(body), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, FrontendErrors,
    ::testing::Values(
        FrontendErrorCase{"QueryEmptyBody", query_error, ""s, ParseError::truncated},
        FrontendErrorCase{"QueryNoNul", query_error, "SELECT 1"s, ParseError::missing_terminator},
        FrontendErrorCase{"QueryTrailing", query_error, "SELECT 1\0x"s, ParseError::trailing_bytes},
        FrontendErrorCase{"ParseEmpty", parse_error, ""s, ParseError::truncated},
        FrontendErrorCase{"ParseNameNoNul", parse_error, "s1"s, ParseError::missing_terminator},
        FrontendErrorCase{"ParseNoQuery", parse_error, "s1\0"s, ParseError::truncated},
        FrontendErrorCase{"ParseQueryNoNul", parse_error, "s1\0SELECT"s,
                          ParseError::missing_terminator},
        FrontendErrorCase{"ParseNoCount", parse_error, "\0SELECT 1\0"s, ParseError::truncated},
        FrontendErrorCase{"ParseHalfCount", parse_error, "\0SELECT 1\0\0"s, ParseError::truncated},
        FrontendErrorCase{"ParseNegativeCount", parse_error, "\0SELECT 1\0\xff\xff"s,
                          ParseError::bad_value},
        FrontendErrorCase{"ParseMissingOid", parse_error, "\0SELECT 1\0\0\x02\0\0\0\x17"s,
                          ParseError::truncated},
        FrontendErrorCase{"ParseHalfOid", parse_error, "\0SELECT 1\0\0\x01\0\0"s,
                          ParseError::truncated},
        FrontendErrorCase{"ParseTrailing", parse_error, "\0SELECT 1\0\0\0\0"s,
                          ParseError::trailing_bytes},
        FrontendErrorCase{"BindEmpty", bind_error, ""s, ParseError::truncated},
        FrontendErrorCase{"BindNoStatement", bind_error, "p1\0"s, ParseError::truncated},
        FrontendErrorCase{"BindStatementNoNul", bind_error, "\0s1"s,
                          ParseError::missing_terminator},
        FrontendErrorCase{"BindNoFormatCount", bind_error, "\0\0"s, ParseError::truncated},
        FrontendErrorCase{"BindNegativeFormatCount", bind_error, "\0\0\xff\xfe\0\0\0\0"s,
                          ParseError::bad_value},
        FrontendErrorCase{"BindMissingFormat", bind_error, "\0\0\0\x02\0\0"s,
                          ParseError::truncated},
        FrontendErrorCase{"BindNoValueCount", bind_error, "\0\0\0\0"s, ParseError::truncated},
        FrontendErrorCase{"BindNegativeValueCount", bind_error, "\0\0\0\0\x80\0\0\0"s,
                          ParseError::bad_value},
        FrontendErrorCase{"BindValueLengthMinus2", bind_error,
                          "\0\0\0\0\0\x01\xff\xff\xff\xfe\0\0"s, ParseError::bad_value},
        FrontendErrorCase{"BindValueShort", bind_error,
                          "\0\0\0\0\0\x01\0\0\0\x0a"
                          "abc\0\0"s,
                          ParseError::truncated},
        FrontendErrorCase{"BindValueHugeLength", bind_error,
                          "\0\0\0\0\0\x01\x7f\xff\xff\xff"
                          "abc"s,
                          ParseError::truncated},
        FrontendErrorCase{"BindMissingValueLength", bind_error, "\0\0\0\0\0\x01\0\0"s,
                          ParseError::truncated},
        FrontendErrorCase{"BindNoResultCount", bind_error, "\0\0\0\0\0\0"s, ParseError::truncated},
        FrontendErrorCase{"BindNegativeResultCount", bind_error, "\0\0\0\0\0\0\xff\xff"s,
                          ParseError::bad_value},
        FrontendErrorCase{"BindMissingResultFormat", bind_error, "\0\0\0\0\0\0\0\x01"s,
                          ParseError::truncated},
        FrontendErrorCase{"BindTrailing", bind_error, "\0\0\0\0\0\0\0\0\0"s,
                          ParseError::trailing_bytes},
        FrontendErrorCase{"DescribeEmpty", describe_error, ""s, ParseError::truncated},
        FrontendErrorCase{"DescribeBadKind", describe_error, "X\0"s, ParseError::bad_value},
        FrontendErrorCase{"DescribeLowercaseKind", describe_error, "s\0"s, ParseError::bad_value},
        FrontendErrorCase{"DescribeNoName", describe_error, "S"s, ParseError::truncated},
        FrontendErrorCase{"DescribeNameNoNul", describe_error, "Ss1"s,
                          ParseError::missing_terminator},
        FrontendErrorCase{"DescribeTrailing", describe_error, "Ss1\0\0"s,
                          ParseError::trailing_bytes},
        FrontendErrorCase{"ExecuteEmpty", execute_error, ""s, ParseError::truncated},
        FrontendErrorCase{"ExecuteNoMaxRows", execute_error, "p1\0"s, ParseError::truncated},
        FrontendErrorCase{"ExecuteShortMaxRows", execute_error, "\0\0\0\0"s, ParseError::truncated},
        FrontendErrorCase{"ExecuteTrailing", execute_error, "\0\0\0\0\0\0"s,
                          ParseError::trailing_bytes},
        FrontendErrorCase{"CloseBadKind", close_error, "Q\0"s, ParseError::bad_value},
        FrontendErrorCase{"CloseEmpty", close_error, ""s, ParseError::truncated},
        FrontendErrorCase{"CloseNameNoNul", close_error, "Pp1"s, ParseError::missing_terminator},
        FrontendErrorCase{"CloseTrailing", close_error, "P\0x"s, ParseError::trailing_bytes},
        FrontendErrorCase{"CopyFailNoNul", copy_fail_error, "oops"s,
                          ParseError::missing_terminator},
        FrontendErrorCase{"CopyFailTrailing", copy_fail_error, "oops\0\0"s,
                          ParseError::trailing_bytes},
        FrontendErrorCase{"PasswordEmptyBody", password_error, ""s, ParseError::truncated},
        FrontendErrorCase{"PasswordNoNul", password_error, "secret"s,
                          ParseError::missing_terminator},
        FrontendErrorCase{"PasswordTrailing", password_error, "secret\0more"s,
                          ParseError::trailing_bytes},
        FrontendErrorCase{"SaslMechanismNoNul", sasl_initial_error, "SCRAM-SHA-256"s,
                          ParseError::missing_terminator},
        FrontendErrorCase{"SaslNoLength", sasl_initial_error, "SCRAM-SHA-256\0"s,
                          ParseError::truncated},
        FrontendErrorCase{"SaslShortLength", sasl_initial_error, "SCRAM-SHA-256\0\0\0"s,
                          ParseError::truncated},
        FrontendErrorCase{"SaslLengthMinus2", sasl_initial_error,
                          "SCRAM-SHA-256\0\xff\xff\xff\xfe"s, ParseError::bad_value},
        FrontendErrorCase{"SaslDataShort", sasl_initial_error, "SCRAM-SHA-256\0\0\0\0\x05n,,"s,
                          ParseError::truncated},
        FrontendErrorCase{"SaslDataTrailing", sasl_initial_error, "SCRAM-SHA-256\0\0\0\0\x01nn"s,
                          ParseError::trailing_bytes},
        FrontendErrorCase{"SaslNullDataTrailing", sasl_initial_error,
                          "SCRAM-SHA-256\0\xff\xff\xff\xffx"s, ParseError::trailing_bytes}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pgsluice::protocol
