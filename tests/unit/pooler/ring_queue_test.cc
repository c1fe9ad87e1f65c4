// RingQueue (pooler/base/ring_queue.h): order at both ends across wrap-around and growth, moves,
// and that a popped element's resources go at once.
#include "pooler/base/ring_queue.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <random>
#include <string>

#include "pooler/core/pending_replies.h"

namespace pgsluice {
namespace {

std::string contents(const RingQueue<std::string>& q) {
  std::string out;
  for (const std::string& s : q) out += s + ",";
  return out;
}

TEST(RingQueue, KeepsOrderAtBothEndsThroughWrapAndGrowth) {
  RingQueue<std::string> q;
  EXPECT_TRUE(q.empty());
  q.push_back("b");
  q.push_back("c");
  q.push_front("a");
  EXPECT_EQ(contents(q), "a,b,c,");
  q.pop_front();
  q.push_back("d");
  q.push_back("e");  // wraps inside the first 4 slots
  EXPECT_EQ(contents(q), "b,c,d,e,");
  q.push_back("f");  // grows from 4 to 8 while wrapped
  q.push_front("z");
  EXPECT_EQ(contents(q), "z,b,c,d,e,f,");
  EXPECT_EQ(q.front(), "z");
  EXPECT_EQ(q.back(), "f");
  EXPECT_EQ(q[2], "c");
  EXPECT_EQ(q.size(), 6U);
  q.clear();
  EXPECT_TRUE(q.empty());
  q.push_back("again");
  EXPECT_EQ(contents(q), "again,");
}

TEST(RingQueue, BehavesAsADequeUnderRandomPushesAndPops) {
  RingQueue<int> q;
  std::deque<int> model;
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    const unsigned op = rng() % 5;
    if (op <= 1) {
      q.push_back(step);
      model.push_back(step);
    } else if (op == 2) {
      q.push_front(step);
      model.push_front(step);
    } else if (!model.empty()) {
      q.pop_front();
      model.pop_front();
    }
    ASSERT_EQ(q.size(), model.size());
    if (!model.empty()) {
      ASSERT_EQ(q.front(), model.front());
      ASSERT_EQ(q.back(), model.back());
      ASSERT_EQ(q[model.size() / 2], model[model.size() / 2]);
    }
  }
}

TEST(RingQueue, AMovedQueueTakesTheElementsAndLeavesAnEmptyOne) {
  RingQueue<std::string> a;
  a.push_back("x");
  a.push_back("y");
  RingQueue<std::string> b = std::move(a);
  EXPECT_EQ(contents(b), "x,y,");
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  a.push_back("reused");
  EXPECT_EQ(contents(a), "reused,");
  a = std::move(b);
  EXPECT_EQ(contents(a), "x,y,");
  // The queue moved in keeps its capacity: it wraps and grows from there.
  a.pop_front();
  for (int i = 0; i < 5; ++i) a.push_back(std::to_string(i));
  EXPECT_EQ(contents(a), "y,0,1,2,3,4,");
}

TEST(RingQueue, APoppedElementIsDestroyedAtOnce) {
  auto counted = std::make_shared<int>(0);
  RingQueue<std::shared_ptr<int>> q;
  q.push_back(counted);
  EXPECT_EQ(counted.use_count(), 2);
  q.pop_front();
  EXPECT_EQ(counted.use_count(), 1);
}

TEST(RingQueue, PushBackDefaultGivesAFreshElementAfterWrapAndGrowth) {
  RingQueue<std::string> q;
  for (int round = 0; round < 40; ++round) {
    // Every slot has held a value before: a reused one must come back empty.
    EXPECT_TRUE(q.push_back_default().empty());
    q.back() = "value " + std::to_string(round) + " long enough to leave the small buffer";
    if (round % 3 != 0) q.pop_front();
  }
  size_t n = 0;
  while (!q.empty()) {
    EXPECT_FALSE(q.front().empty());
    q.pop_front();
    ++n;
  }
  EXPECT_EQ(n, 14u);
}

TEST(PendingReplies, APoppedReplyLeavesNothingForTheNextOne) {
  PendingReplies q;
  auto held = std::make_shared<SqlQueryPlan>();
  for (int round = 0; round < 12; ++round) {
    PendingReply& fresh = q.push_back_default();
    EXPECT_EQ(fresh.kind, PendingKind::query);
    EXPECT_EQ(fresh.statement_id, 0u);
    EXPECT_TRUE(fresh.client_name.empty());
    EXPECT_TRUE(fresh.wire.empty());
    EXPECT_EQ(fresh.sql, nullptr);
    EXPECT_FALSE(fresh.replayable);
    EXPECT_FALSE(fresh.retried);
    if (round % 2 == 0) {
      fresh.kind = PendingKind::parse;
      fresh.statement_id = 7;
      fresh.client_name = "s1";
      fresh.wire = std::string(100, 'P');
      fresh.sql = held;
      fresh.replayable = true;
      fresh.retried = true;
    } else {
      fresh.kind = PendingKind::sync;
    }
    q.pop_front();
  }
  EXPECT_EQ(held.use_count(), 1);  // released when popped, not when the slot is reused
}

}  // namespace
}  // namespace pgsluice
