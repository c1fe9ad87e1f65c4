// See cancel_sender.h.
#include "pooler/net/cancel_sender.h"

#include <spdlog/spdlog.h>

#include "pgsluice/protocol/frame.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

CancelSender::CancelSender(uv_loop_t* loop, std::string packet, Hooks hooks)
    : channel_(loop, *this, pp::FramePhase::regular, pp::kDefaultMaxMessageLength),
      packet_(std::move(packet)),
      hooks_(std::move(hooks)) {
  uv_timer_init(loop, &timer_);
  timer_.data = this;
}

void CancelSender::send(uv_loop_t* loop, const ServerAddress& address, std::string packet,
                        uint64_t timeout_ms, Hooks hooks) {
  (new CancelSender(loop, std::move(packet), std::move(hooks)))->start(address, timeout_ms);
}

void CancelSender::start(const ServerAddress& address, uint64_t timeout_ms) {
  req_.data = this;
  if (!address.unix_path.empty()) {
    target_ = address.unix_path;
    if (channel_.init_pipe() != 0) {
      channel_.close();
      return;
    }
    uv_pipe_connect(&req_, channel_.pipe(), address.unix_path.c_str(), on_connected);
  } else {
    target_ = fmt::format("{}:{}", address.host, address.port);
    sockaddr_storage storage{};
    if (channel_.init_tcp() != 0) {
      channel_.close();
      return;
    }
    if (uv_ip4_addr(address.host.c_str(), address.port, reinterpret_cast<sockaddr_in*>(&storage)) !=
            0 &&
        uv_ip6_addr(address.host.c_str(), address.port,
                    reinterpret_cast<sockaddr_in6*>(&storage)) != 0) {
      // Cancel requests go to IP literals and sockets only; a name would need a lookup per
      // cancel, and libuv's lookup is asynchronous: resolved hosts come with server TLS work.
      spdlog::warn("cancel request to {} not sent: not an IP address", address.host);
      channel_.close();
      return;
    }
    if (uv_tcp_connect(&req_, channel_.tcp(), reinterpret_cast<sockaddr*>(&storage),
                       on_connected) != 0) {
      channel_.close();
      return;
    }
  }
  if (timeout_ms > 0) uv_timer_start(&timer_, on_timeout, timeout_ms, 0);
}

void CancelSender::on_connected(uv_connect_t* req, int status) {
  auto* self = static_cast<CancelSender*>(req->data);
  // Awaiting the peer's close stays within the bound; otherwise the request is as good as sent.
  if (!self->hooks_.await_close || status < 0) uv_timer_stop(&self->timer_);
  if (status < 0) {
    if (status != UV_ECANCELED) {
      spdlog::warn("cancel request to {} not sent: {}", self->target_, uv_strerror(status));
    }
    self->channel_.close();
    return;
  }
  self->connected_ = true;
  if (self->hooks_.sent) self->hooks_.sent();
  self->channel_.output() = self->packet_;
  if (self->hooks_.await_close) {
    self->channel_.close_when_peer_closes();
  } else {
    self->channel_.close_when_flushed();
  }
}

void CancelSender::on_timeout(uv_timer_t* timer) {
  auto* self = static_cast<CancelSender*>(timer->data);
  if (self->connected_) {
    spdlog::warn("cancel request to {}: no close within cancel_wait_timeout", self->target_);
  } else {
    spdlog::warn("cancel request to {} dropped: no connection within cancel_wait_timeout",
                 self->target_);
  }
  self->channel_.close();
}

void CancelSender::on_channel_closed(Channel&) {
  if (hooks_.done) hooks_.done();
  // The timer is the last handle pointing here; the object goes when it has closed too.
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_),
           [](uv_handle_t* h) { delete static_cast<CancelSender*>(h->data); });
}

}  // namespace pgsluice
