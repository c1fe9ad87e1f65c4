// Framing tests: header checks, complete and partial messages, and the FrameReader fed the same
// byte streams in every possible split, which must always yield the same messages.
#include "pgsluice/protocol/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace pgsluice::protocol {
namespace {

using namespace std::string_literals;

// A psql session's simple query, as the server answers it: "SELECT n FROM generate_series(1,3)".
// RowDescription (one int4 column "n"), three DataRows, CommandComplete "SELECT 3",
// ReadyForQuery idle. Written byte by byte from the message format documentation.
const std::string kServerQueryReply =
    // RowDescription: 'T', len 26, 1 field: "n", table 0, column 0, type 23, size 4, typmod -1,
    // format 0.
    "T\0\0\0\x1a"
    "\0\x01"
    "n\0"
    "\0\0\0\0"
    "\0\0"
    "\0\0\0\x17"
    "\0\x04"
    "\xff\xff\xff\xff"
    "\0\0"
    // DataRow: 'D', len 11, 1 column of length 1.
    "D\0\0\0\x0b\0\x01\0\0\0\x01"
    "1"
    "D\0\0\0\x0b\0\x01\0\0\0\x01"
    "2"
    "D\0\0\0\x0b\0\x01\0\0\0\x01"
    "3"
    // CommandComplete: 'C', len 13, "SELECT 3".
    "C\0\0\0\x0dSELECT 3\0"
    // ReadyForQuery: 'Z', len 5, 'I'.
    "Z\0\0\0\x05I"s;

// The client side of the same exchange: Query then Terminate.
const std::string kClientQuery =
    "Q\0\0\0\x2aSELECT n FROM generate_series(1,3) n;\0"
    "X\0\0\0\x04"s;

// A server's reply to a successful startup: AuthenticationOk, ParameterStatus, BackendKeyData,
// ReadyForQuery.
const std::string kServerStartupReply =
    "R\0\0\0\x08\0\0\0\0"
    "S\0\0\0\x18server_version\0"
    "18.0\0"
    "K\0\0\0\x0c\0\0\x12\x34\xde\xad\xbe\xef"
    "Z\0\0\0\x05I"s;

struct Seen {
  char type;
  std::string wire;
  std::string body;
  bool operator==(const Seen&) const = default;
};

// Drains every complete message; stops at need_more (or fails the test on an error).
void drain(FrameReader& reader, std::vector<Seen>& out) {
  for (;;) {
    FrameResult r = reader.next();
    if (r.status == FrameStatus::need_more) return;
    ASSERT_EQ(r.status, FrameStatus::complete) << to_string(r.error);
    out.push_back({r.message.type, std::string(r.message.wire), std::string(r.message.body)});
  }
}

// The same as drain, the way the forwarding loops read: peek, then take once all has arrived.
void drain_by_take(FrameReader& reader, std::vector<Seen>& out) {
  for (;;) {
    HeaderResult h = reader.peek();
    if (h.status == FrameStatus::need_more) return;
    ASSERT_EQ(h.status, FrameStatus::complete) << to_string(h.error);
    if (h.header.wire_size() > reader.unread_size()) return;
    const size_t before = reader.unread_size();
    Message m = reader.take(h.header);
    EXPECT_EQ(reader.unread_size(), before - m.wire.size());
    out.push_back({m.type, std::string(m.wire), std::string(m.body)});
  }
}

using Drain = void (*)(FrameReader&, std::vector<Seen>&);

std::vector<Seen> feed_in_chunks(std::string_view stream, const std::vector<size_t>& cuts,
                                 Drain drain_with = drain) {
  FrameReader reader;
  std::vector<Seen> seen;
  size_t pos = 0;
  for (size_t cut : cuts) {
    reader.append(stream.substr(pos, cut - pos));
    drain_with(reader, seen);
    pos = cut;
  }
  reader.append(stream.substr(pos));
  drain_with(reader, seen);
  EXPECT_EQ(reader.unread_size(), 0u);
  return seen;
}

std::vector<Seen> feed_all_at_once(std::string_view stream) {
  return feed_in_chunks(stream, {});
}

std::vector<Seen> feed_byte_by_byte(std::string_view stream) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < stream.size(); ++i) cuts.push_back(i);
  return feed_in_chunks(stream, cuts);
}

std::string types_of(const std::vector<Seen>& seen) {
  std::string types;
  for (const auto& s : seen) types.push_back(s.type);
  return types;
}

// --- peek_header ---

TEST(PeekHeader, NeedsFiveBytesInRegularPhase) {
  for (size_t n = 0; n < 5; ++n) {
    HeaderResult h =
        peek_header("Q\0\0\0\x05"s.substr(0, n), FramePhase::regular, kDefaultMaxMessageLength);
    EXPECT_EQ(h.status, FrameStatus::need_more) << n;
  }
}

TEST(PeekHeader, ReadsTypeAndLength) {
  HeaderResult h = peek_header("Z\0\0\0\x05"s, FramePhase::regular, kDefaultMaxMessageLength);
  ASSERT_EQ(h.status, FrameStatus::complete);
  EXPECT_EQ(h.header.type, 'Z');
  EXPECT_EQ(h.header.length, 5u);
  EXPECT_EQ(h.header.header_size(), 5u);
  EXPECT_EQ(h.header.wire_size(), 6u);
  EXPECT_EQ(h.header.body_size(), 1u);
}

TEST(PeekHeader, HeaderIsEnoughWithoutTheBody) {
  // A 1 MiB CopyData whose body has not arrived yet: the header alone is complete.
  HeaderResult h = peek_header("d\0\x10\0\x04"s, FramePhase::regular, kDefaultMaxMessageLength);
  ASSERT_EQ(h.status, FrameStatus::complete);
  EXPECT_EQ(h.header.length, 0x100004u);
}

struct BadLengthCase {
  std::string bytes;
  ParseError error;
};

class PeekHeaderRegularErrors : public ::testing::TestWithParam<BadLengthCase> {};

TEST_P(PeekHeaderRegularErrors, Rejects) {
  HeaderResult h = peek_header(GetParam().bytes, FramePhase::regular, 1 << 20);
  EXPECT_EQ(h.status, FrameStatus::error);
  EXPECT_EQ(h.error, GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Lengths, PeekHeaderRegularErrors,
    ::testing::Values(BadLengthCase{"Q\0\0\0\0"s, ParseError::bad_length},
                      BadLengthCase{"Q\0\0\0\x03"s, ParseError::bad_length},
                      BadLengthCase{"Q\x80\0\0\0"s, ParseError::too_long},  // 2^31
                      BadLengthCase{"Q\xff\xff\xff\xff"s, ParseError::too_long},
                      BadLengthCase{"Q\0\x10\0\x01"s, ParseError::too_long},  // max + 1
                      BadLengthCase{"\0\0\0\0\x05"s, ParseError::unknown_type}));

// FrameReader::peek decides the usual regular-phase headers inline: every header, good, bad or
// short, must get peek_header's answer, at both limits and in both phases.
TEST(FrameReader, AMessageGivenBackIsReadAgain) {
  FrameReader reader(FramePhase::regular);
  reader.append("B\0\0\0\x06xyS\0\0\0\x04"s);
  HeaderResult header = reader.peek();
  ASSERT_EQ(header.status, FrameStatus::complete);
  const Message bind = reader.take(header.header);
  EXPECT_EQ(bind.body, "xy");
  reader.give_back(bind);
  EXPECT_EQ(reader.unread_size(), 12u);
  header = reader.peek();
  ASSERT_EQ(header.status, FrameStatus::complete);
  EXPECT_EQ(reader.take(header.header).body, "xy");
  header = reader.peek();
  ASSERT_EQ(header.status, FrameStatus::complete);
  EXPECT_EQ(header.header.type, 'S');
}

TEST(FrameReader, PeekAgreesWithPeekHeader) {
  const std::vector<std::string> headers = {""s,
                                            "Q"s,
                                            "Q\0\0\0"s,
                                            "Q\0\0\0\x04"s,
                                            "Z\0\0\0\x05I"s,
                                            "Q\0\0\0\0"s,
                                            "Q\0\0\0\x03"s,
                                            "Q\x80\0\0\0"s,
                                            "Q\xff\xff\xff\xff"s,
                                            "Q\0\x10\0\x01"s,
                                            "Q\0\x10\0\0"s,
                                            "\0\0\0\0\x05"s,
                                            "\0\0\0\x08\x04\xd2"s,
                                            "D\x7f\xff\xff\xff"s};
  for (FramePhase phase : {FramePhase::regular, FramePhase::startup}) {
    for (uint32_t max : {uint32_t{1} << 20, kDefaultMaxMessageLength}) {
      for (const std::string& bytes : headers) {
        FrameReader reader(phase, max);
        reader.append(bytes);
        const HeaderResult got = reader.peek();
        const HeaderResult want = peek_header(bytes, phase, max);
        EXPECT_EQ(got.status, want.status) << testing::PrintToString(bytes);
        EXPECT_EQ(got.error, want.error) << testing::PrintToString(bytes);
        EXPECT_EQ(got.header.type, want.header.type) << testing::PrintToString(bytes);
        EXPECT_EQ(got.header.length, want.header.length) << testing::PrintToString(bytes);
      }
    }
  }
}

TEST(PeekHeader, LengthAtMaxIsAccepted) {
  HeaderResult h = peek_header("Q\0\x10\0\0"s, FramePhase::regular, 1 << 20);
  EXPECT_EQ(h.status, FrameStatus::complete);
}

TEST(PeekHeader, TwoToThe31IsTooLongEvenWithTheDefaultMaximum) {
  HeaderResult h = peek_header("D\x80\0\0\0"s, FramePhase::regular, kDefaultMaxMessageLength);
  EXPECT_EQ(h.status, FrameStatus::error);
  EXPECT_EQ(h.error, ParseError::too_long);
}

TEST(PeekHeader, StartupNeedsFourBytes) {
  for (size_t n = 0; n < 4; ++n) {
    HeaderResult h =
        peek_header("\0\0\0\x08"s.substr(0, n), FramePhase::startup, kDefaultMaxMessageLength);
    EXPECT_EQ(h.status, FrameStatus::need_more) << n;
  }
}

TEST(PeekHeader, StartupHasNoTypeByte) {
  HeaderResult h =
      peek_header("\0\0\0\x08\x04\xd2\x16\x2f"s, FramePhase::startup, kDefaultMaxMessageLength);
  ASSERT_EQ(h.status, FrameStatus::complete);
  EXPECT_EQ(h.header.type, 0);
  EXPECT_EQ(h.header.length, 8u);
  EXPECT_EQ(h.header.header_size(), 4u);
  EXPECT_EQ(h.header.wire_size(), 8u);
  EXPECT_EQ(h.header.body_size(), 4u);
}

class PeekHeaderStartupErrors : public ::testing::TestWithParam<BadLengthCase> {};

TEST_P(PeekHeaderStartupErrors, Rejects) {
  HeaderResult h = peek_header(GetParam().bytes, FramePhase::startup, kDefaultMaxMessageLength);
  EXPECT_EQ(h.status, FrameStatus::error);
  EXPECT_EQ(h.error, GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(Lengths, PeekHeaderStartupErrors,
                         ::testing::Values(BadLengthCase{"\0\0\0\0"s, ParseError::bad_length},
                                           BadLengthCase{"\0\0\0\x03"s, ParseError::bad_length},
                                           BadLengthCase{"\0\0\0\x04"s, ParseError::bad_length},
                                           BadLengthCase{"\0\0\0\x07"s, ParseError::bad_length},
                                           BadLengthCase{"\0\0\x27\x11"s,
                                                         ParseError::too_long},  // 10001
                                           BadLengthCase{"\x80\0\0\0"s, ParseError::too_long}));

TEST(PeekHeader, StartupLimitIsTenThousand) {
  HeaderResult h = peek_header("\0\0\x27\x10"s, FramePhase::startup, kDefaultMaxMessageLength);
  EXPECT_EQ(h.status, FrameStatus::complete);
}

TEST(PeekHeader, StartupLimitIsTheSmallerMaximum) {
  HeaderResult h = peek_header("\0\0\0\x41"s, FramePhase::startup, 64);
  EXPECT_EQ(h.status, FrameStatus::error);
  EXPECT_EQ(h.error, ParseError::too_long);
  h = peek_header("\0\0\0\x40"s, FramePhase::startup, 64);
  EXPECT_EQ(h.status, FrameStatus::complete);
}

// --- next_message ---

TEST(NextMessage, EmptyBodyMessage) {
  const std::string buf = "S\0\0\0\x04"s;
  FrameResult r = next_message(buf, FramePhase::regular, kDefaultMaxMessageLength);
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.type, 'S');
  EXPECT_TRUE(r.message.body.empty());
  EXPECT_EQ(r.message.wire, "S\0\0\0\x04"s);
}

TEST(NextMessage, PartialBodyNeedsMore) {
  const std::string msg = "C\0\0\0\x0dSELECT 3\0"s;
  for (size_t n = 0; n < msg.size(); ++n) {
    FrameResult r = next_message(std::string_view(msg).substr(0, n), FramePhase::regular, 1 << 20);
    EXPECT_EQ(r.status, FrameStatus::need_more) << n;
  }
  FrameResult r = next_message(msg, FramePhase::regular, 1 << 20);
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.body, "SELECT 3\0"s);
}

TEST(NextMessage, ViewsPointIntoTheBuffer) {
  const std::string buf = "Z\0\0\0\x05I"s;
  FrameResult r = next_message(buf, FramePhase::regular, kDefaultMaxMessageLength);
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.wire.data(), buf.data());
  EXPECT_EQ(r.message.body.data(), buf.data() + 5);
  EXPECT_EQ(r.message.body, "I");
}

TEST(NextMessage, TwoMessagesInOneBufferYieldTheFirst) {
  const std::string buf =
      "1\0\0\0\x04"
      "2\0\0\0\x04"s;
  FrameResult r = next_message(buf, FramePhase::regular, kDefaultMaxMessageLength);
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.type, '1');
  EXPECT_EQ(r.message.wire.size(), 5u);
  r = next_message(std::string_view(buf).substr(5), FramePhase::regular, kDefaultMaxMessageLength);
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.type, '2');
}

TEST(NextMessage, StartupPacketWireIsLengthAndBody) {
  const std::string ssl = "\0\0\0\x08\x04\xd2\x16\x2f"s;
  FrameResult r = next_message(ssl, FramePhase::startup, kDefaultMaxMessageLength);
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.type, 0);
  EXPECT_EQ(r.message.wire, ssl);
  EXPECT_EQ(r.message.body, "\x04\xd2\x16\x2f"s);
}

TEST(NextMessage, ErrorsPassThrough) {
  FrameResult r = next_message("Q\0\0\0\x03"s, FramePhase::regular, kDefaultMaxMessageLength);
  EXPECT_EQ(r.status, FrameStatus::error);
  EXPECT_EQ(r.error, ParseError::bad_length);
}

// --- FrameReader over realistic streams ---

TEST(FrameReader, ServerQueryReplyAllAtOnce) {
  std::vector<Seen> seen = feed_all_at_once(kServerQueryReply);
  EXPECT_EQ(types_of(seen), "TDDDCZ");
  EXPECT_EQ(seen[1].body,
            "\0\x01\0\0\0\x01"
            "1"s);
  EXPECT_EQ(seen[4].body, "SELECT 3\0"s);
  EXPECT_EQ(seen[5].body, "I");
}

TEST(FrameReader, ServerQueryReplyByteByByte) {
  EXPECT_EQ(feed_byte_by_byte(kServerQueryReply), feed_all_at_once(kServerQueryReply));
}

class StreamSplit : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamSplit, EverySplitPointGivesTheSameMessages) {
  const std::string& stream = GetParam();
  const std::vector<Seen> expected = feed_all_at_once(stream);
  ASSERT_FALSE(expected.empty());
  for (size_t cut = 1; cut < stream.size(); ++cut) {
    EXPECT_EQ(feed_in_chunks(stream, {cut}), expected) << "split at " << cut;
  }
  for (size_t a = 1; a < stream.size(); a += 3) {
    for (size_t b = a + 1; b < stream.size(); b += 5) {
      EXPECT_EQ(feed_in_chunks(stream, {a, b}), expected) << "split at " << a << "," << b;
    }
  }
  EXPECT_EQ(feed_byte_by_byte(stream), expected);
}

TEST_P(StreamSplit, PeekThenTakeGivesWhatNextGivesAtEverySplitPoint) {
  const std::string& stream = GetParam();
  const std::vector<Seen> expected = feed_all_at_once(stream);
  EXPECT_EQ(feed_in_chunks(stream, {}, drain_by_take), expected);
  for (size_t cut = 1; cut < stream.size(); ++cut) {
    EXPECT_EQ(feed_in_chunks(stream, {cut}, drain_by_take), expected) << "split at " << cut;
  }
  std::vector<size_t> every_byte;
  for (size_t i = 1; i < stream.size(); ++i) every_byte.push_back(i);
  EXPECT_EQ(feed_in_chunks(stream, every_byte, drain_by_take), expected);
}

TEST_P(StreamSplit, SeededRandomChunksGiveTheSameMessages) {
  const std::string& stream = GetParam();
  const std::vector<Seen> expected = feed_all_at_once(stream);
  std::mt19937 rng(20240611);  // fixed seed: the same chunkings on every run
  for (int round = 0; round < 50; ++round) {
    std::vector<size_t> cuts;
    size_t pos = 0;
    for (;;) {
      pos += std::uniform_int_distribution<size_t>(1, 17)(rng);
      if (pos >= stream.size()) break;
      cuts.push_back(pos);
    }
    EXPECT_EQ(feed_in_chunks(stream, cuts), expected) << "round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(Streams, StreamSplit,
                         ::testing::Values(kServerQueryReply, kClientQuery, kServerStartupReply,
                                           kServerStartupReply + kServerQueryReply));

TEST(FrameReader, ClientQueryStream) {
  std::vector<Seen> seen = feed_all_at_once(kClientQuery);
  ASSERT_EQ(types_of(seen), "QX");
  EXPECT_EQ(seen[0].body, "SELECT n FROM generate_series(1,3) n;\0"s);
  EXPECT_TRUE(seen[1].body.empty());
}

TEST(FrameReader, StartupPhaseThenRegular) {
  // StartupMessage 3.0 user=alice, then (after the pooler switches phase) a Query.
  const std::string startup =
      "\0\0\0\x14\0\x03\0\0user\0"
      "alice\0\0"s;
  FrameReader reader(FramePhase::startup);
  reader.append(startup + "Q\0\0\0\x05\0"s);
  FrameResult r = reader.next();
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.type, 0);
  EXPECT_EQ(r.message.wire, startup);
  EXPECT_EQ(r.message.body.size(), startup.size() - 4);
  reader.set_phase(FramePhase::regular);
  EXPECT_EQ(reader.phase(), FramePhase::regular);
  r = reader.next();
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.type, 'Q');
  EXPECT_EQ(reader.next().status, FrameStatus::need_more);
}

TEST(FrameReader, NeedMoreLeavesTheCursor) {
  FrameReader reader;
  reader.append("C\0\0\0\x0dSEL"s);
  EXPECT_EQ(reader.next().status, FrameStatus::need_more);
  EXPECT_EQ(reader.unread_size(), 8u);
  reader.append("ECT 3\0"s);
  FrameResult r = reader.next();
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.body, "SELECT 3\0"s);
  EXPECT_EQ(reader.unread_size(), 0u);
}

TEST(FrameReader, ErrorDoesNotConsume) {
  FrameReader reader;
  reader.append("Q\0\0\0\x02zz"s);
  FrameResult r = reader.next();
  EXPECT_EQ(r.status, FrameStatus::error);
  EXPECT_EQ(r.error, ParseError::bad_length);
  EXPECT_EQ(reader.unread_size(), 7u);
}

TEST(FrameReader, MaxLengthApplies) {
  FrameReader reader(FramePhase::regular, 16);
  EXPECT_EQ(reader.max_length(), 16u);
  reader.append("d\0\0\0\x11"s);
  EXPECT_EQ(reader.next().error, ParseError::too_long);
  reader.set_max_length(17);
  EXPECT_EQ(reader.next().status, FrameStatus::need_more);
}

TEST(FrameReader, StartupPacketAboveLimitIsTooLong) {
  FrameReader reader(FramePhase::startup);
  reader.append("\0\0\x27\x11"s);
  EXPECT_EQ(reader.peek().error, ParseError::too_long);
  EXPECT_EQ(reader.next().error, ParseError::too_long);
}

TEST(FrameReader, WritableAndCommit) {
  FrameReader reader;
  const std::string msg = "Z\0\0\0\x05T"s;
  char* w = reader.writable(64);
  ASSERT_NE(w, nullptr);
  EXPECT_GE(reader.writable_size(), 64u);
  std::memcpy(w, msg.data(), 3);
  reader.commit(3);
  EXPECT_EQ(reader.unread(), msg.substr(0, 3));
  EXPECT_EQ(reader.next().status, FrameStatus::need_more);
  w = reader.writable(1);
  std::memcpy(w, msg.data() + 3, 3);
  reader.commit(3);
  FrameResult r = reader.next();
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.wire, msg);
}

TEST(FrameReader, CommitNeverExceedsWritable) {
  FrameReader reader;
  reader.writable(8);
  const size_t free = reader.writable_size();
  reader.commit(free + 100);
  EXPECT_EQ(reader.unread_size(), free);
  EXPECT_EQ(reader.writable_size(), 0u);
}

TEST(FrameReader, GrowsForALargeMessage) {
  std::string body(100000, 'x');
  std::string msg = "d"s + "\0\x01\x86\xa4"s + body;  // length 100004
  FrameReader reader;
  for (size_t pos = 0; pos < msg.size(); pos += 4096) {
    reader.append(std::string_view(msg).substr(pos, 4096));
  }
  EXPECT_GE(reader.capacity(), msg.size());
  FrameResult r = reader.next();
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.body, body);
}

TEST(FrameReader, CompactMovesUnreadBytesToTheFront) {
  FrameReader reader;
  reader.append(
      "1\0\0\0\x04"
      "2\0\0"s);
  ASSERT_EQ(reader.next().status, FrameStatus::complete);
  EXPECT_EQ(reader.unread(), "2\0\0"s);
  reader.compact();
  EXPECT_EQ(reader.unread(), "2\0\0"s);
  reader.append("\0\x04"s);
  FrameResult r = reader.next();
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.type, '2');
}

TEST(FrameReader, WritableReusesConsumedSpace) {
  FrameReader reader;
  reader.writable(64);
  const size_t cap = reader.capacity();
  // Fill and consume repeatedly: the buffer must not grow without bound.
  for (int i = 0; i < 1000; ++i) {
    reader.append("Z\0\0\0\x05I"s);
    ASSERT_EQ(reader.next().status, FrameStatus::complete);
  }
  EXPECT_EQ(reader.capacity(), cap);
}

TEST(FrameReader, ShrinkIfIdleReleasesALargeBuffer) {
  FrameReader reader;
  reader.writable(1 << 20);
  EXPECT_GE(reader.capacity(), size_t{1} << 20);
  reader.append("Z\0\0\0\x05I"s);
  reader.shrink_if_idle(1024);  // not idle: an unread message
  EXPECT_GE(reader.capacity(), size_t{1} << 20);
  ASSERT_EQ(reader.next().status, FrameStatus::complete);
  reader.shrink_if_idle(1024);
  EXPECT_LE(reader.capacity(), 1024u);
  EXPECT_EQ(reader.unread_size(), 0u);
  reader.append("Z\0\0\0\x05T"s);
  EXPECT_EQ(reader.next().status, FrameStatus::complete);
}

TEST(FrameReader, PeekAndSkipForwardAMessageInPieces) {
  FrameReader reader;
  reader.append(
      "d\0\0\0\x0c"
      "abcd"s);
  HeaderResult h = reader.peek();
  ASSERT_EQ(h.status, FrameStatus::complete);
  EXPECT_EQ(h.header.type, 'd');
  EXPECT_EQ(h.header.wire_size(), 13u);
  EXPECT_EQ(reader.unread_size(), 9u);  // peek consumes nothing
  reader.skip(9);                       // forwarded the first 9 bytes
  reader.append(
      "efgh"
      "c\0\0\0\x04"s);
  reader.skip(4);  // the rest of the CopyData
  FrameResult r = reader.next();
  ASSERT_EQ(r.status, FrameStatus::complete);
  EXPECT_EQ(r.message.type, 'c');
}

TEST(FrameReader, SkipStopsAtTheEnd) {
  FrameReader reader;
  reader.append("abc");
  reader.skip(100);
  EXPECT_EQ(reader.unread_size(), 0u);
}

TEST(FrameReader, AppendEmptyIsHarmless) {
  FrameReader reader;
  reader.append("");
  EXPECT_EQ(reader.unread_size(), 0u);
  EXPECT_EQ(reader.next().status, FrameStatus::need_more);
  EXPECT_EQ(reader.peek().status, FrameStatus::need_more);
}

}  // namespace
}  // namespace pgsluice::protocol
