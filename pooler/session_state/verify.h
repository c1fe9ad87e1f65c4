// session_state_verify: the server's own word on what a client left. The SQL checks see only what
// the SQL text shows; a function, a DO block with dynamic SQL or an extension can take an advisory
// lock, LISTEN or set a setting where no classifier can see it. After a release in transaction
// mode (every one under `always`, one in session_state_verify_sample under `sample`), one query
// reads the session's listening channels, advisory locks, SQL prepared statements, holdable
// cursors, temp relations, session-set settings and role; what the checks did not track there is
// a finding of kind `hidden` (source "server"), and the server is cleaned with DISCARD ALL before
// it serves anyone else. The same file counts `long_hold`: a client idle in a transaction on its
// server longer than session_state_long_hold.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pgsluice/protocol/session_state.h"
#include "pooler/config/session_policy.h"

namespace pgsluice {

class ParameterSet;

// What the SQL checks saw clients leave on one server (forwarded findings under any action) since
// it was last cleaned with DISCARD ALL: the state the verify query is allowed to find.
class SessionTrack {
 public:
  void note(const protocol::SessionStateFinding& finding);
  void clear();
  [[nodiscard]] bool saw(protocol::SessionStateKind kind) const {
    return (kinds_ & (1u << static_cast<unsigned>(kind))) != 0;
  }
  // A setting the checks saw set (any setting after a set_config with a non-constant name).
  [[nodiscard]] bool saw_setting(std::string_view name) const;

 private:
  uint32_t kinds_ = 0;
  bool any_setting_ = false;
  std::vector<std::string> settings_;
};

// The verify query's one row.
struct VerifyAnswer {
  int64_t listen_channels = 0;
  int64_t advisory_locks = 0;
  int64_t sql_prepared = 0;
  int64_t hold_cursors = 0;
  int64_t temp_relations = 0;
  std::vector<std::string> session_settings;  // pg_settings with source 'session'
  bool role_changed = false;                  // current_user or session_user is not the login's
};

struct VerifyDifference {
  std::string_view kind;  // the session-state kind it would have been: advisory_lock, listen, …
  std::string detail;     // "1 lock", "myapp.tenant", …
};

// The query; `login_user` is the user the server logged in as. With `expected` (the settings
// the pooler believes the server carries beyond its defaults: Server::extras_), the strict form
// after an opaque call: a setting counts only when its value is not the expected one, and the
// role only when current_user and session_user are not the expected role and session
// authorization, so that a function that changed a setting a client keeps is seen too.
std::string verify_query(std::string_view login_user, const ParameterSet* expected = nullptr);
// Reads the row (DataRow body); nullopt when it is not the verify query's row.
std::optional<VerifyAnswer> parse_verify_row(std::string_view data_row_body);
// What is on the server that the checks did not track. `reported` (ParameterStatus) and
// `applied` (startup extras the pooler set) are settings the pooler itself keeps in step.
// `strict` (the answer of the strict query): the track is not trusted, since a function may
// have changed what a statement had set, and the applied settings were compared by value in the
// query itself; only the reported ones, which ParameterStatus keeps exact, are left out.
std::vector<VerifyDifference> compare_with_track(const VerifyAnswer& answer,
                                                 const SessionTrack& track,
                                                 const ParameterSet& reported,
                                                 const ParameterSet& applied, bool strict = false);

// Whether this release is verified: always, or every N-th release of the process. Inline for
// `off` (the default), which every release asks.
bool verify_sampled_turn(int sample);
inline bool verify_turn(SessionVerifyMode mode, int sample) {
  switch (mode) {
    case SessionVerifyMode::off:
      return false;
    case SessionVerifyMode::always:
      return true;
    case SessionVerifyMode::sample:
      return verify_sampled_turn(sample);
  }
  return false;
}

// The verification state of one server.
class SessionVerifier {
 public:
  SessionTrack& track() { return track_; }
  // Who used the server last, for the findings (the client is gone when the answer comes).
  void note_client(std::string_view application_name, std::string_view addr);
  // A call of a function the checks cannot see into ran here under opaque_call:reset: the next
  // release verifies (strictly), whatever session_state_verify says.
  void note_opaque_call(std::string_view name);
  [[nodiscard]] bool opaque_call_ran() const { return !opaque_calls_.empty(); }
  void expect() {
    awaiting_ = true;
    strict_ = opaque_call_ran();
    answer_.reset();
  }
  [[nodiscard]] bool awaiting() const { return awaiting_; }
  [[nodiscard]] bool strict() const { return strict_; }
  // The opaque calls that made the check strict ("f, g"), for its findings; empty otherwise.
  [[nodiscard]] const std::string& caused_by() const { return caused_by_; }
  void on_data_row(std::string_view body);
  // The differences, and the end of the wait; the query gave no row: one difference "no answer".
  std::vector<VerifyDifference> finish(const ParameterSet& reported, const ParameterSet& applied);

  // long_hold: the transaction (by its start time) already counted.
  uint64_t long_hold_counted_xact = 0;
  [[nodiscard]] const std::string& last_application_name() const { return last_app_; }
  [[nodiscard]] const std::string& last_client_addr() const { return last_addr_; }

 private:
  SessionTrack track_;
  bool awaiting_ = false;
  bool strict_ = false;
  std::vector<std::string> opaque_calls_;  // since the last check, at most kMaxOpaqueNames
  std::string caused_by_;                  // finish()'s, kept for the findings
  std::optional<VerifyAnswer> answer_;
  std::string last_app_;
  std::string last_addr_;
};

}  // namespace pgsluice
