// Channel::detach/attach (pooler/net/channel.h): a connected socket leaves one libuv loop and
// reads and writes on another, as a server does when it changes workers. Real sockets (a Unix
// socketpair) and two real loops, on one thread; the peer end is a plain blocking descriptor.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "pooler/net/channel.h"
#include "tests/unit/pooler/channel_recorder.h"

namespace pgsluice {
namespace {

using Recorder = test_support::ChannelRecorder;

class ChannelMove : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
    uv_loop_init(&old_loop_);
    uv_loop_init(&new_loop_);
  }
  void TearDown() override {
    ::close(fds_[1]);
    uv_run(&old_loop_, UV_RUN_NOWAIT);
    uv_run(&new_loop_, UV_RUN_NOWAIT);
    EXPECT_EQ(uv_loop_close(&old_loop_), 0);
    EXPECT_EQ(uv_loop_close(&new_loop_), 0);
  }
  void peer_send(const std::string& bytes) {
    ASSERT_EQ(::write(fds_[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  std::string peer_receive(size_t size) {
    std::string out(size, '\0');
    size_t got = 0;
    while (got < size) {
      ssize_t n = ::read(fds_[1], out.data() + got, size - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    out.resize(got);
    return out;
  }
  // Runs `loop` until `done` or a bounded number of turns.
  template <class Fn>
  static void run_until(uv_loop_t* loop, Fn done) {
    for (int i = 0; i < 100 && !done(); ++i) uv_run(loop, UV_RUN_NOWAIT);
  }

  int fds_[2] = {-1, -1};
  uv_loop_t old_loop_{};
  uv_loop_t new_loop_{};
};

TEST_F(ChannelMove, TheSocketReadsAndWritesOnTheNewLoopWithItsCounts) {
  Recorder owner;
  Channel channel(&old_loop_, owner, protocol::FramePhase::regular, 1 << 20);
  ASSERT_EQ(channel.init_pipe(), 0);
  ASSERT_EQ(uv_pipe_open(channel.pipe(), fds_[0]), 0);
  channel.start_reading();
  peer_send("before");
  run_until(&old_loop_, [&] { return owner.received == "before"; });
  ASSERT_EQ(owner.received, "before");
  ASSERT_TRUE(channel.can_detach());

  const int fd = channel.detach();
  ASSERT_GE(fd, 0);
  EXPECT_NE(fd, fds_[0]);
  // Sent while the socket is between loops: it waits in the kernel.
  peer_send("-between");
  run_until(&old_loop_, [&] { return owner.closed == 1; });
  ASSERT_EQ(owner.closed, 1);  // the old handle is closed; the connection is not
  EXPECT_EQ(owner.received, "before");

  ASSERT_EQ(channel.attach(&new_loop_, fd), 0);
  EXPECT_FALSE(channel.closing());
  channel.start_reading();
  peer_send("-after");
  run_until(&new_loop_, [&] { return owner.received == "before-between-after"; });
  EXPECT_EQ(owner.received, "before-between-after");
  EXPECT_EQ(owner.error, 0);
  EXPECT_EQ(channel.bytes_received(), std::string("before-between-after").size());

  channel.output() = "reply";
  channel.flush();
  EXPECT_EQ(peer_receive(5), "reply");
  EXPECT_EQ(channel.bytes_sent(), 5U);

  channel.close();
  run_until(&new_loop_, [&] { return owner.closed == 2; });
  EXPECT_EQ(owner.closed, 2);
  // The peer sees the end of the connection only now, when the last descriptor is closed.
  char byte = 0;
  EXPECT_EQ(::read(fds_[1], &byte, 1), 0);
}

TEST_F(ChannelMove, ASocketThatCannotOpenOnTheNewLoopClosesTheChannel) {
  Recorder owner;
  Channel channel(&old_loop_, owner, protocol::FramePhase::regular, 1 << 20);
  ASSERT_EQ(channel.init_pipe(), 0);
  ASSERT_EQ(uv_pipe_open(channel.pipe(), fds_[0]), 0);
  const int fd = channel.detach();
  ASSERT_GE(fd, 0);
  run_until(&old_loop_, [&] { return owner.closed == 1; });
  ASSERT_EQ(::close(fd), 0);  // gone before it arrives: the open fails
  EXPECT_NE(channel.attach(&new_loop_, fd), 0);
  EXPECT_TRUE(channel.closing());
  run_until(&new_loop_, [&] { return owner.closed == 2; });
  EXPECT_EQ(owner.closed, 2);  // the owner hears of it as of any close
}

TEST_F(ChannelMove, NotWithOutputQueuedOrInputUnread) {
  Recorder owner;
  Channel channel(&old_loop_, owner, protocol::FramePhase::regular, 1 << 20);
  ASSERT_EQ(channel.init_pipe(), 0);
  ASSERT_EQ(uv_pipe_open(channel.pipe(), fds_[0]), 0);
  channel.output() = "queued";
  EXPECT_FALSE(channel.can_detach());
  EXPECT_LT(channel.detach(), 0);  // refused, nothing changed
  channel.flush();
  EXPECT_EQ(peer_receive(6), "queued");
  channel.input().append("unread");
  EXPECT_FALSE(channel.can_detach());
  channel.input().skip(6);
  EXPECT_TRUE(channel.can_detach());
  channel.close();
  run_until(&old_loop_, [&] { return owner.closed == 1; });
  EXPECT_EQ(owner.closed, 1);
}

}  // namespace
}  // namespace pgsluice
