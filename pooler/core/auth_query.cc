// auth_query lookups; see auth_query.h.
#include "pooler/core/auth_query.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

#include "pgsluice/protocol/writer.h"
#include "pooler/base/log_level.h"
#include "pooler/base/sqlstate.h"
#include "pooler/config/console_database.h"
#include "pooler/core/client.h"
#include "pooler/core/extensions.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

namespace {
constexpr uint64_t kNotFoundTtlMs = 5'000;

// Parse, Bind (the user name as the one text parameter), Execute, Sync: the name never becomes
// part of the SQL text.
std::string lookup_messages(const std::string& query, const std::string& user) {
  std::string out;
  pp::write_parse(out, "", query, {});
  std::string bind;  // after the statement name: formats, parameters, result formats
  auto i16 = [&bind](int v) {
    bind.push_back(static_cast<char>((v >> 8) & 0xff));
    bind.push_back(static_cast<char>(v & 0xff));
  };
  auto i32 = [&bind](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8)
      bind.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  i16(0);  // parameter formats: all text
  i16(1);  // one parameter
  i32(static_cast<uint32_t>(user.size()));
  bind += user;
  i16(0);  // result formats: all text
  pp::write_bind_renamed(out, "", "", bind);
  pp::write_execute(out, "", 0);
  pp::write_sync(out);
  return out;
}
}  // namespace

// One query under way: the server's replies come here (ServerQuerySink).
struct AuthQuery::Lookup final : ServerQuerySink {
  Lookup(AuthQuery& owner, std::string key, Target target, std::string user)
      : owner(owner), key(std::move(key)), target(std::move(target)), user(std::move(user)) {}

  void on_query_row(const pp::DataRow& row) override {
    ++rows;
    if (row.values.size() < 2) {
      error = "auth_query must return two columns (user name, password)";
      return;
    }
    secret = row.values[1] ? std::optional<std::string>(std::string(*row.values[1])) : std::nullopt;
  }
  void on_query_error(std::string_view sqlstate, std::string_view message) override {
    if (error.empty())
      error = fmt::format("auth_query failed: {} (SQLSTATE {})", message, sqlstate);
  }
  void on_query_done() override { owner.finish(key, result()); }  // `this` is gone after it
  void on_query_lost(std::string_view reason) override {
    owner.finish(key, failed(fmt::format("server connection lost during auth_query: {}", reason)));
  }

  static AuthLookupResult failed(std::string why) {
    AuthLookupResult r;
    r.status = AuthLookupResult::Status::failed;
    r.error = std::move(why);
    return r;
  }
  static AuthLookupResult bad_query(std::string why) {
    AuthLookupResult r = failed(std::move(why));
    r.bad_query = true;
    return r;
  }
  [[nodiscard]] AuthLookupResult result() const {
    if (!error.empty()) return bad_query(error);
    if (rows > 1) return bad_query("auth_query returned more than one row");
    AuthLookupResult r;
    r.status = rows == 0 ? AuthLookupResult::Status::not_found : AuthLookupResult::Status::found;
    r.secret = secret;
    return r;
  }

  AuthQuery& owner;
  std::string key;
  Target target;
  std::string user;
  std::vector<Client*> waiters;
  int rows = 0;
  std::optional<std::string> secret;
  std::string error;
};

AuthQuery::AuthQuery(Worker& worker) : worker_(worker) {}
AuthQuery::~AuthQuery() = default;

AuthQuery& Worker::auth_query() {
  if (!auth_query_) auth_query_ = std::make_unique<AuthQuery>(*this);
  return *auth_query_;
}

std::optional<AuthQuery::Target> AuthQuery::target_for(const DatabaseEntry* db,
                                                       std::string_view console_name) const {
  const Config& config = worker_.config();
  const Settings& s = config.settings;
  Target t;
  t.auth_user = db != nullptr && !db->auth_user.empty() ? db->auth_user : s.auth_user;
  if (t.auth_user.empty()) return std::nullopt;
  t.query = db != nullptr && !db->auth_query.empty() ? db->auth_query : s.auth_query;
  const std::string& dbname =
      db != nullptr && !db->auth_dbname.empty() ? db->auth_dbname : s.auth_dbname;
  // PgBouncer's log lines and client messages (its users and its suite match them); the client
  // learns that the pooler is misconfigured, nothing about the user.
  auto refuse = [&t](std::string log_line, std::string client_message, std::string_view code) {
    t.error = std::move(log_line);
    t.client_message = std::move(client_message);
    t.sqlstate = code;
    return t;
  };
  // The console has no server to ask, whether named by auth_dbname or asked for by the client
  // with no auth_dbname set.
  if (is_admin_database(dbname) || (dbname.empty() && db == nullptr)) {
    return refuse(fmt::format("cannot use the reserved \"{}\" database as an auth_dbname",
                              dbname.empty() ? console_name : std::string_view(dbname)),
                  "bouncer config error", sqlstate::kConnectionFailure);
  }
  if (!dbname.empty()) {
    std::optional<DatabaseEntry> entry = config.find_database(dbname);
    if (!entry) {
      return refuse(fmt::format("authentication database \"{}\" is not configured", dbname),
                    "bouncer config error", sqlstate::kConnectionFailure);
    }
    t.database = std::move(*entry);
  } else {
    t.database = *db;
  }
  // A DISABLEd database takes no new connections, the lookup's included.
  if (worker_.extensions().database_disabled(t.database.name)) {
    std::string message =
        fmt::format("authentication database \"{}\" is disabled", t.database.name);
    return refuse(message, message, sqlstate::kCannotConnectNow);
  }
  // The lookup logs in as auth_user whatever user= the database line forces on its clients.
  t.database.user.clear();
  return t;
}

std::string AuthQuery::key_of(const Target& target, const std::string& user) {
  std::string key = target.database.name;
  for (const std::string* part : {&target.auth_user, &target.query, &user}) {
    key += '\0';
    key += *part;
  }
  return key;
}

AuthCache& AuthQuery::cache() {
  return worker_.group().auth_cache();
}

std::optional<AuthLookupResult> AuthQuery::cached(const Target& target, const std::string& user) {
  return cache().find(key_of(target, user), worker_.now_ms());
}

void AuthQuery::invalidate(const Target& target, const std::string& user) {
  cache().erase(key_of(target, user));
}

void AuthQuery::store(const std::string& key, const AuthLookupResult& result) {
  const auto ttl = static_cast<uint64_t>(worker_.settings().auth_query_cache_ttl.count());
  uint64_t lifetime = 0;
  if (result.status == AuthLookupResult::Status::found) {
    lifetime = ttl;
  } else if (result.status == AuthLookupResult::Status::not_found) {
    lifetime = std::min(ttl, kNotFoundTtlMs);
  }
  // Nothing for a failed query, or with caching off (lifetime 0).
  cache().store(key, result, lifetime, worker_.now_ms());
}

void AuthQuery::start(const Target& target, const std::string& user, Client& client) {
  const std::string key = key_of(target, user);
  waiting_[&client] = key;
  if (auto it = pending_.find(key); it != pending_.end()) {
    it->second->waiters.push_back(&client);
    return;
  }
  auto lookup = std::make_unique<Lookup>(*this, key, target, user);
  lookup->waiters.push_back(&client);
  pending_.emplace(key, std::move(lookup));
  pools_.emplace(target.database.name, target.auth_user);
  Pool& pool = worker_.pool_for(target.database, target.auth_user);
  if (log_enabled(spdlog::level::debug)) {
    spdlog::debug("auth_query for user \"{}\" as {}@{}", user, target.auth_user,
                  target.database.name);
  }
  pool.request_for_pooler([this, key](Server* server) { on_server(key, server); });
}

void AuthQuery::on_server(const std::string& key, Server* server) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;  // cannot happen: a lookup waits for its server
  Lookup& lookup = *it->second;
  if (server == nullptr) {
    finish(key, Lookup::failed(fmt::format(
                    "no server connection for auth_user \"{}\" to database \"{}\" (its login "
                    "failed, see above)",
                    lookup.target.auth_user, lookup.target.database.name)));
    return;
  }
  if (!server->run_query(lookup_messages(lookup.target.query, lookup.user), lookup)) {
    finish(key, Lookup::failed("the server for auth_query was not idle"));
  }
}

void AuthQuery::finish(std::string key, AuthLookupResult result) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  std::unique_ptr<Lookup> lookup = std::move(it->second);
  pending_.erase(it);
  if (result.status == AuthLookupResult::Status::failed) {
    spdlog::warn("auth_query for user \"{}\" as {}@{}: {}", lookup->user, lookup->target.auth_user,
                 lookup->target.database.name, result.error);
  }
  store(key, result);
  std::vector<Client*> waiters = std::move(lookup->waiters);
  for (Client* client : waiters) {
    // A client that left has been forgotten (and erased from waiting_).
    auto w = waiting_.find(client);
    if (w == waiting_.end() || w->second != key) continue;
    waiting_.erase(w);
    client->on_auth_lookup(result);
  }
  // `lookup` (the server's sink) is destroyed here: the server has already let go of it.
}

void AuthQuery::forget(Client& client) {
  auto w = waiting_.find(&client);
  if (w == waiting_.end()) return;
  if (auto it = pending_.find(w->second); it != pending_.end()) {
    std::erase(it->second->waiters, &client);
  }
  waiting_.erase(w);
}

void AuthQuery::on_config_changed() {
  cache().clear();
  // A [databases] line that changed address hands its own password to every pool of it; the
  // lookup pools log in as auth_user, with auth_user's auth_file password.
  worker_.for_each_own_pool([this](Pool& pool) {
    const auto key = std::make_pair(pool.database().name, pool.credentials().user);
    if (!pools_.contains(key)) return;
    if (auto secret = worker_.secret_for(pool.credentials().user)) {
      pool.credentials().password = *secret;
    }
  });
}

}  // namespace pgsluice
