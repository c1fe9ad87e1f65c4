// A client's StartupMessage parameters and its authentication (members of Client, kept apart
// from client.cc): the method (auth_type, or under auth_type = hba the first auth_hba_file rule
// that matches), the secret (the auth_file, or an auth_query lookup on the server), then the
// exchange (ClientAuth). Failures use PostgreSQL's messages and SQLSTATEs.
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "pooler/auth/hba.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/auth_query.h"
#include "pooler/core/client.h"
#include "pooler/core/worker.h"
#include "pooler/net/tls_session.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

namespace {

// A client certificate that was sent and verified against client_tls_ca_file.
bool has_verified_certificate(TlsSession* tls) {
  if (tls == nullptr) return false;
  return SSL_get0_peer_certificate(tls->native()) != nullptr &&
         SSL_get_verify_result(tls->native()) == X509_V_OK;
}

}  // namespace

// The StartupMessage's parameters (and the -c settings of its `options`): what the client's
// session is to have on every server it is linked to (ClientParameters).
bool Client::read_startup_parameters(const pp::StartupPacket& packet) {
  const Settings& settings = worker_.settings();
  // ignore_startup_parameters: names the server never gets from a client, whether sent as
  // parameters or as -c settings inside `options` (PgBouncer drops both).
  auto ignored = [&settings](std::string_view name) {
    return std::any_of(settings.ignore_startup_parameters.begin(),
                       settings.ignore_startup_parameters.end(),
                       [name](const std::string& p) { return iequals(p, name); });
  };
  // A parameter PostgreSQL reports is kept under its canonical name; any other is an extra.
  auto keep = [this](std::string_view name, std::string_view value) {
    std::string_view tracked = tracked_parameter_name(name);
    if (tracked.empty()) {
      params_.extras.set(name, value);
    } else {
      params_.reported.set(tracked, value);
    }
  };
  for (const auto& [name, value] : packet.parameters) {
    if (name == "user" || name == "database" || name == "replication" ||
        name.starts_with("_pq_.")) {
      continue;
    }
    if (ignored(name)) continue;
    if (replication_ != pp::ReplicationMode::none) {
      keep_replication_parameter(name, value);
      // Its options go to the walsender as written (PgBouncer's way: CREATE SUBSCRIPTION
      // sends -c settings the pooler need not understand).
      if (name == "options") continue;
    }
    if (name == "options") {
      std::vector<std::pair<std::string, std::string>> settings_in_options;
      if (!pp::parse_startup_options(value, settings_in_options)) {
        fail(sqlstate::kFeatureNotSupported,
             fmt::format("unsupported startup option \"{}\": only -c name=value settings are "
                         "supported",
                         value));
        return false;
      }
      for (const auto& [n, v] : settings_in_options) {
        if (!ignored(n)) keep(n, v);
      }
      continue;
    }
    keep(name, value);
  }
  params_.settings = params_.extras;
  if (settings.application_name_add_host) {
    const std::string* app = params_.reported.get("application_name");
    params_.reported.set("application_name",
                         fmt::format("{} - {}", app != nullptr ? *app : std::string(), who_.peer));
  }
  if (!params_.reported.empty()) params_.startup_reported = params_.reported;
  return true;
}

void Client::log_login_attempt() {
  if (!worker_.settings().log_connections) return;
  // PgBouncer's words and values (tls=no, replication=no/yes/database), which operators' tools
  // and PgBouncer's suite match; the TLS part is SHOW CLIENTS' tls column.
  TlsSession* tls = channel_.tls();
  const std::string tls_info = tls != nullptr ? tls->connection_info() : "no";
  const char* replication = replication_ == pp::ReplicationMode::none       ? "no"
                            : replication_ == pp::ReplicationMode::physical ? "yes"
                                                                            : "database";
  spdlog::info("{} login attempt: db={} user={} tls={} replication={}", who_.log_id, who_.database,
               who_.user, tls_info, replication);
}

void Client::begin_authentication() {
  if (admin_console_ && who_.user == "pgbouncer" && peer_uid() == getuid()) {
    // PgBouncer's rule, which its tools and its own test suite rely on: the OS user the pooler
    // runs as may enter the console as `pgbouncer` over the Unix socket with no password and no
    // admin_users line. The kernel vouches for the uid; TCP never qualifies.
    login_.own_user = true;
    if (worker_.settings().log_connections) {
      spdlog::info("{} pgbouncer access from unix socket", who_.log_id);
    }
    auth_succeeded();
    return;
  }
  AuthType method = worker_.settings().auth_type;
  if (method == AuthType::hba) {
    std::optional<AuthType> decided = decide_by_hba();
    if (!decided) return;  // refused (the client was failed)
    method = *decided;
  }
  if (method == AuthType::cert) {
    login_by_certificate();  // tls_client.cc
    return;
  }
  login_.method = method;
  std::optional<std::string> secret = worker_.secret_for(who_.user);
  // Also under trust, as PgBouncer: the user must exist, in auth_file or by auth_query. Not
  // after peer, which PgBouncer lets through any OS user the rule names.
  if (!secret && !login_.peer_verified) {
    AuthQuery& lookups = worker_.auth_query();
    // No lookup for a database that does not exist (nor in PgBouncer): the exchange runs
    // against no secret and fails as a wrong password does.
    std::optional<AuthQuery::Target> target;
    if (!login_.unknown_database) {
      target = lookups.target_for(admin_console_ ? nullptr : login_.db_entry.get(), who_.database);
    }
    if (target && !target->error.empty()) {
      spdlog::error("{} {}", who_.log_id, target->error);
      fail(target->sqlstate, target->client_message);
      return;
    }
    if (target) {
      if (std::optional<AuthLookupResult> hit = lookups.cached(*target, who_.user)) {
        on_auth_lookup(*hit);
        return;
      }
      // Nothing is read until the answer: the client has not been asked for anything yet.
      set_state(State::auth);
      channel_.stop_reading();
      login_.lookup_pending = true;
      lookups.start(*target, who_.user, *this);
      return;
    }
    if (method == AuthType::trust) {
      refuse_unknown_trust_user(/*looked_up=*/false);
      return;
    }
  }
  start_exchange(std::move(secret));
}

void Client::refuse_unknown_trust_user(bool looked_up) {
  spdlog::warn("{} login failed: no such user \"{}\" (auth_type = trust admits only known users)",
               who_.log_id, who_.user);
  // PgBouncer's words for each: a user missing from auth_file gets '"trust" authentication
  // failed', one auth_query did not find 'no such user'. Under trust anyone may log in as any
  // existing user without a password, so naming a missing one tells nothing a client could not
  // learn by trying (PostgreSQL says 'role "x" does not exist' under trust, with 28000 too).
  fail(sqlstate::kInvalidAuthorizationSpecification,
       looked_up ? "no such user" : "\"trust\" authentication failed");
}

void Client::on_auth_lookup(const AuthLookupResult& result) {
  const bool waited = login_.lookup_pending;
  login_.lookup_pending = false;
  if (state_ == State::closing) return;
  if (result.status == AuthLookupResult::Status::failed) {
    // The reason (a server down, auth_user's password, a bad auth_query) is in the log; the
    // client learns nothing about the user. A query PostgreSQL refused gets PgBouncer's words.
    fail(
        sqlstate::kConnectionFailure,
        result.bad_query
            ? std::string("bouncer config error")
            : fmt::format("could not look up the password of user \"{}\" (auth_query)", who_.user));
    return;
  }
  login_.secret_from_lookup = true;
  if (login_.method == AuthType::trust && result.status != AuthLookupResult::Status::found) {
    refuse_unknown_trust_user(/*looked_up=*/true);
    return;
  }
  // A user the query does not know gets the same exchange as a wrong password, and the same
  // answer (ClientAuth runs it against a secret nobody has).
  start_exchange(result.status == AuthLookupResult::Status::found ? result.secret : std::nullopt);
  if (waited && state_ == State::auth) {
    channel_.start_reading();
    process_auth_input();  // what the client may have sent meanwhile
  }
}

void Client::start_exchange(std::optional<std::string> secret) {
  const pp::ScramVerifier* plain_verifier = secret && login_.method == AuthType::scram_sha_256
                                                ? worker_.plain_scram_verifier(who_.user, *secret)
                                                : nullptr;
  login_.auth =
      std::make_unique<ClientAuth>(login_.method, who_.user, std::move(secret), plain_verifier);
  login_.auth->set_max_iterations(worker_.settings().scram_max_iterations);
  login_.auth->set_iterations(worker_.settings().scram_iterations);
  if (channel_.tls() != nullptr)
    login_.auth->set_channel_binding(channel_.tls()->server_end_point());
  ClientAuth::Result result = login_.auth->start(channel_.output());
  channel_.flush();
  switch (result) {
    case ClientAuth::Result::ok:
      auth_succeeded();
      return;
    case ClientAuth::Result::need_response:
      set_state(State::auth);
      return;
    case ClientAuth::Result::failed:
    case ClientAuth::Result::protocol_violation:
      spdlog::warn("{} login failed: {}", who_.log_id, login_.auth->failure_reason());
      fail(sqlstate::kInvalidPassword,
           fmt::format("password authentication failed for user \"{}\"", who_.user));
      return;
  }
}

void Client::note_auth_failure() {
  if (!login_.secret_from_lookup) return;
  // The cached secret may be the one from before an ALTER ROLE … PASSWORD: ask again next time.
  AuthQuery& lookups = worker_.auth_query();
  if (auto target = lookups.target_for(admin_console_ ? nullptr : login_.db_entry.get())) {
    lookups.invalidate(*target, who_.user);
  }
}

std::optional<AuthType> Client::decide_by_hba() {
  const HbaRules* rules = worker_.secrets().hba.get();
  const bool local = !channel_.is_tcp();
  sockaddr_storage addr{};
  if (!local) {
    int len = sizeof(addr);
    if (uv_tcp_getpeername(channel_.tcp(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      addr.ss_family = AF_UNSPEC;  // matches no address rule
    }
  }
  HbaConnection conn{.local = local,
                     .tls = channel_.tls() != nullptr,
                     .address = local ? nullptr : reinterpret_cast<const sockaddr*>(&addr),
                     .database = who_.database,
                     .user = who_.user,
                     .physical_replication = replication_ == pp::ReplicationMode::physical};
  const std::string host = local ? "[local]" : hba_host_name(conn.address);
  const char* encryption = conn.tls ? "SSL encryption" : "no encryption";
  const HbaRule* rule = rules != nullptr ? rules->match(conn) : nullptr;
  if (rule == nullptr) {
    if (rules == nullptr)
      spdlog::error("{} auth_type = hba but no auth_hba_file is loaded", who_.log_id);
    // PostgreSQL's words; a physical walsender names no database.
    fail(sqlstate::kInvalidAuthorizationSpecification,
         conn.physical_replication
             ? fmt::format("no pg_hba.conf entry for replication connection from host \"{}\", "
                           "user \"{}\", {}",
                           host, who_.user, encryption)
             : fmt::format("no pg_hba.conf entry for host \"{}\", user \"{}\", database \"{}\", {}",
                           host, who_.user, who_.database, encryption));
    return std::nullopt;
  }
  spdlog::debug("{} {}:{} matches: {}", who_.log_id, rule->file, rule->line,
                to_string(rule->method));
  login_.ident_map = rule->map;
  if (rule->method == HbaMethod::reject) {
    fail(sqlstate::kInvalidAuthorizationSpecification,
         conn.physical_replication
             ? fmt::format("pg_hba.conf rejects replication connection for host \"{}\", user "
                           "\"{}\", {}",
                           host, who_.user, encryption)
             : fmt::format("pg_hba.conf rejects connection for host \"{}\", user \"{}\", "
                           "database \"{}\", {}",
                           host, who_.user, who_.database, encryption));
    return std::nullopt;
  }
  if (rule->clientcert != HbaClientCert::none && rule->method != HbaMethod::cert) {
    // clientcert=verify-ca|verify-full: a certificate on top of the method, as PostgreSQL.
    TlsSession* tls = channel_.tls();
    if (!has_verified_certificate(tls)) {
      spdlog::warn("{} login failed: {}:{} wants a client certificate", who_.log_id, rule->file,
                   rule->line);
      fail(sqlstate::kInvalidAuthorizationSpecification,
           "connection requires a valid client certificate");
      return std::nullopt;
    }
    if (rule->clientcert == HbaClientCert::verify_full && tls->peer_common_name() != who_.user) {
      fail(sqlstate::kInvalidAuthorizationSpecification,
           fmt::format("certificate validation (clientcert=verify-full) failed for user \"{}\": "
                       "CN mismatch",
                       who_.user));
      return std::nullopt;
    }
  }
  switch (rule->method) {
    case HbaMethod::trust:
      return AuthType::trust;
    case HbaMethod::md5:
      return AuthType::md5;
    case HbaMethod::password:
      return AuthType::plain;
    case HbaMethod::scram_sha_256:
      return AuthType::scram_sha_256;
    case HbaMethod::cert:
      return AuthType::cert;
    case HbaMethod::peer:
      if (!peer_matches()) {
        fail(sqlstate::kInvalidAuthorizationSpecification,
             fmt::format("Peer authentication failed for user \"{}\"", who_.user));
        return std::nullopt;
      }
      login_.peer_verified = true;
      return AuthType::trust;  // the kernel vouched for the user
    case HbaMethod::reject:
      break;
  }
  return std::nullopt;
}

std::optional<uid_t> Client::peer_uid() {
  uv_os_fd_t fd = -1;
  if (channel_.is_tcp() ||
      uv_fileno(reinterpret_cast<const uv_handle_t*>(channel_.stream()), &fd) != 0) {
    return std::nullopt;
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    spdlog::warn("{} peer authentication: could not get peer credentials: {}", who_.log_id,
                 std::strerror(errno));
    return std::nullopt;
  }
  return cred.uid;
}

bool Client::ident_permits(std::string_view system_user) const {
  const IdentMaps* maps = worker_.secrets().ident.get();
  return maps != nullptr && maps->permits(login_.ident_map, system_user, who_.user);
}

bool Client::peer_matches() {
  const std::optional<uid_t> uid = peer_uid();
  if (!uid) return false;
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(*uid, &pw, buf, sizeof(buf), &found) != 0 || found == nullptr) {
    spdlog::warn("{} peer authentication: could not look up local user ID {}", who_.log_id, *uid);
    return false;
  }
  if (!login_.ident_map.empty()) {
    // map=: the auth_ident_file says which users this OS user may be (PgBouncer's log line).
    if (ident_permits(pw.pw_name)) return true;
    spdlog::error("{} ident map {} cannot be matched", who_.log_id, login_.ident_map);
    return false;
  }
  if (who_.user != pw.pw_name) {
    spdlog::warn(
        "{} login failed: Provided user name ({}) and authenticated user name ({}) do "
        "not match",
        who_.log_id, who_.user, pw.pw_name);
    return false;
  }
  return true;
}

}  // namespace pgsluice
