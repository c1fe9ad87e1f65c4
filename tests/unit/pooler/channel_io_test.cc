// Channel's socket IO (pooler/net/channel.h): recv/send on a uv_poll_t. Output the socket does
// not take at once goes out in order as the peer reads; the peer's end and a reset are reported
// after the bytes that came before them; close reports once for both handles. Real sockets
// (a Unix socketpair, loopback TCP) and a real loop, on one thread. On a loop with a FlushBatch
// (a worker's), flush() sends at the end of the turn, once per channel, and nothing queued is
// lost to a close or to the channel going away first; each of those tests runs twice, with the
// batch sending through an io_uring (a SendRing, where the kernel allows one) and without.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pooler/net/channel.h"
#include "pooler/net/flush_batch.h"
#include "pooler/net/send_ring.h"
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
  void open_pair(Channel& channel) { open_pair(channel, peer_); }
  // The same, the other end in `peer` (the test closes it).
  static void open_pair(Channel& channel, int& peer) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    peer = fds[1];
    ASSERT_EQ(channel.init_pipe(), 0);
    ASSERT_EQ(uv_pipe_open(channel.pipe(), fds[0]), 0);
  }
  // What the peer receives of `size` bytes while the loop turns (and `batch`, if any, is sent at
  // each turn's end, as a worker does).
  std::string receive_while_turning(size_t size, FlushBatch* batch = nullptr) {
    std::string got;
    char buf[65536];
    while (got.size() < size) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      if (batch != nullptr) batch->run();
      ssize_t n = ::recv(peer_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) got.append(buf, static_cast<size_t>(n));
    }
    return got;
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
  EXPECT_TRUE(receive_while_turning(big.size() + 4) == big + "tail");
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

// A channel on a socketpair, on a loop whose data is a FlushBatch (as a worker's is); the
// parameter: whether the batch sends through a SendRing.
class BatchedChannelIo : public ChannelIo, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    ChannelIo::SetUp();
    if (GetParam()) {
      std::string why;
      batch_.use_ring(SendRing::open(kRingEntries, why));
      if (!batch_.has_ring()) GTEST_SKIP() << "no io_uring here: " << why;
    }
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

  static constexpr unsigned kRingEntries = 4;  // small: a test's batch fills it more than once
  FlushBatch batch_;
  Recorder owner_;
  Channel channel_{&loop_, owner_, protocol::FramePhase::regular, 1 << 20};
};

TEST_P(BatchedChannelIo, TheTurnsFlushesGoOutTogetherAtItsEnd) {
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

TEST_P(BatchedChannelIo, BulkOutputIsSentAtOnce) {
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

TEST_P(BatchedChannelIo, ASendThatTakesAllOfAHighQueueReportsItDrained) {
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

TEST_P(BatchedChannelIo, ACloseSendsWhatAFlushOfTheTurnQueuedBeforeIt) {
  channel_.output() = "the last message";
  channel_.flush();
  channel_.close();
  EXPECT_EQ(readable_now(peer_), "the last message");
  batch_.run();  // the closed channel is still listed: nothing more to send, no error
  EXPECT_EQ(owner_.error, 0);
}

TEST_P(BatchedChannelIo, AChannelDeletedBeforeTheTurnsEndLeavesTheBatch) {
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

TEST_P(BatchedChannelIo, ManyChannelsOfOneTurnEachSendTheirOwnBytes) {
  // More channels than the ring takes at once: the batch submits in several rounds.
  std::vector<std::unique_ptr<Channel>> channels;
  std::vector<int> peers;
  Recorder owner;
  for (int i = 0; i < 10; ++i) {
    channels.push_back(
        std::make_unique<Channel>(&loop_, owner, protocol::FramePhase::regular, 1 << 20));
    ASSERT_NO_FATAL_FAILURE(open_pair(*channels.back(), peers.emplace_back()));
    channels.back()->output() = "to " + std::to_string(i);
    channels.back()->flush();
  }
  batch_.run();
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(readable_now(peers[i]), "to " + std::to_string(i));
    EXPECT_EQ(channels[i]->bytes_sent(), 3 + std::to_string(i).size());
    channels[i]->close();
  }
  run_until(&loop_, [&] { return owner.closed == 10; });
  EXPECT_EQ(owner.closed, 10);
  EXPECT_EQ(owner.error, 0);
  for (int fd : peers) ::close(fd);
}

TEST_P(BatchedChannelIo, WhatTheSocketDoesNotTakeGoesOutAsThePeerReads) {
  // A small flush joins the batch; what is appended unflushed goes with it: 4 MB, far more than
  // the socketpair holds, so the batched send takes part and the rest waits for writability.
  channel_.output() = "<";
  channel_.flush();
  std::string big = "<";
  for (int i = 0; big.size() < 4 * 1024 * 1024; ++i) big += std::to_string(i) + ",";
  channel_.output() = big;
  batch_.run();
  EXPECT_GT(channel_.queued_output(), 0U);
  channel_.output() += "tail";  // behind what is being written
  channel_.flush();
  EXPECT_TRUE(receive_while_turning(big.size() + 4, &batch_) == big + "tail");
  EXPECT_EQ(channel_.queued_output(), 0U);
  EXPECT_EQ(channel_.bytes_sent(), big.size() + 4);
  EXPECT_GE(owner_.drained, 1);
  EXPECT_EQ(owner_.error, 0);
}

TEST_P(BatchedChannelIo, ASendToAFullSocketWaitsForRoomWithoutHoldingTheLoop) {
  // The socket is full before the turn's send: it takes nothing (EAGAIN, at once: the batch does
  // not wait), and the output goes once the peer has read.
  uv_os_fd_t fd = -1;
  ASSERT_EQ(uv_fileno(reinterpret_cast<const uv_handle_t*>(channel_.pipe()), &fd), 0);
  const std::string filler(4096, 'f');
  size_t filled = 0;
  for (ssize_t n; (n = ::send(fd, filler.data(), filler.size(), MSG_DONTWAIT)) > 0;) {
    filled += static_cast<size_t>(n);
  }
  channel_.output() = "after the filler";
  channel_.flush();
  batch_.run();
  EXPECT_EQ(channel_.queued_output(), 16U);
  EXPECT_EQ(owner_.error, 0);
  EXPECT_EQ(receive_while_turning(filled + 16, &batch_).substr(filled), "after the filler");
  EXPECT_EQ(channel_.queued_output(), 0U);
}

TEST_P(BatchedChannelIo, ABatchedSendToAClosedPeerIsAnErrorNotASignal) {
  ::close(peer_);
  peer_ = -1;
  channel_.output() = "nobody reads this";
  channel_.flush();
  EXPECT_EQ(owner_.error, 0);
  batch_.run();
  EXPECT_EQ(owner_.error, UV_EPIPE);
  EXPECT_EQ(channel_.queued_output(), 0U);
}

// An owner whose channel's failure closes another channel, as a client's end closes its server's.
class ClosesAnotherOnError final : public ChannelOwner {
 public:
  void on_channel_readable(Channel&) override {}
  void on_channel_error(Channel&, int status) override {
    error = status;
    if (then) then();
  }
  void on_channel_drained(Channel&) override {}
  void on_channel_closed(Channel&) override { ++closed; }
  std::function<void()> then;
  int error = 0;
  int closed = 0;
};

TEST_P(BatchedChannelIo, AFailedSendsOwnerMayCloseOrFeedAChannelSentInTheSameTurn) {
  // The failing channel is in the batch first, so its owner hears of the failure while the
  // other channels of the turn are sent but not yet finished. One gets more output (it is sent
  // after its first bytes, once); one is deleted (the batch must not touch it again).
  ClosesAnotherOnError failing_owner;
  Channel failing(&loop_, failing_owner, protocol::FramePhase::regular, 1 << 20);
  int failing_peer = -1;
  ASSERT_NO_FATAL_FAILURE(open_pair(failing, failing_peer));
  ::close(failing_peer);  // its peer is gone: the send fails with EPIPE
  failing.output() = "lost";
  failing.flush();

  channel_.output() = "first";
  channel_.flush();
  Recorder gone_owner;
  auto gone = std::make_unique<Channel>(&loop_, gone_owner, protocol::FramePhase::regular, 1 << 20);
  int gone_peer = -1;
  ASSERT_NO_FATAL_FAILURE(open_pair(*gone, gone_peer));
  gone->output() = "sent before its owner went";
  gone->flush();

  failing_owner.then = [&] {
    channel_.output() += " then more";
    channel_.flush();
    gone->close();
  };
  batch_.run();
  EXPECT_EQ(failing_owner.error, UV_EPIPE);
  EXPECT_EQ(readable_now(peer_), "first then more");
  EXPECT_EQ(channel_.bytes_sent(), 15U);
  EXPECT_TRUE(batch_.empty());
  run_until(&loop_, [&] { return gone_owner.closed == 1; });
  gone.reset();
  batch_.run();  // ASan: nothing of the deleted channel is left in the batch
  failing.close();
  run_until(&loop_, [&] { return failing_owner.closed == 1; });
  EXPECT_EQ(failing_owner.closed, 1);
  ::close(gone_peer);
}

INSTANTIATE_TEST_SUITE_P(SendCalls, BatchedChannelIo, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "IoUring" : "SendEach";
                         });

TEST_F(ChannelIo, ARingThatFailsLeavesTheBatchWhichSendsWithoutIt) {
  // A ring admits one submitting thread (IORING_SETUP_SINGLE_ISSUER): one opened on another
  // thread refuses this one's submission, a real failure of a live ring.
  std::unique_ptr<SendRing> ring;
  std::string why;
  std::thread([&] { ring = SendRing::open(4, why); }).join();
  if (ring == nullptr) GTEST_SKIP() << "no io_uring here: " << why;
  FlushBatch batch;
  batch.use_ring(std::move(ring));
  loop_.data = &batch;
  Recorder owner;
  Channel channel(&loop_, owner, protocol::FramePhase::regular, 1 << 20);
  open_pair(channel);
  channel.output() = "sent all the same";
  channel.flush();
  batch.run();
  const bool ring_failed = !batch.has_ring();
  EXPECT_EQ(readable_now(peer_), "sent all the same");
  EXPECT_EQ(channel.bytes_sent(), 17U);
  EXPECT_EQ(owner.error, 0);
  channel.close();
  run_until(&loop_, [&] { return owner.closed == 1; });
  loop_.data = nullptr;
  if (!ring_failed) GTEST_SKIP() << "this kernel has no single-issuer rings: the ring worked";
}

}  // namespace
}  // namespace pgsluice
