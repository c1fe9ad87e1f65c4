// Who gets which server; see pool.h.
#include "pooler/core/pool.h"

#include <spdlog/spdlog.h>

#include <random>
#include <utility>
#include <vector>

#include "pooler/base/sqlstate.h"
#include "pooler/core/worker.h"

namespace pgsluice {

uint32_t Pool::stagger_draw() {
  thread_local std::minstd_rand engine{std::random_device{}()};
  return static_cast<uint32_t>(engine()) ^ (static_cast<uint32_t>(engine()) << 16);
}

Pool::Pool(Worker& worker, DatabaseEntry db, ServerCredentials credentials, PoolMode mode,
           int pool_size)
    : worker_(worker),
      db_(std::move(db)),
      limit_slots_(worker.group().limits().slots_for(db_.name, credentials.user)),
      hosts_(db_),
      credentials_(std::move(credentials)),
      mode_(mode),
      pool_size_(pool_size),
      last_active_ms_(worker.now_ms()) {
  // A share made now is in use: no other worker's share of the pool is freed meanwhile.
  SharedLimits::note_active(limit_slots_, last_active_ms_);
  note_limits();
}

Pool::~Pool() = default;

size_t Pool::server_count() const {
  // Replication servers count, as in PgBouncer (they hold a backend and a slot of pool_size).
  size_t n = 0;
  for (const ServerList* list : serving_lists()) n += list->size();
  return n;
}

bool Pool::login_retry_blocked(uint64_t now_ms) const {
  // As PgBouncer's fast fail, for the one pool every worker's share is: the pool's last login
  // failed (on any worker) within server_login_retry and it has no logged-in server anywhere.
  const uint64_t failed = SharedLimits::login_failed_ms(limit_slots_);
  if (failed == 0 || !no_logged_in_server()) return false;
  auto retry = static_cast<uint64_t>(worker_.settings().server_login_retry.count());
  return now_ms < failed + retry;
}

std::string Pool::login_failure_note() const {
  // Why the wait was long, for the client whose wait ends: the pool's last login failed (a
  // failure the waiting clients were not told of, as a connection that could not be made).
  if (SharedLimits::login_failed_ms(limit_slots_) == 0) return {};
  return fmt::format(" (the last server login failed: {})",
                     SharedLimits::login_error(limit_slots_));
}

bool Pool::no_logged_in_server() const {
  return servers_obsolete_ || SharedLimits::logged_in(limit_slots_) == 0;
}

bool Pool::refuse_while_login_blocked(Client& client) {
  if (!login_retry_blocked(worker_.now_ms())) return false;
  // PgBouncer 1.25's words (check_fast_fail).
  client.fail(sqlstate::kConnectionFailure,
              fmt::format("server login has been failing, cached error: {} (server_login_retry)",
                          SharedLimits::login_error(limit_slots_)));
  return true;
}

void Pool::fail_waiters_after_login_failure(std::string_view message, uint64_t failed_ms) {
  // Only the clients that were waiting when the login failed: a later one waits for the next
  // attempt (server_login_retry), as in PgBouncer, where it is not on the list the error empties.
  std::vector<Client*> failed;
  for (ClientList* list : {&welcome_waiting_, &waiting_}) {
    list->for_each([&](Client& client) {
      if (client.wait_started_ms() > failed_ms) return;
      list->remove(client);
      failed.push_back(&client);
    });
  }
  publish_wait();
  // Off the lists first: failing a client may start work that walks them.
  std::string text = fmt::format("server login failed: {}", message);
  for (Client* client : failed) client->fail(sqlstate::kConnectionFailure, text, message);
  fail_pooler_waiters();
}

Server* Pool::launch_listener(ListenRelay& relay) {
  const size_t host = pick_host(worker_.now_ms());
  // Deletes itself when its socket is closed, as every server does.
  auto* server = new Server(*this, worker_.next_socket_id(), host, hosts_.at(host));
  relay_launched_ = true;
  server->serve_as_listener(relay);
  server->timing.connect_ms = worker_.now_ms();
  move_server(*server, Server::State::closing, Server::State::connecting);
  server->connect();
  return server;
}

void Pool::launch_server() {
  // try_launch saw a usable host; it is still there (nothing ran in between).
  const size_t host = pick_host(worker_.now_ms());
  begin_role_recheck(host, worker_.now_ms());
  // The server deletes itself when its socket is closed.
  auto* server = new Server(*this, worker_.next_socket_id(), host, hosts_.at(host));
  server->timing.connect_ms = worker_.now_ms();
  move_server(*server, Server::State::closing, Server::State::connecting);
  server->connect();
}

void Pool::link(Server& server, Client& client) {
  ++stats_.totals.server_assignments;
  server.life.fresh = false;  // checked again (server_check_delay) before its next client
  // Bytes the server exchanged before this link (login, the previous client's cleanup) are not
  // this client's traffic.
  server.timing.on_link(server.channel().bytes_sent(), server.channel().bytes_received());
  server.link(client);
}

bool Pool::adopt_shared_welcome() {
  if (has_welcome_ || worker_.group().size() == 1) return has_welcome_;
  auto params = worker_.group().welcomes().find(db_.name, credentials_.user);
  if (!params) return false;
  welcome_params_ = std::move(*params);
  has_welcome_ = true;
  while (Client* client = welcome_waiting_.pop_front()) client->on_welcome(welcome_params_);
  return true;
}

void Pool::request_welcome(Client& client) {
  // Another worker's share of this pool may have logged in a server already.
  adopt_shared_welcome();
  if (has_welcome_) {
    client.on_welcome(welcome_params_);
    return;
  }
  // No fast fail here (PgBouncer's neither): a client not yet greeted waits for the next login
  // attempt, up to query_wait_timeout / client_login_timeout, and hears a login refused by
  // PostgreSQL (fail_waiters_after_login_failure).
  welcome_waiting_.push_back(client);
  if (!paused_) launch_for_waiters();
}

void Pool::request_server(Client& client) {
  if (!paused_) {
    if (Server* server = take_idle_server(); server != nullptr) {
      link(*server, client);
      return;
    }
  }
  if (refuse_while_login_blocked(client)) return;
  waiting_.push_back(client);
  client.wait.started_us = now_us();
  client.wait.notice_sent = false;
  publish_wait();
  if (paused_) return;
  launch_for_waiters();
}

Server* Pool::take_idle_server() {
  const Settings& s = worker_.settings();
  const auto delay = static_cast<uint64_t>(s.server_check_delay.count());
  const uint64_t now = worker_.now_ms();
  while (!idle_.empty()) {
    Server& server = idle_.front();
    if (db_.target_session_attrs != TargetSessionAttrs::any && !server.role()) {
      // Older than PostgreSQL 14, it did not report its role: asked before it serves anyone.
      if (!server.check_role()) server.close("the role check could not start");
      continue;
    }
    if (!check_due(!s.server_check_query.empty(), server.life.fresh, server.life.idle_since_ms,
                   delay, now)) {
      return &server;
    }
    // Off the idle list until it answers. PgBouncer's `<empty>` (the default) is an empty query.
    server.run_check(s.server_check_query == "<empty>" ? std::string() : s.server_check_query);
    if (server.state() == Server::State::idle) return &server;  // could not start: use as is
  }
  return nullptr;
}

void Pool::wait_for_pin(Client& client) {
  client.wait.on_pin_list = true;
  pin_waiting_.push_back(client);
}

void Pool::retry_pin_waiters() {
  // Those that wait now: one that has to wait again goes to the back, for the next round.
  for (size_t n = pin_waiting_.size(); n > 0 && !pin_waiting_.empty(); --n) {
    Client* client = pin_waiting_.pop_front();
    client->wait.on_pin_list = false;
    client->retry_after_pin_wait();
  }
}

void Pool::forget_client(Client& client) {
  if (!client.pool_node.linked()) return;
  if (client.wait.on_pin_list) {
    client.wait.on_pin_list = false;
    pin_waiting_.remove(client);
    return;
  }
  if (client.replication() != protocol::ReplicationMode::none) {
    replication_waiting_.remove(client);
    return;
  }
  if (client.state() == Client::State::welcome_wait) {
    welcome_waiting_.remove(client);
  } else {
    waiting_.remove(client);
    publish_wait();
  }
}

void Pool::request_for_pooler(std::function<void(Server*)> ready) {
  if (!paused_) {
    if (Server* server = take_idle_server(); server != nullptr) {
      ready(server);
      return;
    }
  }
  if (login_retry_blocked(worker_.now_ms())) {
    ready(nullptr);
    return;
  }
  pooler_waiting_.push_back(std::move(ready));
  launch_for_waiters();
}

void Pool::fail_pooler_waiters() {
  std::deque<std::function<void(Server*)>> waiters;
  waiters.swap(pooler_waiting_);
  for (auto& ready : waiters) ready(nullptr);
}

void Pool::serve_waiters() {
  if (paused_) return;
  while (!pooler_waiting_.empty()) {
    Server* server = take_idle_server();
    if (server == nullptr) break;
    auto ready = std::move(pooler_waiting_.front());
    pooler_waiting_.pop_front();
    ready(server);
  }
  while (!waiting_.empty()) {
    Server* server = take_idle_server();
    if (server == nullptr) break;
    Client* client = waiting_.pop_front();
    const uint64_t now = now_us();
    const uint64_t waited = client->wait.started_us != 0 && now > client->wait.started_us
                                ? now - client->wait.started_us
                                : 0;
    stats_.totals.wait_time_us += waited;
    stats_.wait_time.observe(waited);
    link(*server, *client);
  }
  publish_wait();
}

void Pool::on_server_login_ok(Server& server) {
  servers_obsolete_ = false;
  note_login_ok(server, worker_.now_ms());
  hosts_.logged_in(server.host_index());
  SharedLimits::login_succeeded(limit_slots_);
  server.life.born_ms = worker_.now_ms();
  server.life.stagger = stagger_draw();
  server.life.fresh = true;
  if (!has_welcome_) {
    welcome_params_ = server.parameters();
    has_welcome_ = true;
    if (worker_.group().size() > 1) {
      worker_.group().welcomes().publish(db_.name, credentials_.user, welcome_params_);
      // Clients of other workers' shares may wait for it: servers move to them without a
      // login of their own, which would otherwise be what greets them.
      post_to_shares(~(uint64_t{1} << static_cast<unsigned>(worker_.index())),
                     [](Pool& share) { share.adopt_shared_welcome(); });
    }
  }
  while (Client* client = welcome_waiting_.pop_front()) client->on_welcome(welcome_params_);
  wake_login_waiters();
  on_server_idle(server);
  // One login at a time (launch_for_waiters): the next one when clients still wait.
  launch_for_waiters();
}

void Pool::wake_login_waiters() {
  // Workers whose clients waited for this login to end may start theirs now (or take this
  // server, once it is idle here and they ask).
  post_to_shares(std::exchange(login_wake_, 0), [](Pool& share) { share.launch_for_waiters(); });
}

void Pool::post_to_shares(uint64_t workers, void (*fn)(Pool&)) {
  if (workers == 0) return;
  const LimitSlots slots = limit_slots_;
  worker_.group().for_each_worker([&](Worker& w) {
    if (((workers >> static_cast<unsigned>(w.index())) & 1U) == 0) return;
    w.post([&w, slots, fn] {
      if (Pool* share = w.find_pool(slots)) fn(*share);
    });
  });
}

void Pool::on_server_login_failed(Server& server, std::string_view code, std::string_view message) {
  const uint64_t now = worker_.now_ms();
  if (hosts_.size() > 1) {
    // libpq's way with a host list: this host is skipped (for server_login_retry) and the next
    // one tried; the pool's login counts as failed only when no host is left.
    skip_host(server, now + static_cast<uint64_t>(worker_.settings().server_login_retry.count()));
    note_login_failure(server, message, now);
    if (hosts_.any_usable(now) || hosts_.any_role_mismatch(now)) {
      spdlog::info("{}: host {} failed ({}), trying the next host", server.log_id(),
                   server.address().to_string(), message);
      server.close(server.login_close_reason(message));  // after "server login failed"
      launch_for_waiters();
      return;
    }
  }
  SharedLimits::login_failed(limit_slots_, now, message);
  server.close(server.login_close_reason(message));  // after "server login failed"
  if (!refuses_waiters(code)) return;
  // PostgreSQL refused the login (a wrong password, no such database, pg_hba.conf) or the
  // pooler could not answer it: the waiting clients would get the same answer, so they hear it
  // now (PgBouncer's kill_pool_logins), unless a logged-in server of the pool still serves.
  // A server marked to close (RECONNECT) serves no waiting client: without that, a client
  // holding the old server would keep the waiters, and a login retried at each release, going.
  if (!servers_obsolete_ && (server_count() != 0 || !no_logged_in_server())) return;
  fail_waiters_after_login_failure(message, now);
  // The other workers' shares: their clients waiting since before this failure hear it too.
  std::string text(message);
  const LimitSlots slots = limit_slots_;
  worker_.group().for_each_worker([&](Worker& w) {
    if (&w == &worker_) return;
    w.post([&w, slots, text, now] {
      if (Pool* share = w.find_pool(slots)) share->fail_waiters_after_login_failure(text, now);
    });
  });
}

bool Pool::refuses_waiters(std::string_view code) {
  // A connection that could not be made (refused, timed out, TLS failed, closed during the
  // login) or a PostgreSQL that is starting up or shutting down (57P03) says nothing about the
  // next attempt: the clients keep waiting for it, after server_login_retry (PgBouncer's
  // rule). Every other failure is an answer to this login that the next would get too.
  return code != sqlstate::kConnectionFailure && code != sqlstate::kCannotConnectNow;
}

Pool::ServerList* Pool::list_for(Server::State state) {
  switch (state) {
    case Server::State::connecting:
    case Server::State::login:
      return &login_;
    case Server::State::idle:
      return &idle_;
    case Server::State::active:
      return &active_;
    case Server::State::resetting:
      return &resetting_;
    case Server::State::being_canceled:
      return &being_canceled_;
    case Server::State::draining:
      return &draining_;
    case Server::State::listening:
      return &listeners_;
    case Server::State::replicating:
      return &replicating_;
    case Server::State::closing:
    case Server::State::moving:
      return nullptr;
  }
  return nullptr;
}

namespace {
bool logging_in(Server::State s) {
  return s == Server::State::connecting || s == Server::State::login;
}
// A server past its login that serves the pool's clients (no_logged_in_server); a moving one
// is on its way to another worker's share and still counts.
bool logged_in(Server::State s) {
  switch (s) {
    case Server::State::idle:
    case Server::State::active:
    case Server::State::resetting:
    case Server::State::being_canceled:
    case Server::State::draining:
    case Server::State::replicating:
    case Server::State::moving:
      return true;
    case Server::State::connecting:
    case Server::State::login:
    case Server::State::listening:
    case Server::State::closing:
      return false;
  }
  return false;
}
}  // namespace

void Pool::move_server(Server& server, Server::State from, Server::State to) {
  // pool_idle_timeout counts from here too: a server that came and went between two janitor
  // rounds, or is still moving to another worker, was never seen on a list.
  last_active_ms_ = worker_.now_ms();
  if (logging_in(from) != logging_in(to)) {
    if (logging_in(to)) {
      // try_launch counted it already when it claimed the pool's only login.
      if (!std::exchange(login_claimed_, false)) SharedLimits::login_started(limit_slots_);
    } else if (const uint64_t wake = SharedLimits::login_ended(limit_slots_); wake != 0) {
      // A login that succeeded tells them from on_server_login_ok, once its greeting is
      // published; one that failed, now.
      login_wake_ |= wake;
      if (to != Server::State::idle) wake_login_waiters();
    }
  }
  if (logged_in(from) != logged_in(to)) {
    SharedLimits::add_logged_in(limit_slots_, logged_in(to) ? 1 : -1);
  }
  if (ServerList* list = list_for(from); list != nullptr && server.pool_node.linked()) {
    list->remove(server);
  }
  if (ServerList* list = list_for(to); list != nullptr) {
    // Idle servers are a stack: the most recently used is reused first, the rest age out; under
    // server_round_robin a queue, so that each server takes its turn.
    if (to == Server::State::idle && !worker_.settings().server_round_robin) {
      list->push_front(server);
    } else {
      list->push_back(server);
    }
  }
}

void Pool::on_server_idle(Server& server) {
  const uint64_t now = worker_.now_ms();
  if (server.life.checking) {
    // server_check_query passed: good for the next client without another check.
    server.life.checking = false;
    server.life.fresh = true;
  }
  server.life.idle_since_ms = now;
  // Roles and failover (pool_roles.cc, pool_failover.cc) cost a flag test here when the entry
  // has no target_session_attrs and no host is in trouble: this runs at every release.
  const bool roles = db_.target_session_attrs != TargetSessionAttrs::any;
  if ((roles || server.life.role_checking) && !take_role_answer(server, now)) return;
  // PostgreSQL reports a promotion (in_hot_standby off) with the first reply after it, and a
  // primary turned read-only likewise (the role check finds both on an idle server): a server
  // whose role no longer fits leaves the pool between transactions, never in the middle of one.
  if (roles && close_if_wrong_role(server, "the server's role changed")) return;
  if (no_usable_host_ || trouble_since_ms_ != 0) end_outage(server, now);
  if (SharedLimits::open_servers(limit_slots_) > pool_size_ + reserve_pool()) {
    // The pool shrank under it (a reload): the extra server goes. Reserve servers stay until
    // server_idle_timeout, as in PgBouncer, ready for the next burst. Counted over every worker:
    // each worker's share may be within the new size while the pool is not.
    server.close("pool is over its size");
    return;
  }
  if (server.timing.close_needed) {
    server.close("reconnect requested (RECONNECT, a changed database or server TLS settings)");
    return;
  }
  if (paused_ && close_on_release_) {
    // PAUSE is for restarting PostgreSQL: like PgBouncer, let go of every released server.
    server.close("pause mode");
    return;
  }
  if (removed_ && waiting_.empty()) {
    server.close("database removed from the configuration");
    return;
  }
  // Between transactions is the one safe moment to retire an old server.
  const auto lifetime = static_cast<uint64_t>(worker_.config().server_lifetime_for(db_).count());
  if (past_lifetime(server.life.born_ms, staggered_lifetime_ms(lifetime, server.life.stagger),
                    now)) {
    server.close("server_lifetime");
    return;
  }
  // A one-host entry (nearly every one) costs this test, not a call (pool_rebalance.cc).
  if (hosts_.size() > 1 && rebalance_at_release(server, now)) return;
  if (!replication_waiting_.empty() && !launch_allowed(launch_verdict(launch_input()))) {
    // A replication client waits for a slot that only a released server can free: it gets
    // this one's (a walsender cannot take over a pooled session, so the server closes).
    server.close("evicted: a replication connection waits for a slot of the pool");
    return;
  }
  // Both cost a flag test for a pool without connection limits on a single worker.
  if (limits_shared() && yield_to_other_pool()) {
    server.close("max_db_connections/max_user_connections: handed to a pool waiting longer");
    return;
  }
  if (const SharedLimits::YieldTo to =
          worker_.group().size() > 1 ? yield_to_other_worker() : SharedLimits::YieldTo{};
      to.worker >= 0) {
    if (!to.same_pool()) {
      server.close(to.close_reason());
      return;
    }
    if (hand_to_starving_worker(server, to.worker)) return;
  }
  serve_waiters();
}

void Pool::on_server_closing() {
  ++closing_open_;  // until on_server_destroyed(): its backend still counts in PostgreSQL
  SharedLimits::add_closing(limit_slots_, 1);
  // Replace the server when clients are waiting and nothing else is on its way.
  launch_for_waiters(/*evict=*/false);
}

void Pool::fail_waiters_past_timeout(ClientList& list, uint64_t now_ms, bool with_login_failure) {
  if (list.empty()) return;
  // Each client's own query_wait_timeout (its [users] line's, the database's, the main
  // section's), so the queue's order does not say who is over: every waiter is looked at. Its
  // clients are mostly of one user, whose timeout is looked up once.
  const Config& config = worker_.config();
  const std::string* user = nullptr;
  uint64_t timeout = 0;
  // Moved to a list of their own before any is failed: a client that goes meanwhile leaves it.
  ClientList overdue;
  list.for_each([&](Client& c) {
    if (user == nullptr || *user != c.user()) {
      user = &c.user();
      timeout = static_cast<uint64_t>(config.query_wait_timeout_for(db_, c.user()).count());
    }
    if (timeout > 0 && c.wait_started_ms() + timeout <= now_ms) {
      list.remove(c);
      overdue.push_back(c);
    }
  });
  while (Client* client = overdue.pop_front()) {
    client->fail(sqlstate::kQueryCanceled, with_login_failure
                                               ? "query_wait_timeout" + login_failure_note()
                                               : std::string("query_wait_timeout"));
  }
}

void Pool::check_timeouts(uint64_t now_ms) {
  // query_wait_notify: each client queued longer hears it once per wait. The queue is in the
  // order of waiting: when its first client has not waited that long, nobody has.
  const auto notify = static_cast<uint64_t>(worker_.settings().query_wait_notify.count());
  if (notify > 0 && !waiting_.empty() && waiting_.front().wait_started_ms() + notify < now_ms) {
    waiting_.for_each([&](Client& c) {
      if (!c.wait.notice_sent && c.wait_started_ms() + notify < now_ms) c.notify_queued();
    });
  }
  // A client waiting for its greeting waits for a server too (PgBouncer counts it so): for a
  // pool whose servers cannot be reached, this is where its wait ends.
  fail_waiters_past_timeout(welcome_waiting_, now_ms, /*with_login_failure=*/true);
  fail_waiters_past_timeout(waiting_, now_ms, /*with_login_failure=*/true);
  fail_waiters_past_timeout(replication_waiting_, now_ms, /*with_login_failure=*/false);
  publish_wait();
}

}  // namespace pgsluice

namespace pgsluice {

void Pool::set_paused(bool paused, bool close_servers) {
  paused_ = paused;
  close_on_release_ = paused && close_servers;
  if (paused) {
    if (close_on_release_) {
      login_.for_each([](Server& s) { s.close("pause mode"); });
      idle_.for_each([](Server& s) { s.close("pause mode"); });
    }
    return;
  }
  // RESUME: serve what queued up, starting servers as request_server() would have.
  serve_waiters();
  launch_for_waiters();
}

void Pool::apply_config(const DatabaseEntry& db, PoolMode mode, int pool_size) {
  const bool address_changed = db.host != db_.host || db.port != db_.port ||
                               db.ports != db_.ports || db.dbname != db_.dbname ||
                               db.password != db_.password ||
                               db.target_session_attrs != db_.target_session_attrs ||
                               db.load_balance_hosts != db_.load_balance_hosts;
  db_ = db;
  mode_ = mode;
  removed_ = false;  // a database removed and added back is served again
  note_limits();     // Worker::apply_config has the new config in place
  if (address_changed) {
    hosts_.reset(db_);
    role_news_seen_ = 0;
    trouble_since_ms_ = 0;
    no_usable_host_ = false;
    if (!db.password.empty()) credentials_.password = db.password;
    mark_close_needed();
  }
  const int old_size = pool_size_;
  pool_size_ = pool_size;
  if (pool_size_ < old_size) {
    // Extra idle servers go now; busy ones when they are released (on_server_idle).
    idle_.for_each([this](Server& s) {
      if (static_cast<int>(server_count()) > pool_size_ + reserve_pool()) {
        s.close("pool is over its size");
      }
    });
  } else if (!paused_) {
    launch_for_waiters();
  }
}

void Pool::mark_close_needed(std::string_view reason) {
  servers_obsolete_ = true;
  idle_.for_each([reason](Server& s) { s.close(reason); });
  // Replication servers close at the janitor's next round (maintain): they may never end.
  for (ServerList* list : serving_lists()) {
    list->for_each([](Server& s) { s.timing.close_needed = true; });
  }
}

void Pool::on_server_tls_changed() {
  mark_close_needed("database configuration changed: server TLS settings");
  // The failed attempts were made with other settings: the next login may well succeed.
  SharedLimits::login_succeeded(limit_slots_);
  hosts_.reset(db_);
  role_news_seen_ = 0;
  trouble_since_ms_ = 0;
  no_usable_host_ = false;
  if (!paused_) launch_for_waiters();
}

size_t Pool::close_needed_count() {
  size_t n = 0;
  for_each_server([&n](Server& s) { n += s.timing.close_needed ? 1 : 0; });
  return n;
}

uint64_t Pool::oldest_wait_start_us() {
  return waiting_.empty() ? 0 : waiting_.front().wait.started_us;
}

void Pool::kill(std::string_view reason) {
  while (Client* client = welcome_waiting_.pop_front()) {
    client->fail(sqlstate::kAdminShutdown, reason);
  }
  while (Client* client = waiting_.pop_front()) client->fail(sqlstate::kAdminShutdown, reason);
  while (Client* client = pin_waiting_.pop_front()) {
    client->wait.on_pin_list = false;
    client->fail(sqlstate::kAdminShutdown, reason);
  }
  while (Client* client = replication_waiting_.pop_front()) {
    client->fail(sqlstate::kAdminShutdown, reason);
  }
  fail_pooler_waiters();
  for (ServerList* list : serving_lists()) {
    list->for_each([reason](Server& server) { server.close(reason); });
  }
  listeners_.for_each([reason](Server& server) { server.close(reason); });
}

void Pool::close_all_servers() {
  for (ServerList* list : serving_lists()) {
    list->for_each([](Server& server) { server.close("pgsluice is shutting down"); });
  }
  listeners_.for_each([](Server& server) { server.close("pgsluice is shutting down"); });
}

}  // namespace pgsluice
