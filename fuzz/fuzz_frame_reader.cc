// Fuzz target: the FrameReader and next_message/peek_header, both phases.
// Input: byte 0 = flags (bit 0: start in the startup phase; bits 1-2: the maximum message length;
// bit 3: forward long messages in pieces with peek()+skip() as the pooler does), bytes 1-2 = seed
// of the piece sizes, the rest = the byte stream. The stream is fed in pseudo-random pieces (sizes
// 1..64, sometimes 0 or large) and every message that comes out must be exactly what
// next_message() finds on the whole stream at that offset: splitting never changes framing.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "pgsluice/protocol/bytes.h"
#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/startup.h"

using namespace pgsluice::protocol;

namespace {

struct Expected {
  char type;
  std::string wire;
};

// A StartupMessage (not SSLRequest/GSSENCRequest/CancelRequest) ends the startup phase.
bool ends_startup_phase(const Message& m) {
  if (m.type != 0 || m.body.size() < 4) return false;
  const int32_t code = static_cast<int32_t>(load_u32(m.body.data()));
  return code != kSSLRequestCode && code != kGSSENCRequestCode && code != kCancelRequestCode;
}

uint32_t max_length_for(uint8_t flags) {
  switch ((flags >> 1) & 3) {
    case 0:
      return kDefaultMaxMessageLength;
    case 1:
      return 8192;
    case 2:
      return 100;
    default:
      return 4;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  uint32_t rng = (uint32_t{data[1]} << 8 | data[2]) * 2654435761u + 1;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 3, size - 3);
  const FramePhase first_phase = (flags & 1) ? FramePhase::startup : FramePhase::regular;
  const uint32_t max_length = max_length_for(flags);
  const bool streaming = (flags & 8) != 0;

  // The reference: the whole stream at once.
  std::vector<Expected> expected;
  bool expect_error = false;
  ParseError expected_error = ParseError::ok;
  {
    FramePhase phase = first_phase;
    size_t pos = 0;
    for (;;) {
      const FrameResult r = next_message(stream.substr(pos), phase, max_length);
      if (r.status == FrameStatus::need_more) break;
      if (r.status == FrameStatus::error) {
        FUZZ_CHECK(r.error != ParseError::ok);
        expect_error = true;
        expected_error = r.error;
        break;
      }
      FUZZ_CHECK(!r.message.wire.empty());
      FUZZ_CHECK(r.message.wire.data() == stream.data() + pos);
      FUZZ_CHECK(pgsluice::fuzz::within(r.message.wire.data(), r.message.wire.size(),
                                        r.message.body.data(), r.message.body.size()));
      FUZZ_CHECK(r.message.wire.size() == r.message.body.size() + (r.message.type == 0 ? 4u : 5u));
      expected.push_back({r.message.type, std::string(r.message.wire)});
      pos += r.message.wire.size();
      if (phase == FramePhase::startup && ends_startup_phase(r.message)) {
        phase = FramePhase::regular;
      }
    }
  }

  // The same stream in pieces.
  FrameReader reader(first_phase, max_length);
  size_t fed = 0;
  size_t got = 0;
  bool got_error = false;
  size_t skipping = 0;  // bytes of a message being forwarded in pieces that are still to come
  std::string skipped;  // what was skipped of it so far
  char skipped_type = 0;
  while (!got_error) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    size_t piece = 1 + rng % 64;
    if (rng % 97 == 0) piece = 0;
    if (rng % 89 == 0) piece = 9000;
    piece = std::min(piece, stream.size() - fed);
    if (rng % 3 == 0) {
      reader.append(stream.substr(fed, piece));
    } else {
      char* w = reader.writable(piece);
      FUZZ_CHECK(reader.writable_size() >= piece);
      if (piece) std::memcpy(w, stream.data() + fed, piece);
      reader.commit(piece);
    }
    fed += piece;

    for (;;) {
      if (skipping > 0) {
        const size_t n = std::min(skipping, reader.unread_size());
        if (n == 0) break;
        skipped.append(reader.unread().substr(0, n));
        reader.skip(n);
        skipping -= n;
        if (skipping > 0) break;
        FUZZ_CHECK(got < expected.size());
        FUZZ_CHECK(expected[got].type == skipped_type);
        FUZZ_CHECK(expected[got].wire == skipped);
        if (reader.phase() == FramePhase::startup) {
          // A startup packet is never forwarded in pieces by this target (see below).
          FUZZ_CHECK(false);
        }
        ++got;
        continue;
      }
      const HeaderResult head = reader.peek();
      if (head.status == FrameStatus::error) {
        FUZZ_CHECK(expect_error && got == expected.size() && head.error == expected_error);
        got_error = true;
        break;
      }
      if (head.status == FrameStatus::need_more) {
        FUZZ_CHECK(reader.next().status == FrameStatus::need_more);
        break;
      }
      if (streaming && reader.phase() == FramePhase::regular &&
          head.header.wire_size() > reader.unread_size() && reader.unread_size() >= 5) {
        skipping = head.header.wire_size();
        skipped.clear();
        skipped_type = head.header.type;
        continue;
      }
      const FrameResult r = reader.next();
      if (r.status == FrameStatus::need_more) {
        FUZZ_CHECK(head.header.wire_size() > reader.unread_size());
        break;
      }
      FUZZ_CHECK(r.status == FrameStatus::complete);
      FUZZ_CHECK(got < expected.size());
      FUZZ_CHECK(r.message.type == expected[got].type);
      FUZZ_CHECK(r.message.wire == expected[got].wire);
      FUZZ_CHECK(r.message.wire.size() == head.header.wire_size());
      ++got;
      if (reader.phase() == FramePhase::startup && ends_startup_phase(r.message)) {
        reader.set_phase(FramePhase::regular);
      }
      if (rng % 7 == 0) reader.compact();
    }
    if (reader.unread_size() == 0 && rng % 5 == 0) reader.shrink_if_idle(rng % 2 ? 0 : 4096);
    if (fed == stream.size()) break;
  }
  FUZZ_CHECK(got == expected.size());
  FUZZ_CHECK(got_error == expect_error);
  return 0;
}
