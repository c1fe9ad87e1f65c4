// A channel is one socket of the pooler (a client's or a server's) with its input buffer (a
// FrameReader) and its output buffer. It owns the libuv handle and reports to its owner; it knows
// nothing about the protocol beyond framing.
//
// Output is double-buffered: bytes queued with output() go out with one uv_try_write when the
// socket takes them at once (the common case for small replies), otherwise with one uv_write of
// everything queued so far; while that write is in flight, new bytes collect behind it.
#pragma once

#include <uv.h>

#include <cstddef>
#include <string>

#include "pgsluice/protocol/frame.h"

namespace pgsluice {

class Channel;

class ChannelOwner {
 public:
  virtual ~ChannelOwner() = default;
  // New bytes are in channel.input().
  virtual void on_channel_readable(Channel& channel) = 0;
  // The peer closed (status UV_EOF) or the socket failed.
  virtual void on_channel_error(Channel& channel, int status) = 0;
  // Queued output fell below the low-water mark (a peer paused for backpressure may resume).
  virtual void on_channel_drained(Channel& channel) = 0;
  // The handle is closed: the owner may now delete itself.
  virtual void on_channel_closed(Channel& channel) = 0;
};

class Channel {
 public:
  // Above this much queued output the producer should stop reading its own socket.
  static constexpr size_t kHighWaterMark = 512 * 1024;
  static constexpr size_t kLowWaterMark = 64 * 1024;

  Channel(uv_loop_t* loop, ChannelOwner& owner, protocol::FramePhase phase, uint32_t max_length);
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Initializes the handle as TCP or as a Unix-domain pipe; exactly one is called once.
  int init_tcp();
  int init_pipe();
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&handle_); }
  uv_tcp_t* tcp() { return &handle_.tcp; }
  uv_pipe_t* pipe() { return &handle_.pipe; }
  [[nodiscard]] bool is_tcp() const { return is_tcp_; }

  void start_reading();
  void stop_reading();
  [[nodiscard]] bool reading() const { return reading_; }

  protocol::FrameReader& input() { return input_; }
  // Append whole messages here, then call flush().
  std::string& output() { return output_; }
  void flush();
  [[nodiscard]] size_t queued_output() const { return output_.size() + in_flight_.size(); }
  [[nodiscard]] bool over_high_water() const { return queued_output() > kHighWaterMark; }

  // Closes the handle (once); on_channel_closed follows from the loop. Queued output is dropped.
  void close();
  // Stops reading, sends what is queued (a final ErrorResponse), then closes.
  void close_when_flushed();
  [[nodiscard]] bool closing() const { return closing_; }

  // Bytes read and written over the channel's life.
  [[nodiscard]] uint64_t bytes_received() const { return bytes_received_; }
  [[nodiscard]] uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void on_write(uv_write_t* req, int status);
  static void on_close(uv_handle_t* handle);

  union Handle {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } handle_;
  uv_loop_t* loop_;
  ChannelOwner& owner_;
  protocol::FrameReader input_;
  std::string output_;
  std::string in_flight_;
  uv_write_t write_req_;
  bool writing_ = false;
  bool reading_ = false;
  bool closing_ = false;
  bool close_after_flush_ = false;
  bool initialized_ = false;
  bool is_tcp_ = true;
  uint64_t bytes_received_ = 0;
  uint64_t bytes_sent_ = 0;
};

}  // namespace pgsluice
