// The findings table of the session-state checks: one row per (kind, detail, database, user,
// application_name, statement fingerprint, action), with how often it happened, what was done
// about it, who did it last and a normalized sample of the query. A use of what an earlier
// statement left (EXECUTE p) is counted in that statement's row (PREPARE p). Shown by SHOW LEAKS,
// exported as metrics, and the first occurrence of each row is logged.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pgsluice {

struct FindingRow {
  std::string kind;       // set, set_config, role, …, or "opaque_call" for a possible one
  std::string detail;     // the setting, lock function, channel, … (or the function called)
  std::string certainty;  // definite, possible
  std::string action;     // what pgsluice did: warn, reject, reset, pin
  std::string database;
  std::string user;
  std::string application_name;
  std::string client_addr;  // of the last occurrence
  std::string source;       // "query" (Query/Parse text) or "server" (evidence the server gave)
  std::string sample;       // the normalized statement (constants as $n)
  uint64_t fingerprint = 0;
  uint64_t count = 0;
  int64_t first_seen = 0;  // unix seconds
  int64_t last_seen = 0;
};

struct FindingEvent {
  std::string_view kind;
  std::string_view detail;
  std::string_view certainty;
  std::string_view action;
  std::string_view database;
  std::string_view user;
  std::string_view application_name;
  std::string_view client_addr;
  std::string_view source;
  std::string_view statement;  // the raw statement text (normalized once, on the row's creation)
  // The statement relies on state an earlier one of this kind and detail made (EXECUTE p on
  // PREPARE p): counted in the row of the last such statement of the database, user,
  // application and action, when there is one.
  bool uses_earlier_state = false;
};

// A FindingEvent that owns its strings: an opaque call kept until the server has answered its
// Query (session_checks.cc).
struct OwnedFindingEvent {
  std::string kind, detail, certainty, action, database, user, application_name, client_addr,
      source, statement;
  explicit OwnedFindingEvent(const FindingEvent& e);
  [[nodiscard]] FindingEvent view() const;
};

// What to change in the application so that a finding of `kind` ("set", …, "opaque_call",
// "hidden", "long_hold") needs no pooler action: the hint a refusal gives, and SHOW LEAKS' and
// the leak report's `hint` column for every action (keep and relay included, which make the
// statement work but tie the application to a pooler that does). Empty for an unknown kind.
std::string_view finding_hint(std::string_view kind);

// Whether the ErrorResponse with this body says that its statement never ran because a function
// it calls does not exist: undefined_function (42883) raised while the statement itself was
// analysed (the error has a position in the client's text, 'P') and not inside a function body
// (no context, 'W'). PostgreSQL analyses a statement before it runs any of it, so none of its
// calls ran; 42883 at run time (a regprocedure cast of a column) has no position, and one from a
// function body has a context: those statements may have run something first.
bool failed_before_running(std::string_view error_body);

class SessionFindings {
 public:
  // Rows beyond this are not added (the count of dropped events is kept): a table that a
  // misbehaving client can grow without bound would be a memory leak of its own.
  static constexpr size_t kMaxRows = 10000;

  // Returns the row; `created` tells whether it is new (the caller logs new rows).
  const FindingRow* record(const FindingEvent& event, int64_t now, bool& created);

  [[nodiscard]] const std::vector<FindingRow>& rows() const { return rows_; }
  [[nodiscard]] uint64_t dropped() const { return dropped_; }
  [[nodiscard]] uint64_t total() const { return total_; }
  void clear();

 private:
  uint64_t fingerprint_of(std::string_view statement, std::string& normalized);

  std::vector<FindingRow> rows_;
  std::unordered_map<std::string, size_t> index_;  // key → row
  // (kind, detail, database, user, application_name, action) → the row of the last statement
  // that made this state (PREPARE p), for the uses that follow (EXECUTE p).
  std::unordered_map<std::string, size_t> makers_;
  // Statement text hash → (fingerprint, normalized), so that repeated statements are
  // normalized once; cleared when it grows past kMaxRows.
  std::unordered_map<uint64_t, std::pair<uint64_t, std::string>> fingerprints_;
  uint64_t dropped_ = 0;
  uint64_t total_ = 0;
};

// The findings table of every worker, behind a lock: a finding is recorded at most once per
// statement, never on the forwarding path of ordinary traffic.
class SharedFindings {
 public:
  // The new row's normalized sample when the event created a row.
  std::optional<std::string> record(const FindingEvent& event, int64_t now);
  [[nodiscard]] std::vector<FindingRow> rows();
  [[nodiscard]] uint64_t dropped();
  [[nodiscard]] uint64_t total();

 private:
  std::mutex mutex_;
  SessionFindings findings_;
};

}  // namespace pgsluice
