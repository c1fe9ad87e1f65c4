// Socket IO of one connection: reading into the frame reader, batched writes, TLS, close.
#include "pooler/net/channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "pooler/base/io_buffers.h"
#include "pooler/net/flush_batch.h"
#include "pooler/net/tls_session.h"

namespace pgsluice {

namespace {
// An emptied output buffer above this capacity is released (what one loop turn's replies to a
// busy client need stays).
constexpr size_t kIdleOutputCapacity = 256 * 1024;

// The handle's socket descriptor, or a negative libuv error.
int socket_of(const uv_handle_t* handle) {
  uv_os_fd_t fd = -1;
  const int rc = uv_fileno(handle, &fd);
  return rc != 0 ? rc : fd;
}

void release_if_large(std::string& buffer) {
  if (buffer.empty() && buffer.capacity() > kIdleOutputCapacity) std::string().swap(buffer);
}

// Output up to this much waits for the end of the loop turn (flush()); more is sent at once.
constexpr size_t kBatchedOutputLimit = 16 * 1024;
// The read size asked of the kernel; the buffer grows only when one message needs more.
constexpr size_t kReadChunk = 16 * 1024;  // the most one read asks for
// An emptied input buffer above this capacity is released, so an idle client costs little.
constexpr size_t kIdleInputCapacity = 64 * 1024;
}  // namespace

Channel::Channel(uv_loop_t* loop, ChannelOwner& owner, protocol::FramePhase phase,
                 uint32_t max_length)
    : loop_(loop), owner_(owner), input_(phase, max_length, IoBuffers::shared()) {
  std::memset(&handle_, 0, sizeof(handle_));
  std::memset(&poll_, 0, sizeof(poll_));
}

Channel::~Channel() {
  // The batch is gone once its worker stopped (Worker::stop empties it first, so a channel still
  // marked here would be a bug elsewhere; not a reason to crash at exit).
  if (FlushBatch* turn = batch(); in_batch_ && turn != nullptr) turn->forget(this);
}

FlushBatch* Channel::batch() const {
  return static_cast<FlushBatch*>(loop_->data);
}

int Channel::init_tcp(int family) {
  is_tcp_ = true;
  int rc = uv_tcp_init_ex(loop_, &handle_.tcp, static_cast<unsigned>(family));
  if (rc == 0) {
    initialized_ = true;
    handle_.tcp.data = this;
  }
  return rc;
}

int Channel::init_pipe() {
  is_tcp_ = false;
  int rc = uv_pipe_init(loop_, &handle_.pipe, 0);
  if (rc == 0) {
    initialized_ = true;
    handle_.pipe.data = this;
  }
  return rc;
}

void Channel::start_reading() {
  if (reading_ || closing_) return;
  reading_ = true;
  update_poll();
}

void Channel::stop_reading() {
  if (!reading_ || closing_) return;
  reading_ = false;
  update_poll();
}

void Channel::update_poll() {
  const int want = (reading_ ? UV_READABLE : 0) | (writing_ ? UV_WRITABLE : 0);
  if (want == poll_events_ || closing_) return;
  if (!poll_open_) {
    const int fd = fd_ >= 0 ? fd_ : socket_of(reinterpret_cast<const uv_handle_t*>(&handle_));
    const int rc = fd < 0 ? fd : uv_poll_init_socket(loop_, &poll_, fd);
    if (rc != 0) {
      reading_ = false;
      owner_.on_channel_error(*this, rc);
      return;
    }
    poll_.data = this;
    poll_open_ = true;
    fd_ = fd;
  }
  if (want == 0) {
    uv_poll_stop(&poll_);
  } else if (int rc = uv_poll_start(&poll_, want, on_poll); rc != 0) {
    poll_events_ = 0;
    reading_ = false;
    owner_.on_channel_error(*this, rc);
    return;
  }
  poll_events_ = want;
}

void Channel::on_poll(uv_poll_t* poll, int status, int events) {
  auto* self = static_cast<Channel*>(poll->data);
  if (status < 0) {
    // libuv reports a socket error (POLLERR: a reset, say) as UV_EBADF and stops watching. What
    // was received before it is still read, and the error is the socket's own.
    self->poll_events_ = 0;
    if (self->reading_) {
      self->read_socket();
      if (self->closing_ || !self->reading_) return;
    }
    int error = 0;
    socklen_t len = sizeof(error);
    if (::getsockopt(self->fd_, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error != 0) {
      status = uv_translate_sys_error(error);
    }
    if (self->writing_) {
      self->on_write_done(status);
    } else {
      self->on_read(status);
    }
    return;
  }
  if ((events & UV_WRITABLE) != 0 && self->writing_) self->continue_write();
  if ((events & UV_READABLE) != 0 && self->reading_ && !self->closing_) self->read_socket();
}

void Channel::read_socket() {
  const int fd = fd_;
  // As libuv's stream reads: read again while a read fills the buffer (more may be waiting),
  // a bounded number of times so that one busy socket does not hold the loop.
  for (int reads = 0; reads < 32 && reading_ && !closing_; ++reads) {
    char* p;
    size_t size;
    if (tls_ != nullptr) {
      p = cipher_in_.data();
      size = cipher_in_.size();
    } else {
      p = input_.writable(read_size_);
      size = input_.writable_size();
    }
    ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      on_read(uv_translate_sys_error(errno));
      return;
    }
    on_read(n == 0 ? static_cast<ssize_t>(UV_EOF) : n);
    if (n == 0 || static_cast<size_t>(n) < size) return;
  }
}

void Channel::on_read(ssize_t nread) {
  if (awaiting_peer_close_) {
    if (nread > 0) {
      input_.commit(static_cast<size_t>(nread));
      input_.skip(input_.unread_size());
    } else if (nread < 0) {
      close();  // EOF (or an error): the peer is gone
    }
    return;
  }
  if (nread > 0 && tls_ != nullptr) {
    on_tls_read(static_cast<size_t>(nread));
  } else if (nread > 0) {
    // A read that filled what was asked for: ask for more next time. Connections start small
    // (most clients send short queries), which keeps an idle client's memory low.
    if (static_cast<size_t>(nread) >= read_size_ && read_size_ < kReadChunk) {
      read_size_ *= 2;
    }
    input_.commit(static_cast<size_t>(nread));
    bytes_received_ += static_cast<uint64_t>(nread);
    owner_.on_channel_readable(*this);
    if (!closing_ && input_.unread_size() == 0) {
      input_.shrink_if_idle(kIdleInputCapacity);
    }
  } else if (nread < 0) {
    stop_reading();
    owner_.on_channel_error(*this, static_cast<int>(nread));
  }
}

void Channel::flush() {
  if (writing_ || closing_) return;
  // Bulk data (a large result, COPY, a base backup) goes out as it is read, as before batching:
  // held to the turn's end, up to 32 reads of 16 kB would collect first, and the buffer would
  // grow and be given back every turn.
  if (FlushBatch* turn = batch(); turn != nullptr && output_.size() < kBatchedOutputLimit) {
    if (!in_batch_ && !output_.empty()) {
      in_batch_ = true;
      turn->add(this);
    }
    return;
  }
  flush_now();
}

void Channel::flush_batched() {
  in_batch_ = false;
  // The producer may have checked over_high_water() before this send and paused: if the send
  // takes it all, no write completes later to tell it, so tell it here.
  const bool was_high = queued_output() > kLowWaterMark;
  flush_now();
  if (was_high && !closing_ && queued_output() <= kLowWaterMark) owner_.on_channel_drained(*this);
}

bool Channel::take_ring_send(int* fd, const char** data, size_t* size) {
  if (writing_ || closing_ || send_chunk_ != 0) return false;
  // During a TLS handshake output() is held back, and flush_batched sends the handshake's bytes.
  if (tls_ != nullptr && !tls_ready_) return false;
  if (fd_ < 0) {
    const int socket = socket_of(reinterpret_cast<const uv_handle_t*>(&handle_));
    if (socket < 0) return false;  // flush_batched reports it
    fd_ = socket;
  }
  ring_was_high_ = queued_output() > kLowWaterMark;
  // TLS: encrypted now, before the submission. A broken session cannot be reported here (its
  // owner's call could touch other channels of the submission): flush_batched reports it.
  if (tls_ != nullptr && !encrypt_output()) return false;
  std::string& pending = tls_ != nullptr ? cipher_out_ : output_;
  if (pending.empty()) return false;
  ring_error_ = 0;
  *fd = fd_;
  *data = pending.data();
  *size = pending.size();
  return true;
}

void Channel::ring_sent(ssize_t result) {
  ring_error_ = book_send(tls_ != nullptr ? cipher_out_ : output_, result);
}

void Channel::finish_ring_send() {
  in_batch_ = false;
  if (closing_) return;
  if (ring_error_ != 0) {
    write_failed(ring_error_);
    return;
  }
  if (writing_) update_poll();
  if (closing_) return;
  if (ring_was_high_ && queued_output() <= kLowWaterMark) owner_.on_channel_drained(*this);
  // Another channel's owner may have added output since the send (while this one was still
  // marked as in the batch, so its flush() did not join again).
  if (!closing_ && !output_.empty()) flush();
}

void Channel::flush_now() {
  if (tls_ != nullptr) {
    flush_tls();
    return;
  }
  send(output_);
}

void Channel::send(std::string& pending) {
  if (writing_ || closing_ || pending.empty()) return;
  if (fd_ < 0) fd_ = socket_of(reinterpret_cast<const uv_handle_t*>(&handle_));
  if (fd_ < 0) {
    const int error = fd_;
    fd_ = -1;
    pending.clear();
    write_failed(error);
    return;
  }
  const ssize_t written = send_bytes(pending.data(), pending.size());
  // The error surfaces through the read side as well; what cannot be sent is dropped.
  if (int error = book_send(pending, written >= 0 ? written : -errno); error != 0) {
    write_failed(error);
    return;
  }
  if (writing_) update_poll();
}

int Channel::book_send(std::string& pending, ssize_t result) {
  if (result > 0) {
    bytes_sent_ += static_cast<uint64_t>(result);
    if (static_cast<size_t>(result) == pending.size()) {
      pending.clear();
      release_if_large(pending);
      return 0;
    }
  } else if (result < 0 && result != -EAGAIN && result != -EWOULDBLOCK && result != -EINTR) {
    pending.clear();
    return uv_translate_sys_error(static_cast<int>(-result));
  }
  // What the socket did not take waits for it to be writable.
  in_flight_.swap(pending);
  in_flight_sent_ = result > 0 ? static_cast<size_t>(result) : 0;
  pending.clear();
  release_if_large(pending);
  writing_ = true;
  return 0;
}

ssize_t Channel::send_bytes(const char* data, size_t size) {
  if (send_chunk_ == 0) return ::send(fd_, data, size, MSG_NOSIGNAL);
  size_t total = 0;
  while (total < size) {
    const size_t piece = std::min(send_chunk_, size - total);
    const ssize_t written = ::send(fd_, data + total, piece, MSG_NOSIGNAL);
    if (written <= 0) return total > 0 ? static_cast<ssize_t>(total) : written;
    total += static_cast<size_t>(written);
    if (static_cast<size_t>(written) < piece) break;
  }
  return static_cast<ssize_t>(total);
}

void Channel::continue_write() {
  const size_t left = in_flight_.size() - in_flight_sent_;
  ssize_t written = send_bytes(in_flight_.data() + in_flight_sent_, left);
  if (written < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    on_write_done(uv_translate_sys_error(errno));
    return;
  }
  bytes_sent_ += static_cast<uint64_t>(written);
  in_flight_sent_ += static_cast<size_t>(written);
  if (in_flight_sent_ == in_flight_.size()) on_write_done(0);
}

void Channel::on_write_done(int status) {
  writing_ = false;
  in_flight_.clear();
  in_flight_sent_ = 0;
  // A large message written leaves its capacity here (send swaps the two buffers): give it
  // back, so that a connection that once carried 200 MB does not hold 200 MB from then on.
  release_if_large(in_flight_);
  if (closing_) return;
  update_poll();
  if (status < 0) {
    write_failed(status);
    return;
  }
  bool was_high = output_.size() + cipher_out_.size() > kLowWaterMark;
  flush_now();
  if (close_after_flush_ && !writing_) {
    if (awaiting_peer_close_) {
      start_awaiting_peer_close();
    } else {
      close();
    }
    return;
  }
  if (!was_high || queued_output() <= kLowWaterMark) owner_.on_channel_drained(*this);
}

// --- TLS ---

void Channel::start_tls(std::unique_ptr<TlsSession> session) {
  tls_ = std::move(session);
  cipher_in_.resize(kReadChunk);
  // Queued plaintext (the 'S' of an SSLRequest's answer) precedes the first TLS record as is.
  cipher_out_.append(output_);
  output_.clear();
  // A connecting session produces its ClientHello here; an accepting one waits for it.
  if (tls_->handshake() == TlsSession::Status::error) {
    tls_failed(tls_->error());
    return;
  }
  flush_tls();
}

void Channel::start_tls_on_input(std::unique_ptr<TlsSession> session) {
  std::string_view hello = input_.unread();
  session->feed(hello.data(), hello.size());
  input_.skip(hello.size());
  start_tls(std::move(session));
}

void Channel::flush_tls() {
  if (writing_ || closing_) return;  // on_write flushes again
  if (!encrypt_output()) {
    owner_.on_channel_error(*this, UV_EPROTO);
    return;
  }
  send(cipher_out_);
}

bool Channel::encrypt_output() {
  if (tls_write_failed_) return false;
  // Until the handshake is done, output() is held back: nothing may leave unencrypted once TLS
  // was agreed (an error queued then is dropped with the connection).
  if (tls_ready_ && !output_.empty()) {
    TlsSession::Status status = tls_->write(output_);
    output_.clear();
    if (status != TlsSession::Status::ok) {
      tls_error_ = tls_->error();
      tls_write_failed_ = true;
      return false;
    }
  }
  if (close_after_flush_ && tls_ready_ && !tls_shutdown_sent_) {
    tls_shutdown_sent_ = true;
    tls_->shutdown();  // close_notify after the last data: the peer sees a clean end
  }
  tls_->drain(cipher_out_);
  return true;
}

void Channel::tls_failed(std::string message) {
  tls_error_ = std::move(message);
  // The alert describing the failure goes out if the socket takes it now; the owner closes.
  tls_->drain(cipher_out_);
  send(cipher_out_);
  stop_reading();
  owner_.on_channel_error(*this, UV_EPROTO);
}

void Channel::on_tls_read(size_t nread) {
  bytes_received_ += nread;
  tls_->feed(cipher_in_.data(), nread);
  if (!tls_ready_) {
    TlsSession::Status status = tls_->handshake();
    if (status == TlsSession::Status::error) {
      tls_failed(tls_->error());
      return;
    }
    flush_tls();  // the handshake's next flight
    if (status != TlsSession::Status::ok || closing_) return;
    tls_ready_ = true;
    owner_.on_channel_tls_ready(*this);
    if (closing_ || tls_ == nullptr) return;
    // Application data may have come in the same read as the handshake's last flight.
  }
  bool got_data = false;
  TlsSession::Status status = TlsSession::Status::ok;
  while (status == TlsSession::Status::ok) {
    char* p = input_.writable(kReadChunk);
    size_t got = 0;
    status = tls_->read(p, input_.writable_size(), got);
    if (status == TlsSession::Status::ok) {
      input_.commit(got);
      got_data = true;
    }
  }
  // Reading may have produced records to send (a TLS 1.3 KeyUpdate answer, an alert).
  if (tls_->pending_output() > 0) flush_tls();
  if (got_data) {
    owner_.on_channel_readable(*this);
    if (closing_) return;
    if (input_.unread_size() == 0) input_.shrink_if_idle(kIdleInputCapacity);
  }
  if (status == TlsSession::Status::closed) {
    stop_reading();
    owner_.on_channel_error(*this, UV_EOF);
  } else if (status == TlsSession::Status::error) {
    tls_failed(tls_->error());
  }
}

void Channel::write_failed(int status) {
  // A channel already closing after its last write (close_when_flushed) has an owner that
  // considers itself gone: the flush it waits for can never come, so close now.
  if (close_after_flush_) {
    close();
    return;
  }
  owner_.on_channel_error(*this, status);
}

size_t Channel::release_idle_buffers() {
  if (closing_) return 0;
  size_t freed = input_.capacity();
  input_.shrink_if_idle(0);
  freed -= input_.capacity();
  if (output_.empty() && output_.capacity() > 15) {
    freed += output_.capacity();
    std::string().swap(output_);
  }
  if (!writing_ && in_flight_.empty() && in_flight_.capacity() > 15) {
    freed += in_flight_.capacity();
    std::string().swap(in_flight_);
  }
  return freed;
}

void Channel::close_when_flushed() {
  if (closing_) return;
  stop_reading();
  close_after_flush_ = true;
  flush_now();
  if (!writing_) close();
}

void Channel::close_when_peer_closes(bool half_close) {
  if (closing_) return;
  if (tls_ != nullptr) {
    close_when_flushed();
    return;
  }
  stop_reading();
  awaiting_peer_close_ = true;
  close_after_flush_ = true;
  half_close_ = half_close;
  flush_now();
  if (!writing_) start_awaiting_peer_close();
}

void Channel::start_awaiting_peer_close() {
  if (half_close_ && fd_ >= 0) ::shutdown(fd_, SHUT_WR);
  start_reading();
}

void Channel::close() {
  if (closing_) return;
  // What a flush() earlier in this turn queued goes out first, as it did before writes were
  // batched (a final message followed by a close).
  // A failed send calls the owner, who may close: then this close has nothing left to do.
  if (in_batch_ && !writing_) {
    flush_now();
    if (closing_) return;
  }
  closing_ = true;
  reading_ = false;
  if (!initialized_) {
    owner_.on_channel_closed(*this);
    return;
  }
  // The poll handle stops watching before the descriptor closes with handle_; the owner hears
  // of the close once both handles are done (libuv finishes closes in no promised order).
  closes_pending_ = 1;
  if (poll_open_) {
    // No uv_poll_stop first: uv_close stops the poll itself, and each stop is an epoll_ctl.
    poll_events_ = 0;
    poll_open_ = false;
    ++closes_pending_;
    uv_close(reinterpret_cast<uv_handle_t*>(&poll_), on_close);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_), on_close);
}

bool Channel::can_detach() const {
  return initialized_ && !closing_ && !writing_ && !close_after_flush_ && output_.empty() &&
         in_flight_.empty() && cipher_out_.empty() && input_.unread_size() == 0 &&
         (tls_ == nullptr || (tls_ready_ && tls_->pending_output() == 0));
}

int Channel::detach() {
  if (!can_detach()) return UV_EBUSY;
  uv_os_fd_t fd = -1;
  int rc = uv_fileno(reinterpret_cast<const uv_handle_t*>(&handle_), &fd);
  if (rc != 0) return rc;
  // libuv closes the original and removes it from its epoll set by number (EPOLL_CTL_DEL in
  // uv_close), so the duplicate's open file description leaves no stale registration behind.
  const int copy = ::dup(fd);
  if (copy < 0) return uv_translate_sys_error(errno);
  if (in_batch_) {
    // Nothing to send (can_detach), and the batch is the old loop's.
    if (FlushBatch* turn = batch()) turn->forget(this);
    in_batch_ = false;
  }
  stop_reading();
  close();
  return copy;
}

int Channel::attach(uv_loop_t* loop, int fd) {
  loop_ = loop;
  closing_ = false;
  reading_ = false;
  initialized_ = false;
  std::memset(&handle_, 0, sizeof(handle_));
  std::memset(&poll_, 0, sizeof(poll_));
  fd_ = -1;
  int rc = is_tcp_ ? init_tcp() : init_pipe();
  if (rc == 0) rc = is_tcp_ ? uv_tcp_open(tcp(), fd) : uv_pipe_open(pipe(), fd);
  if (rc != 0) {
    ::close(fd);
    close();  // on_channel_closed follows, as for any channel
  }
  return rc;
}

void Channel::on_close(uv_handle_t* handle) {
  auto* self = static_cast<Channel*>(handle->data);
  if (--self->closes_pending_ == 0) self->owner_.on_channel_closed(*self);
}

}  // namespace pgsluice
