// Channel's socket IO (pooler/net/channel.h): recv/send on a uv_poll_t. Output the socket does
// not take at once goes out in order as the peer reads; the peer's end and a reset are reported
// after the bytes that came before them; close reports once for both handles. Real sockets
// (a Unix socketpair, loopback TCP) and a real loop, on one thread. On a loop with a FlushBatch
// (a worker's), flush() sends at the end of the turn, once per channel, and nothing queued is
// lost to a close or to the channel going away first.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "pooler/net/channel.h"
#include "pooler/net/flush_batch.h"
#include "tests/unit/pooler/channel_recorder.h"

namespace pgsluice {
namespace {

using Recorder = test_support::ChannelRecorder;

template <class Fn>
void run_until(uv_loop_t* loop, Fn done) {
  for (int i = 0; i < 2000 && !done(); ++i) uv_run(loop, UV_RUN_NOWAIT);
}

class ChannelIo : public ::testing::Test {
 protected:
  void SetUp() override { uv_loop_init(&loop_); }
  void TearDown() override {
    if (peer_ >= 0) ::close(peer_);
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }
  // A channel on one end of a Unix socketpair; peer_ is the other end (blocking).
  void open_pair(Channel& channel) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    peer_ = fds[1];
    ASSERT_EQ(channel.init_pipe(), 0);
    ASSERT_EQ(uv_pipe_open(channel.pipe(), fds[0]), 0);
  }
  // A channel on the accepted end of a loopback TCP connection; peer_ is the connecting end.
  void open_tcp(Channel& channel) {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(listener, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::listen(listener, 1), 0);
    ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    peer_ = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(::connect(peer_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    int accepted = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    ASSERT_GE(accepted, 0);
    ASSERT_EQ(channel.init_tcp(), 0);
    ASSERT_EQ(uv_tcp_open(channel.tcp(), accepted), 0);
  }

  uv_loop_t loop_{};
  int peer_ = -1;
};

TEST_F(ChannelIo, OutputTheSocketDoesNotTakeAtOnceGoesOutInOrder) {
  Recorder owner;
  Channel channel(&loop_, owner, protocol::FramePhase::regular, 1 << 20);
  open_pair(channel);
  // Far more than a socket buffer: the first send takes part, the rest waits for writability.
  std::string big;
  for (int i = 0; big.size() < 4 * 1024 * 1024; ++i) big += std::to_string(i) + ",";
  channel.output() = big;
  channel.flush();
  EXPECT_GT(channel.queued_output(), 0U);
  channel.output() = "tail";  // collects behind what is being written
  channel.flush();
  std::string got;
  char buf[65536];
  while (got.size() < big.size() + 4) {
    uv_run(&loop_, UV_RUN_NOWAIT);
    ssize_t n = ::recv(peer_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_TRUE(got == big + "tail");
  EXPECT_EQ(channel.queued_output(), 0U);
  EXPECT_EQ(channel.bytes_sent(), big.size() + 4);
  EXPECT_GE(owner.drained, 1);
  EXPECT_EQ(owner.error, 0);
  channel.close();
  run_until(&loop_, [&] { return owner.closed == 1; });
  EXPECT_EQ(owner.closed, 1);
}

TEST_F(ChannelIo, ThePeersEndComesAfterItsLastBytes) {
  Recorder owner;
  Channel channel(&loop_, owner, protocol::FramePhase::regular, 1 << 20);
  open_pair(channel);
  channel.start_reading();
  const std::string last(40000, 'x');  // more than one read's worth
  ASSERT_EQ(::write(peer_, last.data(), last.size()), static_cast<ssize_t>(last.size()));
  ::close(peer_);
  peer_ = -1;
  run_until(&loop_, [&] { return owner.error != 0; });
  EXPECT_EQ(owner.error, UV_EOF);
  EXPECT_EQ(owner.received_at_error, last);
  EXPECT_FALSE(channel.reading());
  channel.close();
  run_until(&loop_, [&] { return owner.closed == 1; });
  EXPECT_EQ(owner.closed, 1);
}

TEST_F(ChannelIo, AResetIsReportedAsTheSocketsErrorAfterWhatCameBefore) {
  Recorder owner;
  Channel channel(&loop_, owner, protocol::FramePhase::regular, 1 << 20);
  open_tcp(channel);
  channel.start_reading();
  ASSERT_EQ(::write(peer_, "hello", 5), 5);
  run_until(&loop_, [&] { return owner.received == "hello"; });
  // Unread data at the close makes the kernel reset the connection; SO_LINGER 0 does it anyway.
  linger no_linger{1, 0};
  ASSERT_EQ(::setsockopt(peer_, SOL_SOCKET, SO_LINGER, &no_linger, sizeof(no_linger)), 0);
  ::close(peer_);
  peer_ = -1;
  run_until(&loop_, [&] { return owner.error != 0; });
  EXPECT_EQ(owner.error, UV_ECONNRESET);
  EXPECT_EQ(owner.received_at_error, "hello");
  channel.close();
  run_until(&loop_, [&] { return owner.closed == 1; });
  EXPECT_EQ(owner.closed, 1);
}

TEST_F(ChannelIo, ASendToAClosedPeerIsAnErrorNotASignal) {
  Recorder owner;
  Channel channel(&loop_, owner, protocol::FramePhase::regular, 1 << 20);
  open_pair(channel);
  ::close(peer_);
  peer_ = -1;
  channel.output() = "nobody reads this";
  channel.flush();  // EPIPE without MSG_NOSIGNAL would end the test binary with SIGPIPE
  EXPECT_EQ(owner.error, UV_EPIPE);
  EXPECT_EQ(channel.queued_output(), 0U);
  channel.close();
  run_until(&loop_, [&] { return owner.closed == 1; });
  EXPECT_EQ(owner.closed, 1);
}

TEST_F(ChannelIo, StopReadingLeavesBytesInTheSocketUntilReadingStartsAgain) {
  Recorder owner;
  Channel channel(&loop_, owner, protocol::FramePhase::regular, 1 << 20);
  open_pair(channel);
  channel.start_reading();
  channel.stop_reading();
  ASSERT_EQ(::write(peer_, "later", 5), 5);
  for (int i = 0; i < 20; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(owner.received, "");
  channel.start_reading();
  run_until(&loop_, [&] { return owner.received == "later"; });
  EXPECT_EQ(owner.received, "later");
  channel.close();
  run_until(&loop_, [&] { return owner.closed == 1; });
  EXPECT_EQ(owner.closed, 1);
}

// What the peer can read now, without waiting.
std::string readable_now(int fd) {
  std::string got;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
    got.append(buf, static_cast<size_t>(n));
  return got;
}

// A channel on a socketpair, on a loop whose data is a FlushBatch (as a worker's is).
class BatchedChannelIo : public ChannelIo {
 protected:
  void SetUp() override {
    ChannelIo::SetUp();
    loop_.data = &batch_;
    open_pair(channel_);
  }
  void TearDown() override {
    channel_.close();
    run_until(&loop_, [&] { return owner_.closed == 1; });
    EXPECT_EQ(owner_.closed, 1);
    batch_.run();  // the closed channel's entry, if any, before the batch goes
    loop_.data = nullptr;
    ChannelIo::TearDown();
  }

  FlushBatch batch_;
  Recorder owner_;
  Channel channel_{&loop_, owner_, protocol::FramePhase::regular, 1 << 20};
};

TEST_F(BatchedChannelIo, TheTurnsFlushesGoOutTogetherAtItsEnd) {
  channel_.output() = "first ";
  channel_.flush();
  channel_.output() += "second";
  channel_.flush();  // the channel is in the batch once
  EXPECT_EQ(readable_now(peer_), "");
  EXPECT_EQ(channel_.queued_output(), 12U);
  batch_.run();
  EXPECT_TRUE(batch_.empty());
  EXPECT_EQ(readable_now(peer_), "first second");
  EXPECT_EQ(channel_.bytes_sent(), 12U);
  channel_.output() = "next turn";
  channel_.flush();
  batch_.run();
  EXPECT_EQ(readable_now(peer_), "next turn");
  loop_.data = nullptr;  // a loop without a batch: flush() sends
  channel_.output() = "unbatched";
  channel_.flush();
  EXPECT_EQ(readable_now(peer_), "unbatched");
}

TEST_F(BatchedChannelIo, BulkOutputIsSentAtOnce) {
  channel_.output() = "small";
  channel_.flush();
  EXPECT_EQ(readable_now(peer_), "");
  // A large result or COPY data: what one full read brings is forwarded as it comes, with what
  // the turn had queued before it, so that a turn of many reads does not collect them all.
  const std::string bulk(16 * 1024, 'b');
  channel_.output() += bulk;
  channel_.flush();
  EXPECT_EQ(readable_now(peer_), "small" + bulk);
  batch_.run();  // the channel's entry finds nothing left to send
  EXPECT_EQ(readable_now(peer_), "");
  EXPECT_EQ(owner_.error, 0);
}

TEST_F(BatchedChannelIo, ASendThatTakesAllOfAHighQueueReportsItDrained) {
  // Above the low-water mark: a producer that queued this much pauses until it hears "drained".
  // It saw the queue before the batch sent it, and no write is left to complete later. (Small
  // output joins the batch; what is appended after it, unflushed, goes with it.)
  const std::string chunk = "q" + std::string(Channel::kLowWaterMark + 1000, 'q');
  channel_.output() = "q";
  channel_.flush();
  channel_.output().append(chunk.size() - 1, 'q');
  batch_.run();
  ASSERT_EQ(channel_.queued_output(), 0U) << "the socketpair took less than one send";
  EXPECT_EQ(owner_.drained, 1);
  EXPECT_EQ(readable_now(peer_), chunk);
}

TEST_F(BatchedChannelIo, ACloseSendsWhatAFlushOfTheTurnQueuedBeforeIt) {
  channel_.output() = "the last message";
  channel_.flush();
  channel_.close();
  EXPECT_EQ(readable_now(peer_), "the last message");
  batch_.run();  // the closed channel is still listed: nothing more to send, no error
  EXPECT_EQ(owner_.error, 0);
}

TEST_F(BatchedChannelIo, AChannelDeletedBeforeTheTurnsEndLeavesTheBatch) {
  Recorder gone_owner;
  // Never initialized: such a channel may be deleted at once (its owner gave up before connecting).
  auto gone = std::make_unique<Channel>(&loop_, gone_owner, protocol::FramePhase::regular, 1 << 20);
  gone->output() = "never sent";
  gone->flush();
  channel_.output() = "sent";
  channel_.flush();
  gone.reset();
  batch_.run();  // ASan reports a use of the deleted channel here if it was not forgotten
  EXPECT_EQ(readable_now(peer_), "sent");
  EXPECT_EQ(gone_owner.error, 0);
}

}  // namespace
}  // namespace pgsluice
