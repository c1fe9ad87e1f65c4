// Socket IO of one connection: reading into the frame reader, batched writes, close.
#include "pooler/channel.h"

#include <cstring>

namespace pgsluice {

namespace {
// The read size asked of the kernel; the buffer grows only when one message needs more.
constexpr size_t kReadChunk = 16 * 1024;
// An emptied input buffer above this capacity is released, so an idle client costs little.
constexpr size_t kIdleInputCapacity = 64 * 1024;
}  // namespace

Channel::Channel(uv_loop_t* loop, ChannelOwner& owner, protocol::FramePhase phase,
                 uint32_t max_length)
    : loop_(loop), owner_(owner), input_(phase, max_length) {
  std::memset(&handle_, 0, sizeof(handle_));
  std::memset(&write_req_, 0, sizeof(write_req_));
}

int Channel::init_tcp() {
  is_tcp_ = true;
  int rc = uv_tcp_init(loop_, &handle_.tcp);
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
  if (uv_read_start(stream(), on_alloc, on_read) == 0) reading_ = true;
}

void Channel::stop_reading() {
  if (!reading_ || closing_) return;
  uv_read_stop(stream());
  reading_ = false;
}

void Channel::on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* self = static_cast<Channel*>(handle->data);
  char* p = self->input_.writable(kReadChunk);
  *buf = uv_buf_init(p, static_cast<unsigned>(self->input_.writable_size()));
}

void Channel::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
  auto* self = static_cast<Channel*>(stream->data);
  if (nread > 0) {
    self->input_.commit(static_cast<size_t>(nread));
    self->bytes_received_ += static_cast<uint64_t>(nread);
    self->owner_.on_channel_readable(*self);
    if (!self->closing_ && self->input_.unread_size() == 0) {
      self->input_.shrink_if_idle(kIdleInputCapacity);
    }
  } else if (nread < 0) {
    self->stop_reading();
    self->owner_.on_channel_error(*self, static_cast<int>(nread));
  }
}

void Channel::flush() {
  if (writing_ || closing_ || output_.empty()) return;
  uv_buf_t buf = uv_buf_init(output_.data(), static_cast<unsigned>(output_.size()));
  int written = uv_try_write(stream(), &buf, 1);
  if (written > 0) {
    bytes_sent_ += static_cast<uint64_t>(written);
    if (static_cast<size_t>(written) == output_.size()) {
      output_.clear();
      return;
    }
    output_.erase(0, static_cast<size_t>(written));
  } else if (written != UV_EAGAIN && written != UV_ENOSYS) {
    // The error surfaces through the read side as well; drop what cannot be sent.
    output_.clear();
    owner_.on_channel_error(*this, written);
    return;
  }
  in_flight_.swap(output_);
  output_.clear();
  buf = uv_buf_init(in_flight_.data(), static_cast<unsigned>(in_flight_.size()));
  write_req_.data = this;
  if (uv_write(&write_req_, stream(), &buf, 1, on_write) == 0) {
    writing_ = true;
  } else {
    in_flight_.clear();
  }
}

void Channel::on_write(uv_write_t* req, int status) {
  auto* self = static_cast<Channel*>(req->data);
  self->writing_ = false;
  if (status == 0) self->bytes_sent_ += self->in_flight_.size();
  self->in_flight_.clear();
  if (self->closing_) return;
  if (status < 0) {
    self->owner_.on_channel_error(*self, status);
    return;
  }
  bool was_high = self->output_.size() > kLowWaterMark;
  self->flush();
  if (self->close_after_flush_ && !self->writing_) {
    self->close();
    return;
  }
  if (!was_high || self->queued_output() <= kLowWaterMark) self->owner_.on_channel_drained(*self);
}

void Channel::close_when_flushed() {
  if (closing_) return;
  stop_reading();
  close_after_flush_ = true;
  flush();
  if (!writing_) close();
}

void Channel::close() {
  if (closing_) return;
  closing_ = true;
  reading_ = false;
  if (!initialized_) {
    owner_.on_channel_closed(*this);
    return;
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_), on_close);
}

void Channel::on_close(uv_handle_t* handle) {
  auto* self = static_cast<Channel*>(handle->data);
  self->owner_.on_channel_closed(*self);
}

}  // namespace pgsluice
