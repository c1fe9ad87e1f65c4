// The worker's loop: listening, accepting, pools, cancel keys, the janitor timer, signals.
#include "pooler/core/worker.h"

#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstring>

#include "pgsluice/protocol/md5.h"
#include "pgsluice/protocol/scram.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/secure_random.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/auth_query.h"
#include "pooler/core/cancel_key.h"
#include "pooler/core/peer_forwarder.h"
#include "pooler/core/session_checks.h"
#include "pooler/net/cancel_sender.h"
#include "pooler/net/send_ring.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

namespace {
// Sends per io_uring submission; a turn with more submits more than once.
constexpr unsigned kSendRingEntries = 128;
// See on_janitor: 256 kB is a burst of ~128 idle clients (2 kB first reads); trimming costs a walk
// of the heap, so it is not done for a handful.
constexpr size_t kTrimAfterReleasedBytes = 256 * 1024;

// Under AddressSanitizer every allocation is ASan's, and glibc's malloc_trim called from a thread
// walks an arena glibc never set up: it crashed reading address 0x8 in CI (test_security, ASan
// build; google/sanitizers#1721). Nothing of glibc's heap is in use there to give back, so only
// builds on glibc's heap trim.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kHeapIsGlibcs = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kHeapIsGlibcs = false;
#else
constexpr bool kHeapIsGlibcs = true;
#endif
#else
constexpr bool kHeapIsGlibcs = true;
#endif

constexpr uint64_t kJanitorPeriodMs = 200;

}  // namespace

Worker::Worker(WorkerGroup& group, int index, std::shared_ptr<const Config> config,
               std::shared_ptr<const AuthSecrets> secrets)
    : group_(group), index_(index), config_(std::move(config)), secrets_(std::move(secrets)) {
  uv_loop_init(&loop_);
  uv_signal_init(&loop_, &sighup_);
  sighup_.data = this;
  uv_timer_init(&loop_, &janitor_);
  janitor_.data = this;
  uv_timer_init(&loop_, &hosts_due_);
  hosts_due_.data = this;
  // The primary starts its janitor once it listens; the others run theirs from the start.
  if (index_ != 0) uv_timer_start(&janitor_, on_janitor, kJanitorPeriodMs, kJanitorPeriodMs);
  uv_async_init(&loop_, &wake_, on_wake);
  wake_.data = this;
  uv_prepare_init(&loop_, &turn_);
  turn_.data = this;
  uv_prepare_start(&turn_, [](uv_prepare_t* handle) {
    auto* self = static_cast<Worker*>(handle->data);
    self->flushes_.run();
    self->turn_us_ = 0;
  });
  uv_check_init(&loop_, &turn_end_);
  turn_end_.data = this;
  uv_check_start(&turn_end_,
                 [](uv_check_t* handle) { static_cast<Worker*>(handle->data)->flushes_.run(); });
  loop_.data = &flushes_;
  started_ms_ = now_ms();
  disable_pqexec_ = config_->settings.disable_pqexec;
}

// --- other threads: tasks and parking ---

bool Worker::post(std::function<void()> task) {
  std::lock_guard lock(tasks_mutex_);
  if (!wake_open_) return false;
  tasks_.push_back(std::move(task));
  uv_async_send(&wake_);
  return true;
}

bool Worker::wake() {
  std::lock_guard lock(tasks_mutex_);
  if (!wake_open_) return false;
  uv_async_send(&wake_);
  return true;
}

void Worker::on_wake(uv_async_t* handle) {
  auto* self = static_cast<Worker*>(handle->data);
  self->flushes_.run();  // as in pause_world: the world may stop to read this worker's objects
  self->group_.world().park(self->index_);
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard lock(self->tasks_mutex_);
    tasks.swap(self->tasks_);
  }
  for (auto& task : tasks) task();
}

void Worker::retry_starving(const LimitSlots& slots) {
  for (auto& [key, pool] : pools_) {
    if (pool->limit_slots().db == slots.db || pool->limit_slots().user == slots.user) {
      pool->launch_for_waiters(/*evict=*/false);
    }
  }
}

void Worker::on_host_role_news() {
  for (auto& [key, pool] : pools_) pool->launch_for_waiters(/*evict=*/false);
}

void Worker::wake_pools_at(uint64_t due_ms) {
  if (stopping_) return;
  const uint64_t now = now_ms();
  if (hosts_due_ms_ > now && hosts_due_ms_ <= due_ms) return;  // armed for sooner
  hosts_due_ms_ = due_ms;
  uv_timer_start(
      &hosts_due_,
      [](uv_timer_t* timer) {
        auto* self = static_cast<Worker*>(timer->data);
        self->hosts_due_ms_ = 0;
        self->on_host_role_news();
      },
      due_ms > now ? due_ms - now : 0, 0);
}

void Worker::take_handed_slot(const LimitSlots& slots) {
  for (auto& [key, pool] : pools_) {
    if (pool->limit_slots().pool == slots.pool) {
      pool->launch_on_handed_slot();
      return;
    }
  }
  // No share of that pool here (pool_idle_timeout freed it, nobody waiting): given back.
  SharedLimits::release(slots, index_);
}

void Worker::yield_idle_server(const LimitSlots& slots) {
  for (auto& [key, pool] : pools_) {
    if (pool->limit_slots().db != slots.db && pool->limit_slots().user != slots.user) continue;
    if (pool->yield_idle_server_to_other_worker()) return;
  }
}

Worker::~Worker() {
  pools_.clear();
  uv_loop_close(&loop_);
}

std::optional<std::string> Worker::secret_for(const std::string& user) const {
  auto it = secrets_->by_user.find(user);
  if (it == secrets_->by_user.end()) return std::nullopt;
  return it->second;
}

const pp::ScramVerifier* Worker::plain_scram_verifier(const std::string& user,
                                                      const std::string& secret) {
  if (secret.empty() || pp::is_scram_verifier(secret) || pp::is_md5_password_hash(secret)) {
    return nullptr;
  }
  const int iterations = settings().scram_iterations;
  auto it = scram_cache_.find(user);
  // Made again when the password or scram_iterations (SET, RELOAD) changed.
  if (it == scram_cache_.end() || it->second.first != secret ||
      it->second.second.iterations != iterations) {
    std::string salt(16, '\0');
    // A failed draw leaves a zero salt: the verifier still works, made once per password.
    (void)secure_random(salt.data(), salt.size());
    it = scram_cache_
             .insert_or_assign(
                 user, std::make_pair(secret, pp::make_scram_verifier(secret, salt, iterations)))
             .first;
  }
  return &it->second.second;
}

Pool& Worker::pool_for(const DatabaseEntry& db, const std::string& user) {
  ServerCredentials cred;
  if (!db.user.empty()) {
    cred.user = db.user;
    cred.password = db.password;
  } else {
    cred.user = user;
  }
  if (cred.password.empty()) {
    if (auto secret = secret_for(cred.user)) cred.password = *secret;
  }
  auto key = std::make_pair(db.name, cred.user);
  auto it = pools_.find(key);
  if (it != pools_.end()) return *it->second;
  const int pool_size = config_->pool_size_for(db, cred.user);
  auto pool = std::make_unique<Pool>(*this, db, std::move(cred), config_->pool_mode_for(db, user),
                                     pool_size);
  Pool& ref = *pool;
  pools_.emplace(key, std::move(pool));
  extensions().on_new_pool(ref);  // a paused database's new pool starts paused
  return ref;
}

void Worker::free_pool(Pool& pool) {
  pools_.erase(std::make_pair(pool.database().name, pool.credentials().user));
}

// --- listening (the sockets themselves: worker_listen.cc) ---

std::string Worker::listen() {
  started_ms_ = now_ms();
  // Before the port accepts: whoever sees it open may signal at once (a SIGHUP not yet caught
  // would end the process).
  extensions().before_listen(*this);
  uv_signal_start(&sighup_, on_sighup, SIGHUP);
  std::string error = open_listeners();
  if (error.empty() && !extensions().after_listen(*this)) {
    error = "the metrics endpoint could not listen";
  }
  if (!error.empty()) {
    listeners_.clear();
    uv_signal_stop(&sighup_);
    extensions().stop(*this);
    uv_run(&loop_, UV_RUN_NOWAIT);  // the closes complete, so that the loop can be closed
    return error;
  }
  resume_taken_clients();  // -R: posted to their workers, which serve them once running
  uv_timer_start(&janitor_, on_janitor, kJanitorPeriodMs, kJanitorPeriodMs);
  return {};
}

void Worker::on_client_closed(Client& client) {
  clients_.remove(client);
  placed_clients_.fetch_sub(1, std::memory_order_relaxed);
  group_.client_count().fetch_sub(1, std::memory_order_relaxed);
  delete &client;
}

// --- cancel keys ---

bool Worker::register_cancel_key(Client& client) {
  // Protocol 3.2 clients take long keys; 3.0 clients exactly four bytes.
  size_t key_size = client.protocol_version() >= pp::kProtocolVersion32 ? 32 : 4;
  std::string key(key_size, '\0');
  // Without the CSPRNG there is no key nobody can guess (an all-zero one would let anyone cancel
  // the client's queries), and a failing draw would spin this loop forever: refuse instead,
  // as PostgreSQL does ("could not generate random cancel key").
  // The pid names this worker and the peer id (cancel_key.h). A pid of its own while a few draws
  // find one; with peering there are only 2^15 / workers pids per worker, so past those draws a
  // client shares its pid and its secret tells it apart.
  constexpr int kPidDraws = 8;
  const int peer_id = settings().peer_id;
  int32_t pid = 0;
  for (int draw = 1;; ++draw) {
    uint32_t raw = 0;
    if (!secure_random(&raw, sizeof(raw))) return false;
    pid = cancel_key::make_pid(raw, index_, group_.size(), peer_id);
    if (pid > 0 && (draw >= kPidDraws || !cancel_index_.contains(pid))) break;
  }
  if (!secure_random(key.data(), key.size())) return false;
  if (peer_id != 0) cancel_key::set_ttl(key, cancel_key::kFullTtl);
  client.set_cancel_key(pid, std::move(key));
  cancel_index_.emplace(pid, &client);
  return true;
}

void Worker::unregister_cancel_key(Client& client) {
  auto [first, last] = cancel_index_.equal_range(client.cancel_pid());
  for (auto it = first; it != last; ++it) {
    if (it->second == &client) {
      cancel_index_.erase(it);
      return;
    }
  }
}

Client* Worker::find_cancel_target(int32_t pid, std::string_view key) {
  // Every client of the pid is compared (in constant time), so how long a guess takes does not
  // tell which of them matched, if any.
  Client* found = nullptr;
  auto [first, last] = cancel_index_.equal_range(pid);
  for (auto it = first; it != last; ++it) {
    if (pp::constant_time_equal(it->second->cancel_key(), key)) found = it->second;
  }
  return found;
}

void Worker::route_cancel(int32_t pid, std::string key, std::string from) {
  if (const int own_peer = settings().peer_id; own_peer != 0) {
    if (cancel_key::peer_id_of(pid) != own_peer) {
      forward_to_peer(pid, std::move(key), from);
      return;
    }
    // Issued here: the keys kept carry the full TTL, the request maybe a forwarded one's.
    cancel_key::set_ttl(key, cancel_key::kFullTtl);
  }
  const int owner = cancel_key::worker_of(pid, group_.size());
  if (owner == index_) {
    deliver_cancel(pid, key, from);
    return;
  }
  Worker& target = group_.worker(owner);
  target.post([&target, pid, key = std::move(key), from = std::move(from)] {
    target.deliver_cancel(pid, key, from);
  });
}

void Worker::deliver_cancel(int32_t pid, const std::string& key, const std::string& from) {
  Client* target = find_cancel_target(pid, key);
  if (target == nullptr) {
    spdlog::info("{} cancel request with an unknown key ignored", from);
  } else if (target->server() == nullptr) {
    spdlog::info("{} cancel request for idle {} ignored", from, target->log_id());
  } else {
    spdlog::info("{} cancel request for {}", from, target->log_id());
    target->server()->cancel_running_query();
  }
}

void Worker::send_cancel(const ServerAddress& address, int32_t backend_pid, const std::string& key,
                         CancelHooks hooks) {
  std::string packet;
  pp::write_cancel_request(packet, backend_pid, key);
  CancelSender::send(&loop_, address, std::move(packet),
                     static_cast<uint64_t>(settings().cancel_wait_timeout.count()),
                     std::move(hooks));
}

// --- janitor and lifecycle ---

void Worker::on_janitor(uv_timer_t* timer) {
  auto* self = static_cast<Worker*>(timer->data);
  // Every worker sweeps its own clients and pools on its own clock: no other worker waits.
  self->janitor_round();
  // What spans every worker (a console command's wait, the stats_period roll, a shutdown's
  // progress) stops the world, and only when there is some (docs/design.md).
  if (self->primary() && !self->stopping_ && self->extensions().janitor_needs_world(now_us())) {
    WorldPause pause = self->pause_world();
    self->extensions().on_janitor(*self, self->now_ms());
  }
}

void Worker::janitor_round() {
  uint64_t now = now_ms();
  check_long_holds(*this);      // session_state_long_hold (session_checks.h)
  group_.relays().tick(*this);  // LISTEN relays' reconnects (listen_relay.h)
  size_t released = 0;
  size_t busy = 0;  // clients queued for or linked to a server
  auto login_timeout = static_cast<uint64_t>(settings().client_login_timeout.count());
  clients_.for_each([&](Client& c) {
    bool logging_in = c.state() == Client::State::startup || c.state() == Client::State::auth;
    // Authenticated, but no server of its pool has logged in to greet it (PgBouncer's words).
    bool greeting = c.state() == Client::State::welcome_wait &&
                    c.replication() == protocol::ReplicationMode::none;
    if ((logging_in || greeting) && login_timeout > 0 && c.connected_ms() + login_timeout <= now) {
      c.fail(sqlstate::kProtocolViolation,
             greeting ? "client_login_timeout (server down)" + c.pool()->login_failure_note()
                      : "client_login_timeout");
    } else if (c.state() == Client::State::idle) {
      // At most once a tick per client: the next read allocates again (measured: the idle
      // client's cost falls from ~20 kB to a few kB, see the note of the performance issue).
      released += c.channel().release_idle_buffers();
    } else if (c.state() == Client::State::waiting || c.state() == Client::State::active) {
      ++busy;
    }
  });
  // glibc keeps freed buffers in the heap, resident; after a sweep that freed many of them with
  // nobody busy (a burst of clients gone idle), give the pages back so that idle clients cost
  // what they hold. Not under load: trimming every tick there cost ~25% more CPU per transaction
  // (pgbench -S, 1,000 clients), since the next reads fault the pages back in.
  if (kHeapIsGlibcs && released >= kTrimAfterReleasedBytes && busy == 0) malloc_trim(0);
  // Pool maintenance and client timeouts of this worker's own pools and clients.
  extensions().on_worker_janitor(*this, now);
}

void Worker::on_sighup(uv_signal_t* handle, int) {
  auto* self = static_cast<Worker*>(handle->data);
  WorldPause pause = self->pause_world();
  // The same as the console's RELOAD: a bad file keeps the old settings and logs why.
  std::string error = self->reload();
  if (error.empty()) {
    spdlog::info("SIGHUP: configuration reloaded from {}", self->config().path);
  } else {
    spdlog::error("SIGHUP: reload failed, keeping the old configuration: {}", error);
  }
}

void Worker::stop() {
  if (stopping_) return;
  stopping_ = true;
  listeners_.clear();
  if (primary()) extensions().stop(*this);
  if (peer_forwarder_) peer_forwarder_->stop();
  uv_timer_stop(&janitor_);
  uv_close(reinterpret_cast<uv_handle_t*>(&janitor_), nullptr);
  uv_timer_stop(&hosts_due_);
  uv_close(reinterpret_cast<uv_handle_t*>(&hosts_due_), nullptr);
  uv_prepare_stop(&turn_);
  uv_close(reinterpret_cast<uv_handle_t*>(&turn_), nullptr);
  // From here on writes go out at once: the handles that sent the batch are closing.
  flushes_.run();
  loop_.data = nullptr;
  uv_check_stop(&turn_end_);
  uv_close(reinterpret_cast<uv_handle_t*>(&turn_end_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sighup_), nullptr);
  clients_.for_each(
      [](Client& c) { c.fail(sqlstate::kAdminShutdown, kShutdownMessage, kShutdownLogReason); });
  for (auto& [key, pool] : pools_) pool->close_all_servers();
  std::lock_guard lock(tasks_mutex_);
  wake_open_ = false;
  uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
}

void Worker::run() {
  // Made on the thread that submits to it (the ring admits one submitting thread).
  std::string why = "io_uring = 0";
  if (config_->settings.io_uring && !flushes_.has_ring()) {
    flushes_.use_ring(SendRing::open(kSendRingEntries, why));
  }
  if (index_ == 0 && flushes_.has_ring()) {
    spdlog::info("a loop turn's sends: one io_uring submission");
  } else if (index_ == 0) {
    spdlog::info("a loop turn's sends: one send() each ({})", why);
  }
  uv_run(&loop_, UV_RUN_DEFAULT);
  group_.world().retire(index_);
}

}  // namespace pgsluice
