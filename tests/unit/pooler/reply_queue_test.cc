// ReplyQueue (reply_queue.h), byte by byte: real client messages and server replies, built
// with protocol/'s writers and cut by the frame reader as a server connection cuts them, and
// what is owed after each, and where the transaction boundary is.
#include "pooler/link/reply_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/writer.h"

namespace pgsluice {
namespace {

namespace pp = pgsluice::protocol;
namespace fe = pgsluice::protocol::frontend;
namespace be = pgsluice::protocol::backend;
using pp::TransactionStatus;

// The message types in `bytes`, in order, as the frame reader cuts them.
std::vector<pp::Message> cut(pp::FrameReader& reader, const std::string& bytes) {
  reader.append(bytes);
  std::vector<pp::Message> messages;
  for (;;) {
    pp::FrameResult frame = reader.next();
    if (frame.status != pp::FrameStatus::complete) {
      EXPECT_EQ(frame.status, pp::FrameStatus::need_more);
      return messages;
    }
    messages.push_back(frame.message);
  }
}

class ReplyQueueTest : public ::testing::Test {
 protected:
  // What the client sends, fed to the queue message by message.
  void client(const std::string& bytes) {
    pp::FrameReader reader;
    std::vector<pp::Message> messages = cut(reader, bytes);
    ASSERT_FALSE(messages.empty());
    for (const pp::Message& m : messages) queue.on_client_message(m.type);
  }
  // What the server answers, fed one byte at a time (a reply counts once it is whole).
  void server(const std::string& bytes) {
    pp::FrameReader reader;
    size_t fed = 0;
    for (char byte : bytes) {
      for (const pp::Message& m : cut(reader, std::string(1, byte))) {
        queue.on_client_reply(m);
        ++fed;
      }
    }
    ASSERT_GT(fed, 0u);
    EXPECT_EQ(reader.unread_size(), 0u);
  }
  // A message built by hand where protocol/ has no writer (the pooler never sends it).
  static std::string message(char type, std::string_view body = {}) {
    std::string out;
    pp::MessageWriter(out, type).bytes(body).end();
    return out;
  }
  static std::string ready(TransactionStatus status) {
    std::string out;
    pp::write_ready_for_query(out, status);
    return out;
  }
  static std::string command_complete(std::string_view tag) {
    std::string out;
    pp::write_command_complete(out, tag);
    return out;
  }
  static std::string error() {
    std::string out;
    pp::write_error_response(out, pp::ErrorNotice{.code = "42601", .message = "syntax error"});
    return out;
  }

  ReplyQueue queue;
};

TEST_F(ReplyQueueTest, StartsAtTheBoundary) {
  EXPECT_TRUE(queue.at_transaction_boundary());
  EXPECT_FALSE(queue.request_open());
  EXPECT_EQ(queue.transaction_status(), TransactionStatus::idle);
}

TEST_F(ReplyQueueTest, SimpleQueryOwesOneReadyForQuery) {
  std::string query;
  pp::write_query(query, "SELECT 1");
  client(query);
  EXPECT_EQ(queue.client_ready_owed(), 1u);
  EXPECT_FALSE(queue.at_transaction_boundary());
  server(command_complete("SELECT 1"));
  EXPECT_EQ(queue.client_ready_owed(), 1u);
  EXPECT_FALSE(queue.at_transaction_boundary());
  server(ready(TransactionStatus::idle));
  EXPECT_EQ(queue.client_ready_owed(), 0u);
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, TransactionBlockKeepsTheLink) {
  std::string begin;
  pp::write_query(begin, "BEGIN");
  client(begin);
  server(command_complete("BEGIN") + ready(TransactionStatus::in_block));
  EXPECT_EQ(queue.client_ready_owed(), 0u);
  EXPECT_EQ(queue.transaction_status(), TransactionStatus::in_block);
  EXPECT_FALSE(queue.request_open());
  EXPECT_FALSE(queue.at_transaction_boundary());
  std::string bad;
  pp::write_query(bad, "SELEC");
  client(bad);
  server(error() + ready(TransactionStatus::failed));
  EXPECT_EQ(queue.transaction_status(), TransactionStatus::failed);
  EXPECT_FALSE(queue.at_transaction_boundary());
  std::string rollback;
  pp::write_query(rollback, "ROLLBACK");
  client(rollback);
  server(command_complete("ROLLBACK") + ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, ExtendedBatchIsOpenUntilItsSync) {
  std::string batch;
  pp::write_parse(batch, "", "SELECT $1", {});
  pp::write_bind_renamed(batch, "", "", std::string_view("\0\0\0\0\0\0", 6));
  pp::write_describe(batch, pp::DescribeTarget::portal, "");
  pp::write_execute(batch, "", 0);
  client(batch);
  EXPECT_TRUE(queue.extended_open());
  EXPECT_EQ(queue.client_ready_owed(), 0u);
  EXPECT_TRUE(queue.request_open());
  std::string sync;
  pp::write_sync(sync);
  client(sync);
  EXPECT_FALSE(queue.extended_open());
  EXPECT_EQ(queue.client_ready_owed(), 1u);
  std::string replies;
  pp::write_parse_complete(replies);
  pp::write_bind_complete(replies);
  pp::write_no_data(replies);
  replies += command_complete("SELECT 1");
  server(replies);
  EXPECT_FALSE(queue.at_transaction_boundary());
  server(ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, PipelinedSyncsOweOneReadyForQueryEach) {
  std::string batches;
  for (int i = 0; i < 3; ++i) {
    pp::write_bind_renamed(batches, "", "s", std::string_view("\0\0\0\0\0\0", 6));
    pp::write_execute(batches, "", 0);
    pp::write_sync(batches);
  }
  client(batches);
  EXPECT_EQ(queue.client_ready_owed(), 3u);
  EXPECT_FALSE(queue.extended_open());
  for (uint32_t left = 2;; --left) {
    std::string replies;
    pp::write_bind_complete(replies);
    replies += command_complete("INSERT 0 1") + ready(TransactionStatus::idle);
    server(replies);
    EXPECT_EQ(queue.client_ready_owed(), left);
    // 'I' with more Syncs owed is not a boundary: the next batch's replies are on their way.
    EXPECT_EQ(queue.at_transaction_boundary(), left == 0);
    if (left == 0) break;
  }
}

TEST_F(ReplyQueueTest, ErrorSkipsToTheSync) {
  std::string batch;
  pp::write_parse(batch, "", "SELEC", {});
  pp::write_bind_renamed(batch, "", "", std::string_view("\0\0\0\0\0\0", 6));
  pp::write_execute(batch, "", 0);
  pp::write_sync(batch);
  client(batch);
  // PostgreSQL answers the Parse with an error and skips Bind and Execute: only the Sync's
  // ReadyForQuery follows.
  server(error());
  EXPECT_EQ(queue.client_ready_owed(), 1u);
  EXPECT_FALSE(queue.at_transaction_boundary());
  server(ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, FlushAnswersWithoutEndingTheBatch) {
  std::string batch;
  pp::write_parse(batch, "s1", "SELECT 1", {});
  pp::write_flush(batch);
  client(batch);
  std::string parsed;
  pp::write_parse_complete(parsed);
  server(parsed);
  EXPECT_TRUE(queue.extended_open());
  EXPECT_EQ(queue.client_ready_owed(), 0u);
  EXPECT_FALSE(queue.at_transaction_boundary());
  std::string sync;
  pp::write_sync(sync);
  client(sync);
  server(ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, FunctionCallOwesOneReadyForQuery) {
  // FunctionCall: function oid, no argument formats, no arguments, text result.
  client(message(fe::kFunctionCall, std::string_view("\0\0\x04\xd2\0\0\0\0\0\0", 10)));
  EXPECT_EQ(queue.client_ready_owed(), 1u);
  server(message(be::kFunctionCallResponse, std::string_view("\xff\xff\xff\xff", 4)));
  EXPECT_FALSE(queue.at_transaction_boundary());
  server(ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, CopyInEndsWithTheClientsCopyDone) {
  std::string copy;
  pp::write_query(copy, "COPY t FROM STDIN");
  client(copy);
  server(message(be::kCopyInResponse, std::string_view("\0\0\0", 3)));
  EXPECT_EQ(queue.copy(), ReplyQueue::Copy::in);
  client(message(fe::kCopyData, "1\n") + message(fe::kCopyData, "2\n"));
  EXPECT_EQ(queue.copy(), ReplyQueue::Copy::in);
  client(message(fe::kCopyDone));
  EXPECT_EQ(queue.copy(), ReplyQueue::Copy::none);
  EXPECT_FALSE(queue.at_transaction_boundary());  // the Query's ReadyForQuery is owed
  server(command_complete("COPY 2") + ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
}

// libpq's COPY in the extended protocol (PQexecParams, or pipeline mode): the Sync after the
// Execute reaches PostgreSQL in COPY mode, which ignores it; only the Sync after the CopyDone gets
// a ReadyForQuery (PgBouncer's clear_outstanding_requests_until, #1471).
TEST_F(ReplyQueueTest, ExtendedCopyInOwesOnlyTheSyncAfterItsCopyDone) {
  std::string batch;
  pp::write_parse(batch, "", "COPY t FROM STDIN", {});
  pp::write_bind_renamed(batch, "", "", std::string_view("\0\0\0\0\0\0", 6));
  pp::write_execute(batch, "", 0);
  pp::write_sync(batch);
  client(batch);
  EXPECT_EQ(queue.client_ready_owed(), 1u);
  std::string replies;
  pp::write_parse_complete(replies);
  pp::write_bind_complete(replies);
  server(replies + message(be::kCopyInResponse, std::string_view("\0\0\0", 3)));
  EXPECT_EQ(queue.client_ready_owed(), 0u);  // that Sync is read in COPY mode
  std::string sync;
  pp::write_sync(sync);
  client(message(fe::kCopyData, "1\n") + message(fe::kCopyDone) + sync);
  EXPECT_EQ(queue.client_ready_owed(), 1u);
  EXPECT_FALSE(queue.at_transaction_boundary());
  server(command_complete("COPY 1") + ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, SimpleCopyInKeepsItsQuerysReadyForQuery) {
  std::string sync;
  pp::write_sync(sync);
  std::string copy;
  pp::write_query(copy, "COPY t FROM STDIN");
  client(sync + copy);  // a Sync answered before the COPY starts is not one it ignores
  server(ready(TransactionStatus::idle) +
         message(be::kCopyInResponse, std::string_view("\0\0\0", 3)));
  EXPECT_EQ(queue.client_ready_owed(), 1u);
  client(message(fe::kCopyDone));
  server(command_complete("COPY 0") + ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, CopyFailEndsCopyIn) {
  std::string copy;
  pp::write_query(copy, "COPY t FROM STDIN");
  client(copy);
  server(message(be::kCopyInResponse, std::string_view("\0\0\0", 3)));
  client(message(fe::kCopyFail, std::string_view("no\0", 3)));
  EXPECT_EQ(queue.copy(), ReplyQueue::Copy::none);
  server(error() + ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, CopyOutEndsWithTheServersCopyDone) {
  std::string copy;
  pp::write_query(copy, "COPY t TO STDOUT");
  client(copy);
  server(message(be::kCopyOutResponse, std::string_view("\0\0\0", 3)) +
         message(be::kCopyData, "1\n"));
  EXPECT_EQ(queue.copy(), ReplyQueue::Copy::out);
  EXPECT_TRUE(queue.copy_out());
  EXPECT_FALSE(queue.copy_in());
  server(message(be::kCopyDone));
  EXPECT_EQ(queue.copy(), ReplyQueue::Copy::none);
  server(command_complete("COPY 1") + ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, CopyBothEndsOneSideAtATime) {
  std::string start;
  pp::write_query(start, "START_REPLICATION");
  client(start);
  server(message(be::kCopyBothResponse, std::string_view("\0\0\0", 3)));
  EXPECT_EQ(queue.copy(), ReplyQueue::Copy::both);
  client(message(fe::kCopyDone));
  EXPECT_EQ(queue.copy(), ReplyQueue::Copy::out);
  server(message(be::kCopyDone));
  EXPECT_EQ(queue.copy(), ReplyQueue::Copy::none);
}

TEST_F(ReplyQueueTest, ReadyForQueryEndsACopyLeftOpen) {
  std::string copy;
  pp::write_query(copy, "COPY t TO STDOUT");
  client(copy);
  server(message(be::kCopyOutResponse, std::string_view("\0\0\0", 3)));
  server(error() + ready(TransactionStatus::idle));  // the COPY failed inside
  EXPECT_EQ(queue.copy(), ReplyQueue::Copy::none);
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, InternalQueriesAreOwedApart) {
  queue.on_internal_query();
  EXPECT_EQ(queue.internal_ready_owed(), 1u);
  EXPECT_TRUE(queue.request_open());
  EXPECT_FALSE(queue.at_transaction_boundary());
  EXPECT_TRUE(queue.on_internal_ready(TransactionStatus::idle));
  EXPECT_TRUE(queue.at_transaction_boundary());
  EXPECT_FALSE(queue.on_internal_ready(TransactionStatus::idle));  // none was owed
}

// Several of the pooler's queries sent at once (a cleaning's reset, lookup and verify): the
// replies before each ReadyForQuery are the oldest owed one's, whose tag internal_front gives.
TEST_F(ReplyQueueTest, InternalQueriesAnswerInTheOrderSent) {
  EXPECT_EQ(queue.internal_front(), 0);
  queue.on_internal_query(3);
  queue.on_internal_query(0);
  queue.on_internal_query(5);
  EXPECT_EQ(queue.internal_ready_owed(), 3u);
  EXPECT_EQ(queue.internal_front(), 3);
  EXPECT_TRUE(queue.on_internal_ready(TransactionStatus::idle));
  EXPECT_EQ(queue.internal_front(), 0);
  EXPECT_TRUE(queue.on_internal_ready(TransactionStatus::idle));
  EXPECT_EQ(queue.internal_front(), 5);
  queue.on_internal_query(7);  // sent while the others are answered: after them
  EXPECT_TRUE(queue.on_internal_ready(TransactionStatus::in_block));
  EXPECT_EQ(queue.transaction_status(), TransactionStatus::in_block);
  EXPECT_EQ(queue.internal_front(), 7);
  EXPECT_TRUE(queue.on_internal_ready(TransactionStatus::idle));
  EXPECT_EQ(queue.internal_ready_owed(), 0u);
  EXPECT_EQ(queue.internal_front(), 0);
  EXPECT_TRUE(queue.at_transaction_boundary());
}

TEST_F(ReplyQueueTest, MalformedReadyForQueryCountsAsFailed) {
  std::string query;
  pp::write_query(query, "SELECT 1");
  client(query);
  server(message(be::kReadyForQuery, "X"));
  EXPECT_EQ(queue.client_ready_owed(), 0u);
  EXPECT_EQ(queue.transaction_status(), TransactionStatus::failed);
  EXPECT_FALSE(queue.at_transaction_boundary());
}

}  // namespace
}  // namespace pgsluice
