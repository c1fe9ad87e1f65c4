// The body of a test fixture's single message, for the frontend and backend parser tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "pgsluice/protocol/frame.h"

namespace pgsluice::protocol {

// The framer checks the length word first, so a fixture with a wrong length fails here rather
// than in the parser.
inline std::string_view body_of(const std::string& wire, char expected_type) {
  FrameResult r = next_message(wire, FramePhase::regular, kDefaultMaxMessageLength);
  EXPECT_EQ(r.status, FrameStatus::complete) << to_string(r.error);
  EXPECT_EQ(r.message.wire.size(), wire.size()) << "length word does not cover the fixture";
  EXPECT_EQ(r.message.type, expected_type);
  return r.message.body;
}

}  // namespace pgsluice::protocol
