// The verify query, its comparison with what the SQL checks tracked, and long holds; see
// session_verify.h.
#include "pooler/session_state/verify.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>

#include "pgsluice/protocol/backend.h"
#include "pooler/session_state/params.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

namespace {

constexpr size_t kColumns = 7;

bool read_int(const std::optional<std::string_view>& v, int64_t& out) {
  if (!v) return false;
  auto r = std::from_chars(v->data(), v->data() + v->size(), out);
  return r.ec == std::errc() && r.ptr == v->data() + v->size();
}

}  // namespace

// --- SessionTrack ---

void SessionTrack::note(const pp::SessionStateFinding& f) {
  if (f.effect == pp::SessionStateEffect::release) return;
  kinds_ |= 1u << static_cast<unsigned>(f.kind);
  if (f.kind == pp::SessionStateKind::set || f.kind == pp::SessionStateKind::set_config) {
    if (f.detail.empty() || f.lexer_only) {
      any_setting_ = true;
    } else if (!saw_setting(f.detail)) {
      settings_.push_back(f.detail);
    }
  }
}

void SessionTrack::clear() {
  kinds_ = 0;
  any_setting_ = false;
  settings_.clear();
}

bool SessionTrack::saw_setting(std::string_view name) const {
  if (any_setting_) return true;
  for (const std::string& s : settings_) {
    if (iequals(s, name)) return true;
  }
  return false;
}

// --- the query ---

namespace {

// The settings and role columns of the strict query: what differs from `expected`.
std::string strict_settings_column(const ParameterSet& expected) {
  std::string column =
      "(SELECT pg_catalog.string_agg(name, ',') FROM pg_catalog.pg_settings "
      "WHERE source = 'session'";
  std::string values;
  for (const auto& [name, value] : expected.items()) {
    if (is_role_setting(name)) continue;  // not in pg_settings: the role column's business
    if (!values.empty()) values += ", ";
    values += fmt::format("({}, {})", quote_literal(ascii_lower(name)), quote_literal(value));
  }
  if (!values.empty()) {
    column += " AND (pg_catalog.lower(name), pg_catalog.current_setting(name)) NOT IN (VALUES " +
              values + ")";
  }
  return column + ")";
}

std::string strict_role_column(std::string_view login_user, const ParameterSet& expected) {
  const std::string* authorization = expected.get(kSessionAuthorization);
  const std::string session_user(authorization != nullptr ? std::string_view(*authorization)
                                                          : login_user);
  const std::string* role = expected.get(kRole);
  const std::string current_user = role != nullptr && *role != "none" ? *role : session_user;
  return fmt::format("(session_user::pg_catalog.text <> {} OR current_user::pg_catalog.text <> {})",
                     quote_literal(session_user), quote_literal(current_user));
}

}  // namespace

std::string verify_query(std::string_view login_user, const ParameterSet* expected) {
  // Why count(*) per catalog rather than the rows: one short DataRow, whatever a session holds.
  // Prepared statements: only SQL PREPARE (from_sql); protocol-level ones, the pooler's
  // PGSLUICE_n included, are the protocol's business, not session state a statement left; nor
  // are the SQL ones the pooler keeps for clients (pgsluice_s<n>, sql_prepared.h).
  return fmt::format(
      "SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_listening_channels()), "
      "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' "
      "AND pid = pg_catalog.pg_backend_pid()), "
      "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_prepared_statements WHERE from_sql "
      "AND name OPERATOR(pg_catalog.!~) '^pgsluice_s[0-9]+$'), "
      "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_cursors WHERE is_holdable), "
      "(SELECT pg_catalog.count(*) FROM pg_catalog.pg_class "
      "WHERE relnamespace = pg_catalog.pg_my_temp_schema()), {}, {}",
      expected != nullptr ? strict_settings_column(*expected)
                          : "(SELECT pg_catalog.string_agg(name, ',') FROM pg_catalog.pg_settings "
                            "WHERE source = 'session')",
      expected != nullptr ? strict_role_column(login_user, *expected)
                          : fmt::format("(current_user <> session_user OR session_user <> {})",
                                        quote_literal(login_user)));
}

std::optional<VerifyAnswer> parse_verify_row(std::string_view body) {
  auto row = pp::parse_data_row(body);
  if (!row || row.value.values.size() != kColumns) return std::nullopt;
  const auto& v = row.value.values;
  VerifyAnswer a;
  if (!read_int(v[0], a.listen_channels) || !read_int(v[1], a.advisory_locks) ||
      !read_int(v[2], a.sql_prepared) || !read_int(v[3], a.hold_cursors) ||
      !read_int(v[4], a.temp_relations) || !v[6]) {
    return std::nullopt;
  }
  if (v[5]) {
    std::string_view s = *v[5];
    while (!s.empty()) {
      size_t comma = s.find(',');
      a.session_settings.emplace_back(s.substr(0, comma));
      if (comma == std::string_view::npos) break;
      s.remove_prefix(comma + 1);
    }
  }
  a.role_changed = *v[6] == "t";
  return a;
}

std::vector<VerifyDifference> compare_with_track(const VerifyAnswer& a, const SessionTrack& track,
                                                 const ParameterSet& reported,
                                                 const ParameterSet& applied, bool strict) {
  using K = pp::SessionStateKind;
  std::vector<VerifyDifference> out;
  auto count = [&](int64_t n, K kind, std::string_view unit) {
    if (n > 0 && (strict || !track.saw(kind))) {
      out.push_back({pp::to_string(kind), fmt::format("{} {}{}", n, unit, n == 1 ? "" : "s")});
    }
  };
  count(a.advisory_locks, K::advisory_lock, "lock");
  count(a.listen_channels, K::listen, "channel");
  count(a.sql_prepared, K::prepare, "statement");
  count(a.hold_cursors, K::hold_cursor, "cursor");
  count(a.temp_relations, K::temp_object, "relation");
  for (const std::string& name : a.session_settings) {
    // Reported settings (client_encoding, TimeZone, …) are kept in step through ParameterStatus
    // and the startup extras are set by the pooler itself: neither is hidden.
    if (reported.get(name) != nullptr) continue;
    if (!strict && (applied.get(name) != nullptr || track.saw_setting(name))) continue;
    out.push_back({pp::to_string(K::set), name});
  }
  if (a.role_changed && (strict || !track.saw(K::role))) {
    out.push_back({pp::to_string(K::role), "role"});
  }
  return out;
}

bool verify_sampled_turn(int sample) {
  // One count for the process, whichever worker releases (one in N means one in N of the
  // pool's releases); the first release is checked, so that a short staging run checks
  // something.
  static std::atomic<uint64_t> releases{0};
  return releases.fetch_add(1, std::memory_order_relaxed) %
             static_cast<uint64_t>(sample > 0 ? sample : 1) ==
         0;
}

// --- SessionVerifier ---

void SessionVerifier::note_client(std::string_view application_name, std::string_view addr) {
  last_app_ = application_name;
  last_addr_ = addr;
}

void SessionVerifier::on_data_row(std::string_view body) {
  if (auto a = parse_verify_row(body)) answer_ = std::move(*a);
}

void SessionVerifier::note_opaque_call(std::string_view name) {
  // A few names say enough; a transaction calling hundreds of functions costs no more.
  constexpr size_t kMaxOpaqueNames = 4;
  if (std::find(opaque_calls_.begin(), opaque_calls_.end(), name) != opaque_calls_.end()) return;
  if (opaque_calls_.size() < kMaxOpaqueNames) opaque_calls_.emplace_back(name);
}

std::vector<VerifyDifference> SessionVerifier::finish(const ParameterSet& reported,
                                                      const ParameterSet& applied) {
  awaiting_ = false;
  caused_by_.clear();
  if (strict_) {
    for (const std::string& name : opaque_calls_) {
      if (!caused_by_.empty()) caused_by_ += ", ";
      caused_by_ += name;
    }
  }
  opaque_calls_.clear();
  if (!answer_) return {VerifyDifference{"verify", "no answer"}};
  std::vector<VerifyDifference> out =
      compare_with_track(*answer_, track_, reported, applied, strict_);
  answer_.reset();
  return out;
}

}  // namespace pgsluice
