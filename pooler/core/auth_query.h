// auth_query / auth_user / auth_dbname (PgBouncer's): a user without an auth_file entry has its
// secret (an MD5 hash or a SCRAM verifier) looked up on the server. The lookup runs on a server
// of the pool of (database, auth_user) — auth_user's password comes from the auth_file — with the
// same connection and login code as every server (TLS, SCRAM, MD5), asynchronously on the loop:
// the client waits in the `auth` state, not reading, until the answer comes. Concurrent logins of
// one user share one query.
//
// Results are cached per (database, auth_user, auth_query, user): a found secret for
// auth_query_cache_ttl, a user the query did not find for at most 5 s (so that a role created a
// moment later can log in soon, and a scan of made-up names still costs one query per name per
// 5 s), a failed query not at all. A password that does not match a cached secret drops it, so
// that the next attempt sees a password changed on the server. A RELOAD (or SET) clears the cache.
// The cache is one for the process (auth_cache.h); lookups in flight are per worker.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "pooler/config/config.h"
#include "pooler/core/auth_cache.h"

namespace pgsluice {

class Client;
class Worker;

class AuthQuery {
 public:
  // Where the users of one database are looked up.
  struct Target {
    std::string auth_user;
    std::string query;
    DatabaseEntry database;  // the entry the lookup connects with (auth_dbname's, or the client's)
    // A setting that cannot work (auth_dbname not in [databases], the console, DISABLEd): the
    // log line, and what the client is told with which SQLSTATE.
    std::string error;
    std::string client_message;
    std::string_view sqlstate;
  };

  explicit AuthQuery(Worker& worker);
  AuthQuery(const AuthQuery&) = delete;
  AuthQuery& operator=(const AuthQuery&) = delete;
  ~AuthQuery();

  // The lookup target for clients of `db` (nullptr: the admin console, which needs
  // auth_dbname); nullopt when no auth_user applies. `console_name`: the console database the
  // client asked for, when db is nullptr.
  [[nodiscard]] std::optional<Target> target_for(const DatabaseEntry* db,
                                                 std::string_view console_name = {}) const;
  // A fresh cached result for `user`, if any.
  std::optional<AuthLookupResult> cached(const Target& target, const std::string& user);
  // Looks `user` up (or joins the lookup under way); the result comes to
  // Client::on_auth_lookup(), possibly from inside this call (no server can log in).
  void start(const Target& target, const std::string& user, Client& client);
  // The client left while waiting.
  void forget(Client& client);
  // The password did not match the cached secret: look it up again next time.
  void invalidate(const Target& target, const std::string& user);
  // RELOAD or SET: the cache goes; lookup pools get auth_user's new password.
  void on_config_changed();

 private:
  struct Lookup;
  AuthCache& cache();

  static std::string key_of(const Target& target, const std::string& user);
  void on_server(const std::string& key, class Server* server);
  // The query ended (answered, failed or lost): cache, then tell the waiting clients.
  void finish(std::string key, AuthLookupResult result);
  void store(const std::string& key, const AuthLookupResult& result);

  Worker& worker_;
  std::map<std::string, std::unique_ptr<Lookup>> pending_;
  std::map<Client*, std::string> waiting_;               // client -> key of its lookup
  std::set<std::pair<std::string, std::string>> pools_;  // (database, auth_user) used
};

}  // namespace pgsluice
