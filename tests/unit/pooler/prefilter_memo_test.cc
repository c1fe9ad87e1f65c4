// PrefilterMemo (pooler/session_state/prefilter_memo.h): one pass of the prefilter per message,
// whoever asks, and never an answer carried over to the next message.
#include "pooler/session_state/prefilter_memo.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace pgsluice {
namespace {

// The buffer's bytes are rewritten in place without forget(): an answer that changes would mean
// a second pass over the text.
TEST(PrefilterMemo, AnswersTheSameTextWithoutASecondPass) {
  std::string buffer = "SELECT 1";
  const std::string_view sql(buffer);
  PrefilterMemo memo;
  EXPECT_FALSE(memo.may_change_session_state(sql));
  buffer = "SET a=1;";  // same size, same place (no reallocation: shorter than the SSO buffer)
  ASSERT_EQ(std::string_view(buffer).data(), sql.data());
  EXPECT_FALSE(memo.may_change_session_state(sql));
  memo.forget();
  EXPECT_TRUE(memo.may_change_session_state(sql));
}

// The next message lands at the same address with the same length after the frame reader
// compacts its buffer: forget() at every message is what keeps its answer its own.
TEST(PrefilterMemo, ForgetsAtTheNextMessage) {
  std::string buffer = "LISTEN a";
  const std::string_view sql(buffer);
  PrefilterMemo memo;
  EXPECT_TRUE(memo.may_change_session_state(sql));
  memo.forget();
  buffer = "SELECT 2";
  EXPECT_FALSE(memo.may_change_session_state(sql));
}

TEST(PrefilterMemo, AnotherTextIsAskedAnew) {
  const std::string set = "SET search_path = s";
  const std::string select = "SELECT * FROM t";
  PrefilterMemo memo;
  EXPECT_TRUE(memo.may_change_session_state(set));
  EXPECT_FALSE(memo.may_change_session_state(select));
  // A shorter view of the same bytes is another text.
  EXPECT_FALSE(memo.may_change_session_state(std::string_view(set).substr(0, 2)));
  EXPECT_FALSE(memo.may_change_session_state(std::string_view()));
  EXPECT_TRUE(memo.may_change_session_state(set));
}

}  // namespace
}  // namespace pgsluice
