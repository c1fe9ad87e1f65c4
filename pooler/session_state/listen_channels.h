// The `relay` action for LISTEN on a pooled server: what a client's transaction did to its
// channels, read back from the server once the transaction has ended.
//
// Why read back, as `keep` does for settings (kept_settings.h): PostgreSQL alone knows whether a
// LISTEN or UNLISTEN stuck. A ROLLBACK, a ROLLBACK TO SAVEPOINT, an error later in the implicit
// transaction and DISCARD ALL all leave a set of channels that the statements do not tell. The
// client's statements therefore run on the server it is linked to, which answers them exactly as
// PostgreSQL does, and at the ReadyForQuery 'I' that ends the transaction one query reads
// `pg_listening_channels()` and unlistens everything, so the server goes back to the pool clean.
//
// For the answer to be the client's whole set, the server must carry the client's channels
// before its statements run: the sync query LISTENs them first, when the server owes nothing.
// Outside a transaction block it commits on its own and the answer is exact. Inside one (BEGIN
// came in an earlier Query, as psycopg sends it) it belongs to the client's transaction: when
// that commits the answer is exact again, and when it ends in ROLLBACK nothing of it stuck, the
// sync included, so the client keeps the channels it had. (A ROLLBACK TO a savepoint set before
// the sync undoes the sync too: then the client's earlier channels are taken to be kept.) When no
// sync could run (behind other requests of a pipeline) the answer holds what the transaction
// added, and the client's UNLISTENs are taken to have stuck unless the transaction rolled back.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pgsluice/protocol/session_state.h"

namespace pgsluice {

// A client's channels, by the names PostgreSQL reports (pg_listening_channels, and the channel
// of a NotificationResponse).
using ChannelSet = std::set<std::string, std::less<>>;

class ListenCapture {
 public:
  // A listen finding of a statement about to be forwarded: LISTEN x, UNLISTEN x, UNLISTEN *.
  void note(const protocol::SessionStateFinding& finding);
  // DISCARD ALL, which unlistens everything.
  void note_discard_all();
  // Something was noted since the last read-back began.
  [[nodiscard]] bool any() const { return noted_; }
  [[nodiscard]] bool synced() const { return synced_; }

  // The query that LISTENs the client's channels on the server before its statement runs; empty
  // when there is nothing to put there or it ran already in this stretch. Marks it as run.
  // `in_block`: the server is inside a transaction block (see above).
  std::string sync_query(const ChannelSet& client_channels, bool in_block);
  // A CommandComplete of the client's while something is noted: a ROLLBACK tag (ROLLBACK, ABORT,
  // or the COMMIT of a failed transaction) means the transaction's changes did not stick.
  void on_client_command_complete(std::string_view body);

  // The read-back: the server's channels (one row each), then UNLISTEN * in the same Query. What
  // was noted moves to "being read".
  std::string begin_query();
  [[nodiscard]] bool awaiting() const { return awaiting_; }
  void on_row(std::string_view data_row_body);
  // The SELECT's CommandComplete: zero rows then means no channel, not a failed query.
  void on_select_complete() { answered_ = true; }
  // The answer: `after` becomes the client's channels once the transaction has ended, from
  // `before`, what it had. False when the query failed (nothing can be known: `after` is
  // `before`). Ready for the next stretch either way.
  bool finish(const ChannelSet& before, ChannelSet& after);

  // Forgets everything, a read-back under way included.
  void clear() { *this = ListenCapture(); }

 private:
  bool noted_ = false;
  bool synced_ = false;
  bool synced_in_block_ = false;
  bool rolled_back_ = false;
  // Unsynced stretches only: what the client's UNLISTENs named (all: UNLISTEN * or DISCARD ALL).
  ChannelSet unlistened_;
  bool unlistened_all_ = false;
  bool awaiting_ = false;
  bool row_failed_ = false;
  std::vector<std::string> rows_;
  // What begin_query took from the stretch.
  bool reading_synced_ = false;
  bool reading_synced_in_block_ = false;
  bool reading_rolled_back_ = false;
  ChannelSet reading_unlistened_;
  bool reading_unlistened_all_ = false;
  bool answered_ = false;
};

}  // namespace pgsluice
