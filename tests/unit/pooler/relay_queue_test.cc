// RelayQueue: what a client's relayed notifications do, byte for byte (issue 18's relay).
#include "pooler/session_state/relay_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace pgsluice {
namespace {

void put_int32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

// A NotificationResponse as PostgreSQL sends it: 'A', length, pid, channel, payload.
std::string notification(uint32_t pid, std::string_view channel, std::string_view payload) {
  std::string body;
  put_int32(body, pid);
  body.append(channel).push_back('\0');
  body.append(payload).push_back('\0');
  std::string wire = "A";
  put_int32(wire, static_cast<uint32_t>(body.size() + 4));
  return wire + body;
}

TEST(RelayQueue, SentAtOnceWhenDeliverableAndNothingWaits) {
  RelayQueue q;
  const std::string a = notification(7, "c", "one");
  EXPECT_EQ(q.offer(a, /*deliverable=*/true, /*unsent=*/0, /*limit=*/1024),
            RelayQueue::Offer::send_now);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.bytes(), 0u);
}

TEST(RelayQueue, HeldInOrderWhileNotDeliverableAndBehindWhatWaits) {
  RelayQueue q;
  const std::string a = notification(7, "c", "one");
  const std::string b = notification(8, "c", "two");
  const std::string c = notification(9, "d", "three");
  EXPECT_EQ(q.offer(a, false, 0, 1024), RelayQueue::Offer::queued);
  EXPECT_EQ(q.offer(b, false, 0, 1024), RelayQueue::Offer::queued);
  // Deliverable again, but two wait before it: it waits too, so the order holds.
  EXPECT_EQ(q.offer(c, true, 0, 1024), RelayQueue::Offer::queued);
  EXPECT_EQ(q.bytes(), a.size() + b.size() + c.size());
  std::string out = "X";  // what was already in the output stays first
  q.drain_into(out);
  EXPECT_EQ(out, "X" + a + b + c);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.bytes(), 0u);
}

TEST(RelayQueue, TheBoundCountsWhatWaitsAndWhatTheSocketHasNotTaken) {
  const std::string a = notification(7, "c", std::string(20, 'x'));
  RelayQueue q;
  const size_t limit = 2 * a.size() + 10;
  EXPECT_EQ(q.offer(a, false, 0, limit), RelayQueue::Offer::queued);
  // a waits, 11 bytes unsent on the socket: a second a would be one byte over the limit.
  EXPECT_EQ(q.offer(a, false, 11, limit), RelayQueue::Offer::overflow);
  EXPECT_EQ(q.offer(a, false, 10, limit), RelayQueue::Offer::queued);  // exactly at the limit
  EXPECT_EQ(q.bytes(), 2 * a.size());
  // Sent at once too, it counts against the bound: unsent bytes alone can overflow.
  RelayQueue idle;
  EXPECT_EQ(idle.offer(a, true, limit - a.size() + 1, limit), RelayQueue::Offer::overflow);
  EXPECT_EQ(idle.offer(a, true, limit - a.size(), limit), RelayQueue::Offer::send_now);
}

TEST(RelayQueue, DropsWhatItIsToldAndKeepsTheCount) {
  RelayQueue q;
  const std::string keep1 = notification(1, "stay", "1");
  const std::string drop = notification(2, "gone", "2");
  const std::string keep2 = notification(3, "stay", "3");
  for (const std::string& w : {keep1, drop, keep2}) q.offer(w, false, 0, 1 << 20);
  q.drop_if([&](std::string_view wire) { return wire == drop; });
  EXPECT_EQ(q.bytes(), keep1.size() + keep2.size());
  std::string out;
  q.drain_into(out);
  EXPECT_EQ(out, keep1 + keep2);
}

TEST(RelayQueue, ClearForgetsEverything) {
  RelayQueue q;
  q.offer(notification(1, "c", "p"), false, 0, 1024);
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.bytes(), 0u);
  std::string out;
  q.drain_into(out);
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace pgsluice
