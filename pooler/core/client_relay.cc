// The LISTEN relay on a client (listen_relay.h): its channels, the ReadyForQuery that waits for
// the listener, and the notifications it is sent, held while it is inside a transaction (as
// PostgreSQL delivers them) within a bounded queue.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/listen_relay.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

int Client::worker_index() const {
  return worker_.index();
}

void Client::on_listen_read_back(ChannelSet after, std::string ready_wire) {
  ChannelSet added;
  ChannelSet removed;
  std::set_difference(after.begin(), after.end(), listen_channels_.begin(), listen_channels_.end(),
                      std::inserter(added, added.end()));
  std::set_difference(listen_channels_.begin(), listen_channels_.end(), after.begin(), after.end(),
                      std::inserter(removed, removed.end()));
  listen_channels_ = std::move(after);
  bool ready = true;
  if (!added.empty() || !removed.empty()) {
    if (relay_ == nullptr) {
      relay_ = &worker_.group().relays().for_pool(worker_.group(), pool_->limit_slots());
      worker_.register_relay_client(*this);
    }
    ready = relay_->update(*this, added, removed);
  }
  // Nothing held for a channel it left may go out now (PostgreSQL: nothing after UNLISTEN).
  relayed_.drop_if([&](std::string_view wire) {
    auto body = wire.substr(std::min<size_t>(wire.size(), 5));
    auto n = protocol::parse_notification_response(body);
    return n && !wire.empty() && wire[0] == 'A' && !listen_channels_.contains(n.value.channel);
  });
  if (ready) {
    // Called from the server's reply loop, which flushes this client's output after it.
    channel_.output().append(ready_wire);
    return;
  }
  awaiting_relay_ = true;
  held_ready_ = std::move(ready_wire);
}

void Client::on_relay_confirmed() {
  if (!awaiting_relay_ || state_ == State::closing) return;
  awaiting_relay_ = false;
  channel_.output().append(held_ready_);
  std::string().swap(held_ready_);
  deliver_relayed();
  channel_.flush();
  if (state_ == State::closing) return;
  // What it sent meanwhile waited in its input.
  process_input();
}

bool Client::may_deliver_relayed() const {
  if (awaiting_relay_) return false;
  if (state_ == State::idle || state_ == State::waiting) return true;
  return state_ == State::active && server_ != nullptr && server_->quiet_for_notifications();
}

void Client::on_relay_message(std::string_view channel, std::string_view wire) {
  if (state_ == State::closing) return;
  if (!channel.empty() && !listen_channels_.contains(channel)) return;  // unlistened meanwhile
  const auto limit = static_cast<size_t>(worker_.settings().session_state_relay_queue);
  switch (relayed_.offer(wire, may_deliver_relayed(), channel_.queued_output(), limit)) {
    case RelayQueue::Offer::overflow:
      relay_overflow(limit);
      return;
    case RelayQueue::Offer::send_now:
      channel_.output().append(wire);
      channel_.flush();
      return;
    case RelayQueue::Offer::queued:
      return;
  }
}

void Client::deliver_relayed() {
  if (relayed_.empty() || !may_deliver_relayed()) return;
  relayed_.drain_into(channel_.output());
}

bool Client::deliver_relayed_after_release() {
  if (relayed_.empty()) return true;
  deliver_relayed();
  channel_.flush();
  return state_ != State::closing;
}

void Client::relay_overflow(size_t limit) {
  // What it has not read is dropped; the error is what it reads next (after what its socket
  // buffers hold), and the connection closes once that is written.
  relayed_.clear();
  if (server_ == nullptr) channel_.output().clear();  // whole messages only: notifications
  close_when_client_closes_ = true;
  fail(sqlstate::kProgramLimitExceeded,
       fmt::format("pgsluice closed the connection: more than {} bytes of notifications waited "
                   "for this client to read them (session_state_relay_queue)",
                   limit));
}

void Client::leave_relay() {
  if (relay_ == nullptr) return;
  relay_->remove(*this);
  worker_.unregister_relay_client(*this);
  relay_ = nullptr;
  relayed_.clear();
}

}  // namespace pgsluice
