// The configuration loader: reads a pgbouncer.ini-compatible file into a validated Config. inih
// drives the line loop through a reader that splits each line here (see Loader::next_line), then
// every value is parsed and checked, and every error (file, line, key, value) is collected instead
// of stopping at the first one.
#include "pooler/config/config.h"

#include <ini.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#include "pooler/base/read_file.h"
#include "pooler/base/text.h"
#include "pooler/config/console_database.h"
#include "pooler/config/database_line.h"
#include "pooler/config/settings_table.h"
#include "pooler/config/value_parsers.h"

namespace pgsluice {

std::string ConfigError::to_string() const {
  std::string out = file;
  if (line > 0) out += (out.empty() ? "" : ":") + std::to_string(line);
  if (!out.empty()) out += ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

std::optional<DatabaseEntry> Config::find_database(const std::string& name) const {
  if (auto it = databases.find(name); it != databases.end()) return it->second;
  if (!fallback_database) return std::nullopt;
  DatabaseEntry db = *fallback_database;
  db.name = name;
  if (db.dbname.empty()) db.dbname = name;
  return db;
}

Duration Config::query_wait_timeout_for(const DatabaseEntry& db, const std::string& user) const {
  if (auto it = users.find(user); it != users.end() && it->second.query_wait_timeout) {
    return *it->second.query_wait_timeout;
  }
  if (db.query_wait_timeout) return *db.query_wait_timeout;
  return settings.query_wait_timeout;
}

PoolMode Config::pool_mode_for(const DatabaseEntry& db, const std::string& user) const {
  if (auto it = users.find(user); it != users.end() && it->second.pool_mode) {
    return *it->second.pool_mode;
  }
  if (db.pool_mode) return *db.pool_mode;
  return settings.pool_mode;
}

int Config::pool_size_for(const DatabaseEntry& db) const {
  return db.pool_size ? *db.pool_size : settings.default_pool_size;
}

int Config::pool_size_for(const PeerEntry& peer) const {
  return peer.pool_size.value_or(settings.default_pool_size);
}

int Config::pool_size_for(const DatabaseEntry& db, const std::string& user) const {
  if (auto it = users.find(user); it != users.end() && it->second.pool_size) {
    return *it->second.pool_size;
  }
  return pool_size_for(db);
}

int Config::reserve_pool_for(const DatabaseEntry& db, const std::string& user) const {
  if (auto it = users.find(user); it != users.end() && it->second.reserve_pool_size) {
    return *it->second.reserve_pool_size;
  }
  return reserve_pool_for(db);
}

int Config::min_pool_size_for(const DatabaseEntry& db) const {
  return db.min_pool_size.value_or(settings.min_pool_size);
}

int Config::reserve_pool_for(const DatabaseEntry& db) const {
  return db.reserve_pool.value_or(settings.reserve_pool_size);
}

int Config::max_user_connections_for(const std::string& user) const {
  if (auto it = users.find(user); it != users.end() && it->second.max_user_connections) {
    return *it->second.max_user_connections;
  }
  return settings.max_user_connections;
}

int Config::max_db_client_connections_for(const std::string& db) const {
  if (auto entry = find_database(db); entry && entry->max_db_client_connections.value_or(0) > 0) {
    return *entry->max_db_client_connections;
  }
  return settings.max_db_client_connections;
}

int Config::max_user_client_connections_for(const std::string& user) const {
  if (auto it = users.find(user);
      it != users.end() && it->second.max_user_client_connections.value_or(0) > 0) {
    return *it->second.max_user_client_connections;
  }
  return settings.max_user_client_connections;
}

SessionPolicy Config::session_policy_for(const DatabaseEntry& db, const std::string& user,
                                         PoolMode mode) const {
  if (auto it = users.find(user); it != users.end() && it->second.session_state_action) {
    return *it->second.session_state_action;
  }
  if (db.session_state_action) return *db.session_state_action;
  if (settings.session_state_action) return *settings.session_state_action;
  if (shares_servers(mode)) return SessionPolicy::transaction_default();
  SessionPolicy policy;
  policy.default_action = SessionAction::off;
  return policy;
}

namespace {

constexpr int kMaxIncludeDepth = 10;  // as PgBouncer (libusual's cfparser)

// ---- the loader ------------------------------------------------------------------------------

struct Origin {
  std::string file;
  int line = 0;
};

// One `key = value` line, split by the reader; inih only sees its index.
struct RawEntry {
  Origin origin;
  std::string key;
  std::string value;
};

struct Source {
  std::string name;
  std::string text;
  size_t pos = 0;
  int line = 0;
};

enum class Section { none, main, databases, users, peers, unknown };

Section section_of(std::string_view name) {
  const std::string s = ascii_lower(trim(name));
  if (s == "pgsluice" || s == "pgbouncer") return Section::main;
  if (s == "databases") return Section::databases;
  if (s == "users") return Section::users;
  if (s == "peers") return Section::peers;
  if (s.empty()) return Section::none;
  return Section::unknown;
}

class Loader {
 public:
  explicit Loader(std::string top_name) : top_name_(std::move(top_name)) {
    config_ = std::make_shared<Config>();
    config_->path = top_name_;
  }

  ConfigLoadResult run(std::string text) {
    sources_.push_back({top_name_, std::move(text), 0, 0});
    const int rc = ini_parse_stream(&Loader::read_line, this, &Loader::handle, this);
    if (rc > 0) {
      // Cannot happen with the lines next_line() builds, which inih always accepts.
      const Origin& o = handed_.at(static_cast<size_t>(rc - 1));
      error(o, "", "syntax error");
    } else if (rc < 0) {
      error({top_name_, 0}, "", "cannot parse the file (out of memory)");
    }
    if (config_->settings.auth_type == AuthType::hba && config_->settings.auth_hba_file.empty()) {
      // Without rules every connection would be refused: a mistake, not a policy.
      error({top_name_, 0}, "auth_type", "auth_type = hba needs auth_hba_file");
    }
    if (is_admin_database(config_->settings.auth_dbname)) {
      // The console has no server to run auth_query on (PgBouncer's words).
      error({top_name_, 0}, "auth_dbname",
            "cannot use the reserved \"" + config_->settings.auth_dbname +
                "\" database as an auth_dbname");
    }
    if (config_->settings.server_tls_direct &&
        config_->settings.server_tls.sslmode < SslMode::require) {
      // libpq's rule: with direct TLS there is no plaintext fallback to prefer or allow.
      error({top_name_, 0}, "server_tls_sslnegotiation",
            "server_tls_sslnegotiation = direct needs server_tls_sslmode require, verify-ca or "
            "verify-full");
    }
    ConfigLoadResult result;
    result.errors = std::move(errors_);
    if (result.errors.empty()) result.config = std::move(config_);
    return result;
  }

 private:
  void error(const Origin& o, std::string key, std::string message) {
    errors_.push_back({o.file, o.line, std::move(key), std::move(message)});
  }
  void warn(const Origin& o, const std::string& what) {
    config_->warnings.push_back(o.file + ":" + std::to_string(o.line) + ": " + what +
                                " is a PgBouncer setting pgsluice does not implement yet; ignored");
  }

  // The ini_reader: hands inih one physical line per call, after splitting it here. Comments and
  // blank lines become empty lines, a section header becomes `[<n>]` (the section is tracked
  // here, so that an empty unknown section is reported too), and `key = value` becomes
  // `k=<index>` into entries_. Why not let inih split them: Debian's inih is built with a 200-byte
  // line limit, strips inline " ;" comments and joins indented lines, none of which PgBouncer does;
  // a long connection string or a password with " ;" would be silently cut.
  static char* read_line(char* str, int num, void* stream) {
    return static_cast<Loader*>(stream)->next_line(str, num);
  }

  char* next_line(char* str, int num) {
    while (!sources_.empty() && sources_.back().pos >= sources_.back().text.size()) {
      sources_.pop_back();
    }
    if (sources_.empty()) return nullptr;
    Source& src = sources_.back();
    size_t end = src.text.find('\n', src.pos);
    if (end == std::string::npos) end = src.text.size();
    std::string_view line(src.text.data() + src.pos, end - src.pos);
    src.pos = end + 1;
    src.line += 1;
    const Origin origin{src.name, src.line};
    handed_.push_back(origin);
    if (origin.line == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // UTF-8 BOM
    line = trim(line);

    std::string out;
    if (line.empty() || line.front() == ';' || line.front() == '#') {
      // Blank.
    } else if (line.starts_with("%include") && (line.size() == 8 || is_space(line[8]))) {
      include(origin, trim(line.substr(8)));
    } else if (line.front() == '[') {
      const size_t close = line.find(']');
      if (close != std::string_view::npos) {
        const std::string_view name = line.substr(1, close - 1);
        section_ = section_of(name);
        if (section_ == Section::unknown || section_ == Section::none) {
          error(origin, std::string(name),
                "unknown section (expected [pgsluice] or [pgbouncer], [databases], [users], "
                "[peers])");
        }
        out = "[" + std::to_string(section_counter_++) + "]";
      } else {
        error(origin, "", "syntax error: section header without ']'");
        section_ = Section::unknown;  // its keys are not reported again
      }
    } else if (const size_t eq = line.find('='); eq == std::string_view::npos) {
      error(origin, "", "syntax error: expected 'key = value', got " + quoted(line));
    } else {
      const std::string_view key = trim(line.substr(0, eq));
      if (key.empty()) {
        error(origin, "", "syntax error: '=' without a key");
      } else {
        out = "k=" + std::to_string(entries_.size());
        entries_.push_back({origin, std::string(key), std::string(trim(line.substr(eq + 1)))});
        entry_sections_.push_back(section_);
      }
    }
    out += '\n';
    if (static_cast<int>(out.size()) >= num) {  // cannot happen with the lines built above
      error(origin, "", "line too long");
      out = "\n";
    }
    std::memcpy(str, out.c_str(), out.size() + 1);
    return str;
  }

  // PgBouncer's `%include file`: the file's lines are read in place of the directive. As in
  // PgBouncer, a relative name is relative to the current directory, not to the including file.
  void include(const Origin& origin, std::string_view name) {
    if (name.empty()) {
      error(origin, "%include", "missing file name");
      return;
    }
    if (sources_.size() >= kMaxIncludeDepth) {
      error(origin, "%include",
            "too many nested includes (at most " + std::to_string(kMaxIncludeDepth) + ")");
      return;
    }
    std::string text, err;
    const std::string path(name);
    if (!read_whole_file(path, text, err)) {
      error(origin, "%include", path + ": " + err);
      return;
    }
    sources_.push_back({path, std::move(text), 0, 0});
  }

  static int handle(void* user, const char* /*section*/, const char* /*name*/, const char* value) {
    static_cast<Loader*>(user)->on_entry(static_cast<size_t>(std::strtoul(value, nullptr, 10)));
    return 1;  // errors are collected, never reported through inih
  }

  void on_entry(size_t index) {
    if (index >= entries_.size()) return;
    const RawEntry& e = entries_[index];
    switch (entry_sections_[index]) {
      case Section::none:
        error(e.origin, e.key, "setting outside of any section");
        return;
      case Section::unknown:
        return;  // the section header was reported
      case Section::main:
        main_entry(e);
        return;
      case Section::databases:
        database_entry(e);
        return;
      case Section::users:
        user_entry(e);
        return;
      case Section::peers:
        peer_entry(e);
        return;
    }
  }

  void main_entry(const RawEntry& e) {
    const std::string key = ascii_lower(e.key);  // PgBouncer's keys are case-insensitive
    if (const SettingDef* setting = find_setting(key)) {
      if (std::string err = setting->parse(e.value, config_->settings); !err.empty()) {
        error(e.origin, key, err);
      }
    } else if (is_pgbouncer_only_key(key)) {
      warn(e.origin, "key " + quoted(key));
    } else {
      error(e.origin, key, "unknown setting");
    }
  }

  void database_entry(const RawEntry& e) {
    LineProblems problems;
    std::optional<DatabaseEntry> db = parse_database_line(e.key, e.value, e.origin.line, problems);
    report(e, problems);
    if (!db) return;
    // A database defined twice: the later line wins, as in PgBouncer.
    if (db->name == "*") {
      config_->fallback_database = std::move(*db);
    } else {
      config_->databases[db->name] = std::move(*db);
    }
  }

  void user_entry(const RawEntry& e) {
    LineProblems problems;
    std::optional<UserEntry> user = parse_user_line(e.key, e.value, e.origin.line, problems);
    report(e, problems);
    if (user) config_->users[user->name] = std::move(*user);
  }

  void peer_entry(const RawEntry& e) {
    LineProblems problems;
    std::optional<PeerEntry> peer = parse_peer_line(e.key, e.value, e.origin.line, problems);
    report(e, problems);
    // A peer defined twice: the later line wins, as in PgBouncer.
    if (peer) config_->peers[peer->id] = std::move(*peer);
  }

  void report(const RawEntry& e, const LineProblems& problems) {
    for (const std::string& message : problems.errors) error(e.origin, e.key, message);
    for (const std::string& what : problems.warnings) warn(e.origin, what);
  }

  std::string top_name_;
  std::shared_ptr<Config> config_;
  std::vector<ConfigError> errors_;
  std::vector<Source> sources_;
  std::vector<Origin> handed_;  // handed_[n - 1]: where inih's line n came from
  std::vector<RawEntry> entries_;
  std::vector<Section> entry_sections_;  // the section each entry is in
  Section section_ = Section::none;
  int section_counter_ = 0;
};

}  // namespace

ConfigLoadResult load_config_string(const std::string& text, const std::string& name) {
  return Loader(name).run(text);
}

std::string apply_setting(Settings& settings, std::string_view key, std::string_view value) {
  const SettingDef* setting = find_setting(ascii_lower(key));
  if (setting == nullptr) return "unknown setting";
  return setting->parse(value, settings);
}

ConfigLoadResult load_config_file(const std::string& path) {
  std::string text, err;
  if (!read_whole_file(path, text, err)) {
    ConfigLoadResult result;
    result.errors.push_back({path, 0, "", err});
    return result;
  }
  return Loader(path).run(std::move(text));
}

bool server_tls_changed(const Settings& was, const Settings& now) {
  if (was.server_tls.sslmode == SslMode::disable && now.server_tls.sslmode == SslMode::disable) {
    return false;
  }
  return was.server_tls != now.server_tls || was.server_tls_direct != now.server_tls_direct;
}

}  // namespace pgsluice
