// The `keep` action for settings: what a client's transaction changed among its session settings
// (SET, RESET, set_config(…, false), SET ROLE, SET SESSION AUTHORIZATION, RESET ALL, DISCARD
// ALL), read back from the server once the transaction has ended, so that the pooler knows both
// what the client now wants and what the server now has.
//
// Why read back instead of following the statements: PostgreSQL alone knows whether a SET stuck.
// A ROLLBACK, a ROLLBACK TO SAVEPOINT, a SET that failed, SET LOCAL and a transaction aborted by a
// later error all leave a value the statements do not tell; one query after ReadyForQuery 'I'
// reads the outcome of all of them. Parameters the server reports with ParameterStatus
// (application_name, TimeZone, client_encoding, …) need no reading: their reports say it. A plain
// `SET name = constant` that committed alone needs none either once the pool has seen what the
// server shows for it (set_literal.h): settle_known().
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pgsluice/protocol/session_state.h"
#include "pooler/session_state/dirty_state.h"
#include "pooler/session_state/params.h"
#include "pooler/session_state/set_literal.h"

namespace pgsluice {

class SettingsCapture {
 public:
  // A set, set_config or role finding of the transaction (others are ignored). A set_config
  // whose name is not a constant cannot be read back: the caller resets instead. `literal`: what a
  // plain SET that commits alone gives the setting (set_literal.h), or nullopt.
  void note(const protocol::SessionStateFinding& finding,
            std::optional<std::string> literal = std::nullopt);
  // Something may have changed the noted settings since (a statement the checks flag, an error):
  // their literals no longer tell what the server has.
  void forget_literals();
  // RESET ALL (every setting but the role) or DISCARD ALL (the role and session authorization
  // too): every name the pooler knows of is read back.
  void note_reset_all(bool discard_all);
  // Something noted and not yet being read back.
  [[nodiscard]] bool any() const { return pending_.any(); }
  // Reported parameters (DateStyle, TimeZone, …) need no read-back, but a RESET of one that the
  // client gave at startup goes, on a direct connection, to that startup value, not to the
  // server's default: the names of `startup` whose last statement in the transaction was a
  // reset (RESET name, RESET ALL, DISCARD ALL), forgotten as they are taken.
  [[nodiscard]] bool resets_reported() const { return !reported_.empty() || reported_all_; }
  std::vector<std::string> take_reported_resets(const ParameterSet& startup);
  // Cannot be read back (the client left before its transaction ended at a boundary): every
  // noted setting, and any being read back, is reset with the server's cleaning instead.
  void mark_for_reset(DirtyState& dirty) const;
  // Forgets everything, a read-back under way included.
  void clear() { *this = SettingsCapture(); }
  // Forgets what is noted for a read-back (nothing left to read: only reported parameters),
  // not the reported parameters' resets.
  void forget_pending() { pending_ = Notes(); }

  // What is noted, settled without a query: true when every noted setting has a literal whose
  // value `known` holds for the server's `version` (client_settings and server_applied then
  // take it, as finish() would). Not while a read-back is under way: its answer comes after.
  bool settle_known(const SetValueCache& known, std::string_view version,
                    ParameterSet& client_settings, ParameterSet& server_applied);

  // The query that reads the noted names back (they move from pending to being read); `known` are
  // the names the pooler tracks on either side (the client's wanted settings, the server's applied
  // ones), read back after RESET ALL or DISCARD ALL. Empty when nothing is left to read (only
  // reported parameters).
  std::string begin_query(const ParameterSet& client_settings, const ParameterSet& server_applied);
  [[nodiscard]] bool awaiting() const { return awaiting_; }
  // The query's one row.
  void on_row(std::string_view data_row_body);

  // The answer: `client_settings` become what the client now has (its startup value again
  // where it reset a setting to its default), `server_applied` what the server has beyond its
  // own defaults. `login_user` is the server's session authorization by default. False when no
  // row came (the query failed): the caller cannot know the server's settings any more. What
  // was noted meanwhile stays pending.
  // The values read for settings noted with a literal go into `learned` (for `version`).
  bool finish(const ParameterSet& startup, const std::string& login_user,
              ParameterSet& client_settings, ParameterSet& server_applied,
              SetValueCache* learned = nullptr, std::string_view version = {});

 private:
  struct Item {
    std::string name;
    bool released = false;  // its last statement was RESET / SET … TO DEFAULT / SET ROLE NONE
    std::optional<std::string> literal;  // its last statement was a plain SET to this
  };
  // What one stretch of statements noted.
  struct Notes {
    std::vector<Item> items;
    bool all = false;
    bool discard_all = false;
    [[nodiscard]] bool any() const { return !items.empty() || all || discard_all; }
    void add(std::string_view name, bool released, std::optional<std::string> literal = {});
  };

  // Noted since the last read-back began: the client may go on sending while it is under way.
  Notes pending_;
  // Being read back: the row's columns are these items' values.
  Notes reading_;
  bool awaiting_ = false;
  std::optional<std::vector<std::optional<std::string>>> row_;
  // Reported parameters the transaction set or reset (true: reset last), and RESET ALL.
  std::vector<std::pair<std::string, bool>> reported_;
  bool reported_all_ = false;
  void note_reported(std::string_view name, bool released);
};

}  // namespace pgsluice
