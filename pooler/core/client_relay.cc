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
  std::set_difference(after.begin(), after.end(), listen_.channels.begin(), listen_.channels.end(),
                      std::inserter(added, added.end()));
  std::set_difference(listen_.channels.begin(), listen_.channels.end(), after.begin(), after.end(),
                      std::inserter(removed, removed.end()));
  listen_.channels = std::move(after);
  bool ready = true;
  if (!added.empty() || !removed.empty()) {
    if (listen_.relay == nullptr) {
      listen_.relay = &worker_.group().relays().for_pool(worker_.group(), pool_->limit_slots());
      worker_.register_relay_client(*this);
    }
    ready = listen_.relay->update(*this, added, removed);
  }
  // Nothing held for a channel it left may go out now (PostgreSQL: nothing after UNLISTEN).
  listen_.relayed.drop_if([&](std::string_view wire) {
    auto body = wire.substr(std::min<size_t>(wire.size(), 5));
    auto n = protocol::parse_notification_response(body);
    return n && !wire.empty() && wire[0] == 'A' && !listen_.channels.contains(n.value.channel);
  });
  if (ready) {
    // Called from the server's reply loop, which flushes this client's output after it.
    channel_.output().append(ready_wire);
    return;
  }
  listen_.awaiting = true;
  listen_.held_ready = std::move(ready_wire);
}

void Client::on_relay_confirmed() {
  if (!listen_.awaiting || state_ == State::closing) return;
  listen_.awaiting = false;
  channel_.output().append(listen_.held_ready);
  std::string().swap(listen_.held_ready);
  deliver_relayed();
  channel_.flush();
  if (state_ == State::closing) return;
  // What it sent meanwhile waited in its input.
  process_input();
}

bool Client::may_deliver_relayed() const {
  if (listen_.awaiting) return false;
  if (state_ == State::idle || state_ == State::waiting) return true;
  return state_ == State::active && server_ != nullptr && server_->quiet_for_notifications();
}

void Client::on_relay_message(std::string_view channel, std::string_view wire) {
  if (state_ == State::closing) return;
  if (!channel.empty() && !listen_.channels.contains(channel)) return;  // unlistened meanwhile
  const auto limit = static_cast<size_t>(worker_.settings().session_state_relay_queue);
  switch (listen_.relayed.offer(wire, may_deliver_relayed(), channel_.queued_output(), limit)) {
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
  if (listen_.relayed.empty() || !may_deliver_relayed()) return;
  listen_.relayed.drain_into(channel_.output());
}

bool Client::deliver_held_relayed() {
  deliver_relayed();
  channel_.flush();
  return state_ != State::closing;
}

void Client::relay_overflow(size_t limit) {
  // What it has not read is dropped; the error is what it reads next (after what its socket
  // buffers hold), and the connection closes once that is written.
  listen_.relayed.clear();
  if (server_ == nullptr) channel_.output().clear();  // whole messages only: notifications
  close_when_client_closes_ = true;
  fail(sqlstate::kProgramLimitExceeded,
       fmt::format("pgsluice closed the connection: more than {} bytes of notifications waited "
                   "for this client to read them (session_state_relay_queue)",
                   limit));
}

void Client::leave_relay() {
  if (listen_.relay == nullptr) return;
  listen_.relay->remove(*this);
  worker_.unregister_relay_client(*this);
  listen_.relay = nullptr;
  listen_.relayed.clear();
}

}  // namespace pgsluice
