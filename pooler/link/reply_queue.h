// What a server connection still owes, and whether it may go back to the pool: the bookkeeping
// of a linked server as a pure class, without sockets, fed the type of every client message the
// server gets and the server's replies (tests/unit/pooler/reply_queue_test.cc feeds it bytes).
//
// PostgreSQL answers each Query, FunctionCall and Sync with one ReadyForQuery; Parse, Bind,
// Describe, Execute, Close and Flush open an extended-protocol batch that only a Sync ends (a
// Flush makes the server answer without ending it); a COPY runs from CopyIn/Out/BothResponse to
// the CopyDone (or CopyFail) of its sender. Queries the pooler sends itself (parameter sync,
// reset, checks) are owed apart: their ReadyForQuery never reaches the client. The transaction
// boundary, where a server may be released in transaction mode, is a ReadyForQuery 'I' with
// nothing of that owed or open.
#pragma once

#include <cstdint>
#include <vector>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/frame.h"
#include "pgsluice/protocol/message_types.h"

namespace pgsluice {

class ReplyQueue {
 public:
  // Who is sending CopyData now. CopyBoth (replication) has both sides sending.
  enum class Copy : uint8_t { none, in, out, both };

  // --- client → server ---
  // Every message the client sends to the server (inline: called per forwarded message).
  void on_client_message(char type) {
    namespace fe = protocol::frontend;
    switch (type) {
      case fe::kQuery:
      case fe::kFunctionCall:
        ++client_ready_owed_;
        break;
      case fe::kSync:
        // Which of the owed are Syncs (copy_in_started), bit i for the i-th oldest.
        if (client_ready_owed_ < kTrackedOwed) owed_syncs_ |= uint64_t{1} << client_ready_owed_;
        ++client_ready_owed_;
        extended_open_ = false;
        break;
      case fe::kParse:
      case fe::kBind:
      case fe::kDescribe:
      case fe::kClose:
      case fe::kFlush:
      case fe::kExecute:
        extended_open_ = true;
        break;
      case fe::kCopyDone:
      case fe::kCopyFail:
        end_copy_in();
        break;
      default:
        break;
    }
  }
  // A Query the pooler sends itself: its ReadyForQuery is the pooler's. `tag` says whose
  // query it is, for the replies that come before that ReadyForQuery (internal_front); the
  // link gives it no meaning (the server's InternalQuery, server_query.h, does).
  void on_internal_query(uint8_t tag = 0) { internal_.push_back(tag); }

  // --- server → client ---
  // A reply that goes to the client: ReadyForQuery and the COPY messages count; others pass.
  void on_client_reply(const protocol::Message& reply) {
    if (reply.type == protocol::backend::kReadyForQuery) {
      on_client_ready(status_of(reply));
    } else {
      on_copy_reply(reply.type);
    }
  }
  // ReadyForQuery's status; a malformed one counts as a failed transaction (never released).
  static protocol::TransactionStatus status_of(const protocol::Message& ready);
  // A ReadyForQuery for the client: one fewer owed, and no COPY survives it.
  void on_client_ready(protocol::TransactionStatus status);
  // A ReadyForQuery for the pooler's own query, the oldest owed; false when none was owed.
  bool on_internal_ready(protocol::TransactionStatus status);
  // CopyInResponse, CopyOutResponse, CopyBothResponse or the server's CopyDone (other types
  // change nothing).
  void on_copy_reply(char type);
  // Logged in: idle, nothing owed.
  void on_login_ready() { tx_status_ = protocol::TransactionStatus::idle; }

  // --- questions ---
  [[nodiscard]] protocol::TransactionStatus transaction_status() const { return tx_status_; }
  [[nodiscard]] uint32_t client_ready_owed() const { return client_ready_owed_; }
  [[nodiscard]] uint32_t internal_ready_owed() const {
    return static_cast<uint32_t>(internal_.size());
  }
  // The tag of the pooler's query whose replies come now (the oldest owed); 0 when none is.
  [[nodiscard]] uint8_t internal_front() const { return internal_.empty() ? 0 : internal_.front(); }
  [[nodiscard]] bool extended_open() const { return extended_open_; }
  [[nodiscard]] Copy copy() const { return copy_; }
  [[nodiscard]] bool copy_in() const { return copy_ == Copy::in || copy_ == Copy::both; }
  [[nodiscard]] bool copy_out() const { return copy_ == Copy::out || copy_ == Copy::both; }
  // A request is under way: a reply is owed, a batch or a COPY is open. A client that leaves
  // now leaves a server that cannot be finished for anyone else.
  [[nodiscard]] bool request_open() const {
    return copy_ != Copy::none || client_ready_owed_ > 0 || extended_open_ || !internal_.empty();
  }
  // Nothing owed to anyone and no transaction open: the link may end here.
  [[nodiscard]] bool at_transaction_boundary() const {
    return tx_status_ == protocol::TransactionStatus::idle && !request_open();
  }

 private:
  // CopyInResponse: PostgreSQL reads what follows the COPY's start in COPY mode, where it
  // ignores Sync (for libpq, which sends one after the Execute of a COPY before it knows it is
  // one, and another after its CopyDone). The Syncs owed now all came after the COPY's start
  // (what came before is answered): none will get a ReadyForQuery.
  void copy_in_started();
  void end_copy_in() {
    if (copy_ == Copy::both) {
      copy_ = Copy::out;
    } else if (copy_ == Copy::in) {
      copy_ = Copy::none;
    }
  }

  protocol::TransactionStatus tx_status_ = protocol::TransactionStatus::idle;
  static constexpr uint32_t kTrackedOwed = 64;
  uint32_t client_ready_owed_ = 0;  // one per Query, FunctionCall and Sync
  uint64_t owed_syncs_ = 0;         // of the first kTrackedOwed owed, which are Syncs
  // One tag per query of the pooler's own, oldest first: a few at most (a cleaning sends its
  // reset, cleanup, lookup and verify queries at once), so the vector's capacity, once grown,
  // is kept for the server's life.
  std::vector<uint8_t> internal_;
  bool extended_open_ = false;  // a Parse … Flush without its Sync yet
  Copy copy_ = Copy::none;
};

}  // namespace pgsluice
