// The `relay` action on servers (listen_relay.h): a pooled server's LISTEN read-back at the end of
// the client's transaction, and the pool's listener connection, whose messages go to its relay.
#include <spdlog/spdlog.h>

#include "pgsluice/protocol/writer.h"
#include "pooler/base/log_level.h"
#include "pooler/core/client.h"
#include "pooler/core/listen_relay.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
using protocol::TransactionStatus;

void Server::sync_listen_channels(const ChannelSet& client_channels) {
  if (!session_.listen.any() || session_.listen.synced()) return;
  // Only where their replies are the next ones, and not in a failed transaction (where the
  // client's statement fails too, and the transaction ends in ROLLBACK).
  if (!owes_nothing() || replies_.transaction_status() == TransactionStatus::failed) return;
  std::string sql = session_.listen.sync_query(
      client_channels, replies_.transaction_status() == TransactionStatus::in_block);
  if (!sql.empty()) send_internal_query(sql);
}

bool Server::quiet_for_notifications() const {
  return state_ == State::active && at_transaction_boundary() &&
         replies_.transaction_status() == TransactionStatus::idle &&
         replies_.internal_ready_owed() == 0;
}

void Server::flush_client_output() {
  if (session_.pin.pinned && quiet_for_notifications()) client_->deliver_relayed();
  client_->channel().flush();
}

void Server::read_back_listen(std::string_view ready_wire) {
  session_.held_ready.assign(ready_wire);
  // At a boundary with nothing owed: its replies come before anything the client sends next.
  send_internal_query(session_.listen.begin_query());
}

void Server::finish_listen_read_back() {
  const ChannelSet none;
  const ChannelSet& before = client_ != nullptr ? client_->listen_channels() : none;
  ChannelSet after;
  if (!session_.listen.finish(before, after)) {
    // The UNLISTEN * of the read-back did not run: the server may still listen.
    spdlog::warn("{} could not read back the channels its client listens on; closing at release",
                 log_id());
    timing.close_needed = true;
  }
  std::string ready = std::move(session_.held_ready);
  session_.held_ready.clear();
  if (client_ != nullptr) client_->on_listen_read_back(std::move(after), std::move(ready));
}

void Server::send_listener_query(const std::string& sql) {
  if (log_enabled(spdlog::level::debug)) spdlog::debug("{} relay query: {}", log_id(), sql);
  pp::write_query(channel_.output(), sql);
  channel_.flush();
}

void Server::process_listener_input() {
  pp::FrameReader& in = channel_.input();
  while (state_ == State::listening) {
    pp::HeaderResult header = in.peek();
    if (header.status == pp::FrameStatus::need_more) return;
    if (header.status == pp::FrameStatus::error) {
      close(fmt::format("invalid message from server: {}", pp::to_string(header.error)));
      return;
    }
    if (header.header.wire_size() > in.unread_size()) return;
    relay_->on_listener_message(*this, in.take(header.header));
  }
}

}  // namespace pgsluice
