// Tests of the bounds-checked big-endian reader and writer, the message type names and the
// parse error names.
#include "pgsluice/protocol/bytes.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/result.h"

namespace pgsluice::protocol {
namespace {

using namespace std::literals;

TEST(ByteReader, ReadsU8) {
  ByteReader r("\x7f\xff"sv);
  uint8_t v = 0;
  ASSERT_TRUE(r.read_u8(v));
  EXPECT_EQ(v, 0x7f);
  ASSERT_TRUE(r.read_u8(v));
  EXPECT_EQ(v, 0xff);
  EXPECT_FALSE(r.read_u8(v));
  EXPECT_TRUE(r.at_end());
}

TEST(ByteReader, ReadsI16BigEndian) {
  ByteReader r("\x01\x02\xff\xfe"sv);
  int16_t v = 0;
  ASSERT_TRUE(r.read_i16(v));
  EXPECT_EQ(v, 0x0102);
  ASSERT_TRUE(r.read_i16(v));
  EXPECT_EQ(v, -2);
}

TEST(ByteReader, ReadsI32BigEndian) {
  ByteReader r("\x01\x02\x03\x04\xff\xff\xff\xff\x80\0\0\0"sv);
  int32_t v = 0;
  ASSERT_TRUE(r.read_i32(v));
  EXPECT_EQ(v, 0x01020304);
  ASSERT_TRUE(r.read_i32(v));
  EXPECT_EQ(v, -1);
  ASSERT_TRUE(r.read_i32(v));
  EXPECT_EQ(v, INT32_MIN);
}

TEST(ByteReader, ReadsU32) {
  ByteReader r("\xde\xad\xbe\xef"sv);
  uint32_t v = 0;
  ASSERT_TRUE(r.read_u32(v));
  EXPECT_EQ(v, 0xdeadbeefu);
}

TEST(ByteReader, ShortReadFailsWithoutAdvancing) {
  ByteReader r("\x01\x02\x03"sv);
  int32_t i32 = 7;
  uint32_t u32 = 7;
  EXPECT_FALSE(r.read_i32(i32));
  EXPECT_FALSE(r.read_u32(u32));
  EXPECT_EQ(i32, 7);
  EXPECT_EQ(r.position(), 0u);
  int16_t i16 = 0;
  ASSERT_TRUE(r.read_i16(i16));
  EXPECT_FALSE(r.read_i16(i16));
  EXPECT_EQ(r.position(), 2u);
  EXPECT_EQ(r.remaining(), 1u);
}

TEST(ByteReader, ReadsCStrings) {
  ByteReader r("user\0\0alice\0"sv);
  std::string_view s;
  ASSERT_TRUE(r.read_cstring(s));
  EXPECT_EQ(s, "user");
  ASSERT_TRUE(r.read_cstring(s));
  EXPECT_EQ(s, "");
  ASSERT_TRUE(r.read_cstring(s));
  EXPECT_EQ(s, "alice");
  EXPECT_TRUE(r.at_end());
}

TEST(ByteReader, CStringWithoutNulFails) {
  ByteReader r("abc"sv);
  std::string_view s = "unchanged";
  EXPECT_FALSE(r.read_cstring(s));
  EXPECT_EQ(s, "unchanged");
  EXPECT_EQ(r.position(), 0u);
  ByteReader empty(""sv);
  EXPECT_FALSE(empty.read_cstring(s));
  ByteReader done("a\0"sv);  // all read: nothing left to search
  ASSERT_TRUE(done.read_cstring(s));
  EXPECT_FALSE(done.read_cstring(s));
  EXPECT_EQ(s, "a");
}

TEST(ByteReader, CStringViewPointsIntoInput) {
  const std::string data = "xyz\0"s;
  ByteReader r(data);
  std::string_view s;
  ASSERT_TRUE(r.read_cstring(s));
  EXPECT_EQ(s.data(), data.data());
}

TEST(ByteReader, ReadsBytes) {
  ByteReader r("abcdef"sv);
  std::string_view s;
  ASSERT_TRUE(r.read_bytes(0, s));
  EXPECT_EQ(s, "");
  ASSERT_TRUE(r.read_bytes(4, s));
  EXPECT_EQ(s, "abcd");
  EXPECT_FALSE(r.read_bytes(3, s));
  EXPECT_EQ(r.rest(), "ef");
  ASSERT_TRUE(r.read_bytes(2, s));
  EXPECT_TRUE(r.at_end());
}

TEST(ByteReader, HugeCountDoesNotOverflow) {
  ByteReader r("ab"sv);
  std::string_view s;
  EXPECT_FALSE(r.read_bytes(SIZE_MAX, s));
  EXPECT_EQ(r.remaining(), 2u);
}

TEST(ByteReader, RestDoesNotConsume) {
  ByteReader r("\x01rest"sv);
  uint8_t b = 0;
  ASSERT_TRUE(r.read_u8(b));
  EXPECT_EQ(r.rest(), "rest");
  EXPECT_EQ(r.rest(), "rest");
  EXPECT_EQ(r.position(), 1u);
}

TEST(ByteWriter, PutsBigEndian) {
  std::string out;
  put_u8(out, 0xab);
  put_i16(out, -2);
  put_i32(out, 0x01020304);
  put_i32(out, -1);
  put_u32(out, 0xdeadbeef);
  EXPECT_EQ(out, "\xab\xff\xfe\x01\x02\x03\x04\xff\xff\xff\xff\xde\xad\xbe\xef"s);
}

TEST(ByteWriter, PutsStrings) {
  std::string out;
  put_cstring(out, "user");
  put_cstring(out, "");
  put_bytes(out, "raw");
  EXPECT_EQ(out, "user\0\0raw"s);
}

TEST(ByteWriter, RoundTripsThroughTheReader) {
  std::string out;
  put_u8(out, 200);
  put_i16(out, INT16_MIN);
  put_i32(out, INT32_MAX);
  put_u32(out, 0xffffffffu);
  put_cstring(out, "name");
  ByteReader r(out);
  uint8_t u8 = 0;
  int16_t i16 = 0;
  int32_t i32 = 0;
  uint32_t u32 = 0;
  std::string_view s;
  ASSERT_TRUE(r.read_u8(u8) && r.read_i16(i16) && r.read_i32(i32) && r.read_u32(u32) &&
              r.read_cstring(s));
  EXPECT_EQ(u8, 200);
  EXPECT_EQ(i16, INT16_MIN);
  EXPECT_EQ(i32, INT32_MAX);
  EXPECT_EQ(u32, 0xffffffffu);
  EXPECT_EQ(s, "name");
  EXPECT_TRUE(r.at_end());
}

TEST(LoadStore, U32) {
  char buf[4];
  store_u32(buf, 0x80000001u);
  EXPECT_EQ(std::string(buf, 4), "\x80\0\0\x01"s);
  EXPECT_EQ(load_u32(buf), 0x80000001u);
  EXPECT_EQ(load_u32("\0\0\0\x08"), 8u);
}

TEST(ParseErrorNames, AreDistinct) {
  const ParseError all[] = {
      ParseError::ok,         ParseError::truncated,     ParseError::missing_terminator,
      ParseError::bad_length, ParseError::too_long,      ParseError::unknown_type,
      ParseError::bad_value,  ParseError::trailing_bytes};
  std::set<std::string_view> names;
  for (ParseError e : all) names.insert(to_string(e));
  EXPECT_EQ(names.size(), std::size(all));
  EXPECT_EQ(to_string(ParseError::truncated), "truncated");
  EXPECT_EQ(to_string(ParseError::missing_terminator), "missing_terminator");
}

TEST(Parsed, CarriesValueOrError) {
  Parsed<int> value(42);
  EXPECT_TRUE(value.ok());
  EXPECT_TRUE(static_cast<bool>(value));
  EXPECT_EQ(value.value, 42);
  Parsed<int> error(ParseError::bad_value);
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.error, ParseError::bad_value);
}

// --- message type names ---

struct NameCase {
  Direction direction;
  char type;
  std::string_view name;
};

class MessageNames : public ::testing::TestWithParam<NameCase> {};

TEST_P(MessageNames, MatchTheDocumentation) {
  EXPECT_EQ(message_name(GetParam().direction, GetParam().type), GetParam().name);
  EXPECT_TRUE(is_known_message(GetParam().direction, GetParam().type));
}

constexpr auto F = Direction::frontend;
constexpr auto B = Direction::backend;

INSTANTIATE_TEST_SUITE_P(
    All, MessageNames,
    ::testing::Values(NameCase{F, 'B', "Bind"}, NameCase{F, 'C', "Close"},
                      NameCase{F, 'd', "CopyData"}, NameCase{F, 'c', "CopyDone"},
                      NameCase{F, 'f', "CopyFail"}, NameCase{F, 'D', "Describe"},
                      NameCase{F, 'E', "Execute"}, NameCase{F, 'H', "Flush"},
                      NameCase{F, 'F', "FunctionCall"}, NameCase{F, 'P', "Parse"},
                      NameCase{F, 'p', "PasswordMessage"}, NameCase{F, 'Q', "Query"},
                      NameCase{F, 'S', "Sync"}, NameCase{F, 'X', "Terminate"},
                      NameCase{B, 'R', "Authentication"}, NameCase{B, 'K', "BackendKeyData"},
                      NameCase{B, '2', "BindComplete"}, NameCase{B, '3', "CloseComplete"},
                      NameCase{B, 'C', "CommandComplete"}, NameCase{B, 'd', "CopyData"},
                      NameCase{B, 'c', "CopyDone"}, NameCase{B, 'G', "CopyInResponse"},
                      NameCase{B, 'H', "CopyOutResponse"}, NameCase{B, 'W', "CopyBothResponse"},
                      NameCase{B, 'D', "DataRow"}, NameCase{B, 'I', "EmptyQueryResponse"},
                      NameCase{B, 'E', "ErrorResponse"}, NameCase{B, 'V', "FunctionCallResponse"},
                      NameCase{B, 'v', "NegotiateProtocolVersion"}, NameCase{B, 'n', "NoData"},
                      NameCase{B, 'N', "NoticeResponse"}, NameCase{B, 'A', "NotificationResponse"},
                      NameCase{B, 't', "ParameterDescription"}, NameCase{B, 'S', "ParameterStatus"},
                      NameCase{B, '1', "ParseComplete"}, NameCase{B, 's', "PortalSuspended"},
                      NameCase{B, 'Z', "ReadyForQuery"}, NameCase{B, 'T', "RowDescription"}));

TEST(MessageNamesUnknown, AreEmptyAndNotKnown) {
  for (char type : {'\0', 'z', '!', 'Y', '9'}) {
    EXPECT_TRUE(message_name(F, type).empty()) << type;
    EXPECT_FALSE(is_known_message(F, type)) << type;
    EXPECT_TRUE(message_name(B, type).empty()) << type;
    EXPECT_FALSE(is_known_message(B, type)) << type;
  }
}

TEST(MessageNamesUnknown, DependOnDirection) {
  // Backend-only bytes are not frontend messages and the other way round.
  EXPECT_FALSE(is_known_message(F, 'Z'));
  EXPECT_FALSE(is_known_message(F, 'T'));
  EXPECT_FALSE(is_known_message(B, 'Q'));
  EXPECT_FALSE(is_known_message(B, 'X'));
  EXPECT_FALSE(is_known_message(B, 'p'));
  EXPECT_EQ(message_name(F, 'D'), "Describe");
  EXPECT_EQ(message_name(B, 'D'), "DataRow");
}

TEST(MessageNamesUnknown, EveryByteIsConsistent) {
  for (int i = 0; i < 256; ++i) {
    const char type = static_cast<char>(i);
    EXPECT_EQ(is_known_message(F, type), !message_name(F, type).empty());
    EXPECT_EQ(is_known_message(B, type), !message_name(B, type).empty());
  }
}

}  // namespace
}  // namespace pgsluice::protocol
