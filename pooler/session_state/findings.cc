// The findings table; see session_findings.h.
#include "pooler/session_state/findings.h"

#include <string>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/session_state.h"

namespace pgsluice {

namespace {
constexpr size_t kMaxSample = 300;

uint64_t hash_text(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// The findings table's keys: the event's fields apart by \x1f, then its statement's fingerprint's
// 8 bytes. Appended by hand into a reused buffer: every statement that leaves session state is
// counted (a client's SET in every transaction, kept), and fmt::format with three allocations
// was most of what a kept SET cost the pooler beyond forwarding it (docs/profile.md, 0c).
void append_maker_key(std::string& out, const FindingEvent& e) {
  out.clear();
  for (std::string_view part : {e.kind, e.detail, e.database, e.user, e.application_name}) {
    out.append(part).push_back('\x1f');
  }
  out.append(e.action);
}
}  // namespace

uint64_t SessionFindings::fingerprint_of(std::string_view statement, std::string& normalized) {
  uint64_t h = hash_text(statement);
  auto it = fingerprints_.find(h);
  if (it == fingerprints_.end()) {
    if (fingerprints_.size() >= kMaxRows) fingerprints_.clear();
    protocol::StatementFingerprint fp = protocol::fingerprint_sql(statement);
    std::string sample = fp.normalized.size() > kMaxSample
                             ? fp.normalized.substr(0, kMaxSample) + "…"
                             : fp.normalized;
    it = fingerprints_.emplace(h, std::make_pair(fp.value, std::move(sample))).first;
  }
  normalized = it->second.second;
  return it->second.first;
}

const FindingRow* SessionFindings::record(const FindingEvent& e, int64_t now, bool& created) {
  created = false;
  ++total_;
  auto count = [&](size_t index) {
    FindingRow& row = rows_[index];
    ++row.count;
    row.last_seen = now;
    row.client_addr.assign(e.client_addr);
    return &row;
  };
  // Why the maker's row: EXECUTE p is the PREPARE p's state at work, and a row of its own (its
  // text differs) would show one prepared statement as two findings.
  thread_local std::string maker_key;
  append_maker_key(maker_key, e);
  if (e.uses_earlier_state) {
    if (auto maker = makers_.find(maker_key); maker != makers_.end()) return count(maker->second);
  }
  thread_local std::string normalized;
  normalized.clear();
  uint64_t fingerprint = e.statement.empty() ? 0 : fingerprint_of(e.statement, normalized);
  thread_local std::string key;
  key.assign(maker_key).push_back('\x1f');
  key.append(reinterpret_cast<const char*>(&fingerprint), sizeof fingerprint);
  auto it = index_.find(key);
  if (it != index_.end()) {
    if (!e.uses_earlier_state) makers_[maker_key] = it->second;
    return count(it->second);
  }
  if (rows_.size() >= kMaxRows) {
    ++dropped_;
    return nullptr;
  }
  FindingRow row;
  row.kind = std::string(e.kind);
  row.detail = std::string(e.detail);
  row.certainty = std::string(e.certainty);
  row.action = std::string(e.action);
  row.database = std::string(e.database);
  row.user = std::string(e.user);
  row.application_name = std::string(e.application_name);
  row.client_addr = std::string(e.client_addr);
  row.source = std::string(e.source);
  row.sample = normalized;
  row.fingerprint = fingerprint;
  row.count = 1;
  row.first_seen = row.last_seen = now;
  index_.emplace(key, rows_.size());
  // A use with no maker seen (the PREPARE came before the pooler started, or on no statement
  // it saw) keeps a row of its own.
  if (!e.uses_earlier_state) makers_[maker_key] = rows_.size();
  rows_.push_back(std::move(row));
  created = true;
  return &rows_.back();
}

void SessionFindings::clear() {
  rows_.clear();
  index_.clear();
  makers_.clear();
  dropped_ = 0;
  total_ = 0;
}

OwnedFindingEvent::OwnedFindingEvent(const FindingEvent& e)
    : kind(e.kind),
      detail(e.detail),
      certainty(e.certainty),
      action(e.action),
      database(e.database),
      user(e.user),
      application_name(e.application_name),
      client_addr(e.client_addr),
      source(e.source),
      statement(e.statement) {}

FindingEvent OwnedFindingEvent::view() const {
  return FindingEvent{.kind = kind,
                      .detail = detail,
                      .certainty = certainty,
                      .action = action,
                      .database = database,
                      .user = user,
                      .application_name = application_name,
                      .client_addr = client_addr,
                      .source = source,
                      .statement = statement};
}

std::string_view finding_hint(std::string_view kind) {
  struct Hint {
    std::string_view kind, hint;
  };
  static constexpr Hint kHints[] = {
      {"set", "Use SET LOCAL inside a transaction, or ALTER ROLE/DATABASE … SET for a default."},
      {"set_config",
       "Use set_config(name, value, true), which lasts until the end of the transaction."},
      {"role", "Use SET LOCAL ROLE inside a transaction."},
      {"advisory_lock",
       "Use pg_advisory_xact_lock(), which is released at the end of the transaction."},
      {"listen", "LISTEN needs its own session: connect directly or through a session-mode pool."},
      {"prepare",
       "Use protocol-level prepared statements, or a session-mode pool for SQL PREPARE."},
      {"hold_cursor", "Use a cursor WITHOUT HOLD inside the transaction that reads it."},
      {"temp_object", "Create the temporary table with ON COMMIT DROP inside a transaction."},
      {"load", "Load the library with session_preload_libraries instead."},
      // The seed is the session's: a later transaction's random values come from another server.
      {"seed",
       "Call setseed() in the transaction whose random values it seeds, or use a session-mode pool "
       "for this user."},
      {"currval",
       "Read the new value where it is made: INSERT … RETURNING, or nextval() in the same "
       "transaction."},
      // The SQL text does not show what the call does: whatever it leaves is the function's.
      {"opaque_call",
       "Nothing tells the pooler what this call leaves in the session: have it leave nothing "
       "(SET LOCAL, set_config(…, true), pg_advisory_xact_lock()), or find out with "
       "session_state_verify = always."},
      {"hidden",
       "Make the code that left it transaction-local (SET LOCAL, set_config(…, true), "
       "pg_advisory_xact_lock(), ON COMMIT DROP)."},
      {"long_hold",
       "End transactions before waiting on anything else: an idle transaction holds its server "
       "from every other client."},
  };
  for (const Hint& h : kHints) {
    if (h.kind == kind) return h.hint;
  }
  return {};
}

bool failed_before_running(std::string_view error_body) {
  // Most errors are something else: one search of the body before it is parsed.
  if (error_body.find("C42883") == std::string_view::npos) return false;
  auto error = protocol::parse_error_fields(error_body);
  return error && error.value.code == "42883" && !error.value.field('P').empty() &&
         error.value.field('W').empty();
}

std::optional<std::string> SharedFindings::record(const FindingEvent& event, int64_t now) {
  std::lock_guard lock(mutex_);
  bool created = false;
  const FindingRow* row = findings_.record(event, now, created);
  if (!created || row == nullptr) return std::nullopt;
  return row->sample;
}

std::vector<FindingRow> SharedFindings::rows() {
  std::lock_guard lock(mutex_);
  return findings_.rows();
}

uint64_t SharedFindings::dropped() {
  std::lock_guard lock(mutex_);
  return findings_.dropped();
}

uint64_t SharedFindings::total() {
  std::lock_guard lock(mutex_);
  return findings_.total();
}

}  // namespace pgsluice
