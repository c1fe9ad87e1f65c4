// A channel is one socket of the pooler (a client's or a server's) with its input buffer (a
// FrameReader) and its output buffer. It owns the libuv handle and reports to its owner; it knows
// nothing about the protocol beyond framing.
//
// The socket's bytes move with recv() and send() on a uv_poll_t watching its descriptor, not
// with libuv's stream reads and writes (read() and write()): on a socket, read/write take the
// VFS path (fdget_pos, rw_verify_area, fsnotify) on every call, which measured 0.8 µs per
// pooled transaction, 2 % of the pooler's CPU (docs/profile.md). The uv_tcp_t/uv_pipe_t handle
// stays for what libuv does well once per connection: connect, accept, socket options, close.
//
// Output is double-buffered: bytes queued with output() go out with one send() when the socket
// takes them at once (the common case for small replies); what it does not take waits in a
// second buffer, sent as the socket becomes writable, while new bytes collect behind it.
// On a worker's loop (its uv_loop_t's data is a FlushBatch) flush() does not send at once: the
// channel joins the batch, and the worker sends every joined channel's output at the end of the
// loop turn, after all its reads (flush_batch.h says why); 16 kB or more goes out at once.
// Closing sends what the turn queued first; nothing else in this class waits for the batch.
//
// TLS (start_tls) sits between the socket and those buffers: input() still yields plaintext and
// output() still takes it; ciphertext is read into a buffer of its own and decrypted into the
// frame reader, and output is encrypted at flush time into a ciphertext buffer that takes the
// plaintext buffer's place in the write path. Without TLS nothing of this runs: the socket reads
// straight into the frame reader and writes straight from output(), as before.
#pragma once

#include <uv.h>

#include <cstddef>
#include <memory>
#include <string>

#include "pgsluice/protocol/frame.h"

namespace pgsluice {

class Channel;
class FlushBatch;
class TlsSession;

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
  // The TLS handshake started by start_tls() completed (a failure is on_channel_error with
  // UV_EPROTO and channel.tls_error()).
  virtual void on_channel_tls_ready(Channel& /*channel*/) {}
};

class Channel {
 public:
  // Above this much queued output the producer should stop reading its own socket.
  static constexpr size_t kHighWaterMark = 512 * 1024;
  static constexpr size_t kLowWaterMark = 64 * 1024;

  Channel(uv_loop_t* loop, ChannelOwner& owner, protocol::FramePhase phase, uint32_t max_length);
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel();

  // Initializes the handle as TCP or as a Unix-domain pipe; exactly one is called once. With a
  // `family` (AF_INET, AF_INET6) the socket is made at once, so that options can be set on it
  // before a connect; AF_UNSPEC leaves that to the accept or the connect.
  int init_tcp(int family = AF_UNSPEC);
  int init_pipe();
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&handle_); }
  uv_tcp_t* tcp() { return &handle_.tcp; }
  uv_pipe_t* pipe() { return &handle_.pipe; }
  [[nodiscard]] bool is_tcp() const { return is_tcp_; }

  void start_reading();
  void stop_reading();
  [[nodiscard]] bool reading() const { return reading_; }

  protocol::FrameReader& input() { return input_; }
  // Gives back the memory of empty buffers: an idle connection then costs little more than
  // its libuv handle. The janitor calls it for idle clients.
  // Returns how many bytes of buffer capacity were given back.
  size_t release_idle_buffers();
  // Append whole messages here, then call flush().
  std::string& output() { return output_; }
  // Sends output() now, or at the end of this loop turn when the loop has a FlushBatch.
  void flush();
  // The batch's call at the end of the turn.
  void flush_batched();
  // The batch's calls when it sends through a SendRing. take_ring_send: whether this turn's
  // output can go in one ring send (nothing being written, not sent in pieces, no TLS handshake
  // under way), and what to send (under TLS: the ciphertext, encrypted by this call). ring_sent:
  // the send's result, booked as send() books it, with no call to the owner yet (other channels'
  // results of the same submission are not booked yet). finish_ring_send: what send() would then
  // tell the owner (a failure, a drained queue) and the wait for a writable socket after a partial
  // send.
  [[nodiscard]] bool take_ring_send(int* fd, const char** data, size_t* size);
  void ring_sent(ssize_t result);
  void finish_ring_send();
  [[nodiscard]] size_t queued_output() const {
    return output_.size() + cipher_out_.size() + in_flight_.size();
  }
  [[nodiscard]] bool over_high_water() const { return queued_output() > kHighWaterMark; }
  // The memory this connection's buffers hold (capacities, not contents): /metrics sums it.
  [[nodiscard]] size_t buffer_bytes() const {
    return input_.capacity() + output_.capacity() + in_flight_.capacity() + cipher_in_.capacity() +
           cipher_out_.capacity();
  }

  // Closes the handle (once); on_channel_closed follows from the loop. Queued output is dropped.
  void close();
  // Stops reading, sends what is queued (a final ErrorResponse), then closes.
  void close_when_flushed();
  // Sends what is queued (a Terminate), then waits for the peer to close the connection,
  // dropping whatever it still sends, and closes. A PostgreSQL backend closes its socket only
  // after it has left pg_stat_activity, so the pool's slot is free for real once this channel
  // is closed. Without TLS only (with TLS: close_when_flushed); close() ends the wait.
  // `half_close`: once the last byte is sent, the sending side is shut down (the peer reads end
  // of file after it, as after PostgreSQL's FATAL), so that the peer's unread requests do not
  // make the close a reset, which can discard the last message before the peer reads it.
  void close_when_peer_closes(bool half_close = false);
  [[nodiscard]] bool closing() const { return closing_; }

  // Moving the socket to another loop (a server changing workers): a handle belongs to one
  // loop, so detach() duplicates the socket's descriptor and closes the handle (on_channel_closed
  // follows; the connection stays open through the duplicate), and attach() opens that
  // duplicate on the other loop. The input buffer, the TLS session and the byte counts come
  // along. Only between messages: nothing queued or being written, nothing unread.
  [[nodiscard]] bool can_detach() const;
  // The duplicate descriptor, or a negative libuv error (the channel is then unchanged).
  int detach();
  // On the new loop's thread, once on_channel_closed came: the channel reads `fd` from now on.
  // On a libuv error `fd` is closed and so is the channel (on_channel_closed follows).
  int attach(uv_loop_t* loop, int fd);

  // Switches the socket to TLS. What output() holds is sent first as it is (the 'S' answering an
  // SSLRequest); unread input must have been refused by the caller (bytes that came before the
  // handshake were not encrypted: CVE-2021-23214/23222). A connecting session sends its
  // ClientHello at once. on_channel_tls_ready follows the handshake.
  void start_tls(std::unique_ptr<TlsSession> session);
  // Direct TLS (PostgreSQL 17's sslnegotiation=direct): the peer opened with its ClientHello, no
  // SSLRequest; what input() holds unread is that ciphertext and goes to the session.
  void start_tls_on_input(std::unique_ptr<TlsSession> session);
  // The TLS session (null on a plaintext socket); tls_ready() once its handshake is done.
  [[nodiscard]] TlsSession* tls() const { return tls_.get(); }
  [[nodiscard]] bool tls_ready() const { return tls_ready_; }
  // Why TLS failed (after on_channel_error with UV_EPROTO).
  [[nodiscard]] const std::string& tls_error() const { return tls_error_; }

  // Bytes read and written over the channel's life.
  [[nodiscard]] uint64_t bytes_received() const { return bytes_received_; }
  [[nodiscard]] uint64_t bytes_sent() const { return bytes_sent_; }
  // tcp_socket_buffer: each send() hands the kernel at most this much (0: all there is). With a
  // small SO_SNDBUF the kernel still takes one whole segment of up to 64 kB on loopback, which
  // the peer acknowledges only after its delayed-ACK timer (40 ms): one segment per 40 ms, a
  // base backup at 1.6 MB/s. Sends of the buffer's size keep two segments in flight, which the
  // peer acknowledges at once, as PgBouncer's sends of pkt_buf do.
  void set_send_chunk(size_t bytes) { send_chunk_ = bytes; }
  // Nothing half-read, nothing unsent, no TLS: the socket may be handed to another process.
  [[nodiscard]] bool idle_for_takeover() const {
    return tls_ == nullptr && !writing_ && !closing_ && output_.empty() &&
           input_.unread_size() == 0;
  }

 private:
  static void on_poll(uv_poll_t* poll, int status, int events);
  static void on_close(uv_handle_t* handle);
  // Watches the descriptor for what reading_ and writing_ ask (the poll handle is made at the
  // first use: a connecting socket has its descriptor watched by libuv until it is connected).
  void update_poll();
  // Reads what the socket has (up to a few buffers' worth) and hands it on.
  void read_socket();
  // One read's outcome, as libuv's read callback had it: bytes, UV_EOF or an error.
  void on_read(ssize_t nread);
  // Sends more of in_flight_ once the socket is writable again; at its end, what collected.
  void continue_write();
  void on_write_done(int status);
  // Sends output() now (TLS: encrypts and sends), whatever the loop batches.
  void flush_now();
  // The loop's batch of this turn's writes, or null (sends happen in flush()).
  [[nodiscard]] FlushBatch* batch() const;
  void write_failed(int status);
  // Sends `pending` (output_ in plaintext, cipher_out_ under TLS): one send(); what the socket
  // does not take becomes in_flight_, sent as the socket becomes writable.
  void send(std::string& pending);
  // Books a send of `pending` that took `result` bytes (or failed: a negative errno): what went
  // is counted and dropped, what the socket did not take becomes in_flight_ (writing_), a
  // failure drops it all and returns its libuv error (else 0). Nothing is reported to the owner.
  int book_send(std::string& pending, ssize_t result);
  // ::send() of `data` in send_chunk_ pieces until the kernel takes less; -1 (errno set) when
  // the first piece failed.
  ssize_t send_bytes(const char* data, size_t size);
  void flush_tls();
  // TLS: encrypts output() into cipher_out_ (and the close_notify once closing); false when the
  // session broke (tls_error() says why; it stays broken).
  bool encrypt_output();
  void on_tls_read(size_t nread);
  void tls_failed(std::string message);

  // The members every transaction reads come first and together (docs/profile.md 0i); the libuv
  // handles, touched at setup and by libuv's own bookkeeping, after them.
  uv_loop_t* loop_;
  ChannelOwner& owner_;
  protocol::FrameReader input_;
  std::string output_;
  std::string in_flight_;
  bool poll_open_ = false;
  int fd_ = -1;                // the socket poll_ watches
  int poll_events_ = 0;        // what poll_ watches now
  int closes_pending_ = 0;     // handle_ and poll_: on_channel_closed after the last
  size_t in_flight_sent_ = 0;  // of in_flight_, what send() took already
  bool writing_ = false;
  bool in_batch_ = false;       // joined the loop's FlushBatch, not yet sent (or not yet finished)
  bool ring_was_high_ = false;  // take_ring_send: the queue was above the low-water mark
  int ring_error_ = 0;          // ring_sent: the send's error (a libuv code), for finish_ring_send
  size_t read_size_ = 2048;     // grows to 16 kB when reads fill it
  size_t send_chunk_ = 0;       // set_send_chunk
  bool reading_ = false;
  bool closing_ = false;
  bool close_after_flush_ = false;
  bool awaiting_peer_close_ = false;
  bool half_close_ = false;
  void start_awaiting_peer_close();
  bool initialized_ = false;
  bool is_tcp_ = true;
  uint64_t bytes_received_ = 0;
  uint64_t bytes_sent_ = 0;
  // TLS only: the session, ciphertext waiting to be written, ciphertext read from the socket.
  std::unique_ptr<TlsSession> tls_;
  std::string cipher_out_;
  std::string cipher_in_;
  std::string tls_error_;
  bool tls_ready_ = false;
  bool tls_shutdown_sent_ = false;
  bool tls_write_failed_ = false;
  uv_poll_t poll_;
  union Handle {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } handle_;
};

}  // namespace pgsluice
