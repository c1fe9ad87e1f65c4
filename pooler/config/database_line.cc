// [databases], [users] and [peers] lines; see database_line.h.
#include "pooler/config/database_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "pooler/base/text.h"
#include "pooler/config/value_parsers.h"

namespace pgsluice {

namespace {

// PgBouncer's [databases] parameters pgsluice does not implement yet.
const std::set<std::string_view> kPgBouncerOnlyDatabaseKeys = {};

// PgBouncer's [users] parameters pgsluice does not implement yet.
const std::set<std::string_view> kPgBouncerOnlyUserKeys = {};

struct ConnParam {
  std::string key;
  std::string value;
};

// Splits `text` into key=value pairs. Values end at whitespace unless single-quoted; inside quotes
// '' and \' are a quote and \\ a backslash (PgBouncer knows only ''; libpq only \' — both are
// accepted). Returns an error message, empty on success.
std::string split_conn_params(std::string_view text, std::vector<ConnParam>& out) {
  size_t i = 0;
  const size_t n = text.size();
  auto skip_ws = [&] {
    while (i < n && is_space(text[i])) ++i;
  };
  for (;;) {
    skip_ws();
    if (i >= n) return {};
    const size_t key_start = i;
    while (i < n && text[i] != '=' && !is_space(text[i])) ++i;
    std::string key = ascii_lower(text.substr(key_start, i - key_start));
    skip_ws();
    if (i >= n || text[i] != '=') {
      return "syntax error: expected key=value, got " + quoted(text.substr(key_start));
    }
    if (key.empty()) return "syntax error: '=' without a parameter name";
    ++i;
    skip_ws();
    std::string value;
    if (i < n && text[i] == '\'') {
      ++i;
      bool closed = false;
      while (i < n) {
        const char c = text[i];
        if (c == '\'' && i + 1 < n && text[i + 1] == '\'') {
          value += '\'';
          i += 2;
        } else if (c == '\\' && i + 1 < n && (text[i + 1] == '\'' || text[i + 1] == '\\')) {
          value += text[i + 1];
          i += 2;
        } else if (c == '\'') {
          ++i;
          closed = true;
          break;
        } else {
          value += c;
          ++i;
        }
      }
      if (!closed) return "syntax error: unterminated quoted value for " + quoted(key);
      if (i < n && !is_space(text[i])) {
        return "syntax error: unexpected text after the quoted value of " + quoted(key);
      }
    } else {
      const size_t value_start = i;
      while (i < n && !is_space(text[i])) ++i;
      value = std::string(text.substr(value_start, i - value_start));
    }
    out.push_back({std::move(key), std::move(value)});
  }
}

// Parses p.value with `parse` into an optional field; the error, if any, is named by the key.
template <typename T, typename Parse>
bool parse_into(const ConnParam& p, std::optional<T>& field, LineProblems& problems, Parse parse) {
  T value{};
  if (std::string err = parse(p.value, value); !err.empty()) {
    problems.errors.push_back(p.key + ": " + err);
    return false;
  }
  field = value;
  return true;
}

// PgBouncer's per-database and per-user query_wait_timeout: a duration (0 disables), or -1 for
// "not set" (its documented meaning), which leaves the field unset so the next level applies.
bool parse_query_wait_timeout(const ConnParam& p, std::optional<Duration>& field,
                              LineProblems& problems) {
  if (trim(p.value) == "-1") {
    field.reset();
    return true;
  }
  return parse_into(p, field, problems, parse_duration);
}

auto int_between(int min, int max) {
  return [=](std::string_view v, int& out) { return parse_int(v, min, max, out); };
}

// The free-text [databases] parameters, by key; null for any other key.
std::string DatabaseEntry::*database_text_field(std::string_view key) {
  if (key == "host") return &DatabaseEntry::host;
  if (key == "dbname") return &DatabaseEntry::dbname;
  if (key == "user") return &DatabaseEntry::user;
  if (key == "password") return &DatabaseEntry::password;
  if (key == "client_encoding") return &DatabaseEntry::client_encoding;
  if (key == "datestyle") return &DatabaseEntry::datestyle;
  if (key == "timezone") return &DatabaseEntry::timezone;
  if (key == "application_name") return &DatabaseEntry::application_name;
  if (key == "connect_query") return &DatabaseEntry::connect_query;
  if (key == "auth_user") return &DatabaseEntry::auth_user;
  if (key == "auth_query") return &DatabaseEntry::auth_query;
  if (key == "auth_dbname") return &DatabaseEntry::auth_dbname;
  return nullptr;
}

// One [databases] parameter into `db`; false on an error (in `problems`).
bool apply_database_param(const ConnParam& p, std::string_view db_name, DatabaseEntry& db,
                          LineProblems& problems) {
  const std::string& k = p.key;
  if (auto text = database_text_field(k)) {
    db.*text = p.value;
    return true;
  }
  if (k == "port") {
    std::vector<int> ports;
    if (auto err = parse_port_list(p.value, ports); !err.empty()) {
      problems.errors.push_back("port: " + err);
      return false;
    }
    db.port = ports.front();
    db.ports = ports.size() > 1 ? std::move(ports) : std::vector<int>{};
    return true;
  }
  if (k == "target_session_attrs") {
    if (auto err = parse_target_session_attrs(p.value, db.target_session_attrs); !err.empty()) {
      problems.errors.push_back(k + ": " + err);
      return false;
    }
    return true;
  }
  if (k == "load_balance_hosts") {
    if (auto err = parse_load_balance_hosts(p.value, db.load_balance_hosts); !err.empty()) {
      problems.errors.push_back(k + ": " + err);
      return false;
    }
    return true;
  }
  if (k == "pool_size") return parse_into(p, db.pool_size, problems, int_between(1, 1'000'000));
  if (k == "min_pool_size") {
    return parse_into(p, db.min_pool_size, problems, int_between(0, 1'000'000));
  }
  if (k == "max_db_connections") {
    return parse_into(p, db.max_db_connections, problems, int_between(0, 1'000'000));
  }
  // reserve_pool_size is PgBouncer 1.24's spelling of reserve_pool.
  if (k == "reserve_pool" || k == "reserve_pool_size") {
    return parse_into(p, db.reserve_pool, problems, int_between(0, 1'000'000));
  }
  if (k == "max_db_client_connections") {
    return parse_into(p, db.max_db_client_connections, problems, int_between(0, 10'000'000));
  }
  if (k == "server_lifetime") return parse_into(p, db.server_lifetime, problems, parse_duration);
  if (k == "pool_mode") return parse_into(p, db.pool_mode, problems, parse_pool_mode);
  if (k == "query_wait_timeout") {
    return parse_query_wait_timeout(p, db.query_wait_timeout, problems);
  }
  if (k == "session_state_action") {
    return parse_into(p, db.session_state_action, problems, parse_session_policy);
  }
  if (kPgBouncerOnlyDatabaseKeys.contains(k)) {
    problems.warnings.push_back("database " + quoted(db_name) + ": parameter " + quoted(k));
    return true;
  }
  problems.errors.push_back("unknown database parameter " + quoted(k));
  return false;
}

// The [users] client timeouts (PgBouncer 1.24), by key; null for any other key.
std::optional<Duration> UserEntry::*user_timeout_field(std::string_view key) {
  if (key == "client_idle_timeout") return &UserEntry::client_idle_timeout;
  if (key == "query_timeout") return &UserEntry::query_timeout;
  if (key == "idle_transaction_timeout") return &UserEntry::idle_transaction_timeout;
  if (key == "transaction_timeout") return &UserEntry::transaction_timeout;
  return nullptr;
}

// One [users] parameter into `user`; false on an error (in `problems`).
bool apply_user_param(const ConnParam& p, std::string_view user_name, UserEntry& user,
                      LineProblems& problems) {
  if (p.key == "pool_mode") return parse_into(p, user.pool_mode, problems, parse_pool_mode);
  if (p.key == "session_state_action") {
    return parse_into(p, user.session_state_action, problems, parse_session_policy);
  }
  if (p.key == "max_user_connections") {
    return parse_into(p, user.max_user_connections, problems, int_between(0, 1'000'000));
  }
  if (p.key == "max_user_client_connections") {
    return parse_into(p, user.max_user_client_connections, problems, int_between(0, 10'000'000));
  }
  if (p.key == "pool_size") {
    return parse_into(p, user.pool_size, problems, int_between(1, 1'000'000));
  }
  if (p.key == "reserve_pool_size") {
    return parse_into(p, user.reserve_pool_size, problems, int_between(0, 1'000'000));
  }
  if (p.key == "query_wait_timeout") {
    return parse_query_wait_timeout(p, user.query_wait_timeout, problems);
  }
  if (auto timeout = user_timeout_field(p.key)) {
    return parse_into(p, user.*timeout, problems, parse_duration);
  }
  if (kPgBouncerOnlyUserKeys.contains(p.key)) {
    problems.warnings.push_back("user " + quoted(user_name) + ": parameter " + quoted(p.key));
    return true;
  }
  problems.errors.push_back("unknown user parameter " + quoted(p.key));
  return false;
}

}  // namespace

std::optional<DatabaseEntry> parse_database_line(std::string_view name, std::string_view value,
                                                 int line, LineProblems& problems) {
  if (iequals(name, "pgbouncer")) {
    // PgBouncer reserves it for its admin console, which clients reach under that name.
    problems.errors.push_back("database name 'pgbouncer' is reserved for the admin console");
    return std::nullopt;
  }
  std::vector<ConnParam> params;
  if (std::string err = split_conn_params(value, params); !err.empty()) {
    problems.errors.push_back(std::move(err));
    return std::nullopt;
  }
  DatabaseEntry db;
  db.name = name;
  db.line = line;
  bool ok = true;
  // Every parameter is looked at, so that one line reports all of its errors.
  for (const ConnParam& p : params) ok = apply_database_param(p, name, db, problems) && ok;
  if (!ok) return std::nullopt;
  // As libpq: one port for every host, or one per host.
  const size_t hosts = std::count(db.host.begin(), db.host.end(), ',') + 1;
  if (!db.ports.empty() && db.ports.size() != hosts) {
    problems.errors.push_back(fmt::format("port: {} ports for {} hosts", db.ports.size(), hosts));
    return std::nullopt;
  }
  return db;
}

std::optional<UserEntry> parse_user_line(std::string_view name, std::string_view value, int line,
                                         LineProblems& problems) {
  std::vector<ConnParam> params;
  if (std::string err = split_conn_params(value, params); !err.empty()) {
    problems.errors.push_back(std::move(err));
    return std::nullopt;
  }
  UserEntry user;
  user.name = name;
  user.line = line;
  bool ok = true;
  for (const ConnParam& p : params) ok = apply_user_param(p, name, user, problems) && ok;
  if (!ok) return std::nullopt;
  return user;
}

std::optional<PeerEntry> parse_peer_line(std::string_view id, std::string_view value, int line,
                                         LineProblems& problems) {
  PeerEntry peer;
  peer.line = line;
  // The id is what cancel keys carry in 16 bits (cancel_key.h); 0 is "no peer".
  if (std::string err = parse_int(id, 1, 65535, peer.id); !err.empty()) {
    problems.errors.push_back("peer id: " + err);
    return std::nullopt;
  }
  std::vector<ConnParam> params;
  if (std::string err = split_conn_params(value, params); !err.empty()) {
    problems.errors.push_back(std::move(err));
    return std::nullopt;
  }
  bool ok = true;
  for (const ConnParam& p : params) {
    if (p.key == "host") {
      peer.host = p.value;
    } else if (p.key == "port") {
      if (auto err = parse_int(p.value, 1, 65535, peer.port); !err.empty()) {
        problems.errors.push_back("port: " + err);
        ok = false;
      }
    } else if (p.key == "pool_size") {
      ok = parse_into(p, peer.pool_size, problems, int_between(1, 1'000'000)) && ok;
    } else {
      problems.errors.push_back("unknown peer parameter " + quoted(p.key));
      ok = false;
    }
  }
  if (ok && peer.host.empty()) {
    problems.errors.push_back("host was not provided for peer " + std::to_string(peer.id));
    ok = false;
  }
  if (ok && peer.host.starts_with('@')) {
    // libuv 1.44 (Debian 12's) cannot connect to a socket in the abstract namespace.
    problems.errors.push_back("host: abstract Unix sockets ('@…') are not supported");
    ok = false;
  }
  if (!ok) return std::nullopt;
  return peer;
}

}  // namespace pgsluice
