// A CancelRequest sent to PostgreSQL on a connection of its own: connect, write the 16 (or more,
// protocol 3.2) bytes, close; the server answers nothing. cancel_wait_timeout bounds how long
// the request may wait for that connection: past it the request is dropped and logged, so that
// an unreachable server cannot pile up half-open cancel connections.
//
// A request forwarded to a peer (core/peer_forwarder.h) waits for the peer to close instead of
// closing first, within the same bound: a PgBouncer peer drops a cancel whose connection closes
// before it has passed the request on, and the peer's pool_size counts requests until then.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <string>

#include "pooler/config/server_address.h"
#include "pooler/net/channel.h"

namespace pgsluice {

// What a sender tells whoever forwards through it; both callbacks optional.
struct CancelHooks {
  std::function<void()> sent;  // connected, and the request is being written
  std::function<void()> done;  // the connection is closed, for whatever reason (always, once)
  bool await_close = false;    // wait for the peer to close (see above)
};

class CancelSender final : public ChannelOwner {
 public:
  using Hooks = CancelHooks;

  // Fire and forget: the sender deletes itself when done. timeout_ms 0: no bound.
  static void send(uv_loop_t* loop, const ServerAddress& address, std::string packet,
                   uint64_t timeout_ms, Hooks hooks = {});

  void on_channel_readable(Channel&) override {}
  void on_channel_error(Channel& c, int) override { c.close(); }
  void on_channel_drained(Channel&) override {}
  void on_channel_closed(Channel&) override;

 private:
  CancelSender(uv_loop_t* loop, std::string packet, Hooks hooks);
  void start(const ServerAddress& address, uint64_t timeout_ms);
  static void on_connected(uv_connect_t* req, int status);
  static void on_timeout(uv_timer_t* timer);

  Channel channel_;
  std::string packet_;
  Hooks hooks_;
  bool connected_ = false;
  std::string target_;  // for the log
  uv_connect_t req_{};
  uv_timer_t timer_{};
};

}  // namespace pgsluice
