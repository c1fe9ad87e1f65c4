// See listen_relay.h.
#include "pooler/core/listen_relay.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"
#include "pooler/core/worker_group.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace be = pgsluice::protocol::backend;

uint64_t ListenRelay::backoff_ms(int failures) {
  if (failures <= 1) return 0;
  const int doublings = std::min(failures - 2, 5);
  return std::min<uint64_t>(uint64_t{200} << doublings, 5000);
}

bool ListenRelay::update(const Client& client, const ChannelSet& added, const ChannelSet& removed) {
  if (added.empty() && removed.empty()) return true;
  const RelaySubscriber who{.worker = client.worker_index(), .client = client.id()};
  bool ready = false;
  int listener_worker = 0;
  {
    std::lock_guard lock(mutex_);
    if (listener_worker_ < 0) listener_worker_ = who.worker;
    listener_worker = listener_worker_;
    ready = registry_.update(who, added, removed);
  }
  group_.worker(listener_worker).post([this] { kick(); });
  return ready;
}

void ListenRelay::remove(const Client& client) {
  std::lock_guard lock(mutex_);
  registry_.remove(RelaySubscriber{.worker = client.worker_index(), .client = client.id()});
  // What nobody listens on any more is unlistened with the next query the listener sends.
}

void ListenRelay::kick() {
  Worker& worker = group_.worker(listener_worker_);
  if (listener_ == nullptr) {
    if (worker.now_ms() >= retry_at_ms_) launch(worker);
    return;
  }
  if (listener_ready_) send_next_query();
}

void ListenRelay::launch(Worker& worker) {
  if (worker.stopping()) return;
  {
    std::lock_guard lock(mutex_);
    if (registry_.empty()) return;
  }
  Pool* pool = worker.find_pool(slots_);
  if (pool == nullptr) return;  // the worker of the pool's first listener always has a share
  listener_ = pool->launch_listener(*this);
}

void ListenRelay::on_listener_ready(Server& listener) {
  if (&listener != listener_) return;
  listener_ready_ = true;
  failures_ = 0;
  spdlog::info("{} is the LISTEN relay's listener (backend pid {})", listener.log_id(),
               listener.backend_pid());
  // Nobody listens any more: nobody to tell that notifications may have been missed.
  if (!send_next_query()) tell_missed_ = false;
}

bool ListenRelay::send_next_query() {
  std::string sql;
  {
    std::lock_guard lock(mutex_);
    sql = registry_.next_listener_query();
  }
  if (sql.empty()) return false;
  listener_->send_listener_query(sql);
  return true;
}

void ListenRelay::on_listener_message(Server& listener, const pp::Message& message) {
  if (&listener != listener_) return;
  switch (message.type) {
    case be::kNotificationResponse: {
      auto n = pp::parse_notification_response(message.body);
      if (!n) return;
      std::vector<RelaySubscriber> who;
      {
        std::lock_guard lock(mutex_);
        who = registry_.subscribers(n.value.channel);
      }
      if (!who.empty()) {
        post_to_clients(who, std::string(n.value.channel), std::string(message.wire), false);
      }
      return;
    }
    case be::kReadyForQuery: {
      std::vector<RelaySubscriber> due;
      std::vector<RelaySubscriber> everyone;
      {
        std::lock_guard lock(mutex_);
        due = registry_.on_listener_query_done();
        if (tell_missed_) everyone = registry_.all_subscribers();
      }
      if (!due.empty()) post_to_clients(due, {}, {}, true);
      if (tell_missed_) {
        tell_missed_ = false;
        std::string notice;
        pp::write_notice_response(
            notice, pp::ErrorNotice{.severity = "NOTICE",
                                    .code = sqlstate::kConnectionFailure,
                                    .message = "pgsluice's LISTEN relay lost its connection to "
                                               "the server and listens again: notifications "
                                               "sent meanwhile may have been missed",
                                    .detail = {},
                                    .hint = {}});
        if (!everyone.empty()) post_to_clients(everyone, {}, std::move(notice), false);
      }
      send_next_query();
      return;
    }
    case be::kErrorResponse: {
      auto error = pp::parse_error_fields(message.body);
      spdlog::warn("{} LISTEN relay query failed: {}", listener.log_id(),
                   error ? std::string(error.value.message) : std::string("malformed error"));
      return;
    }
    default:
      return;  // CommandComplete, ParameterStatus, notices
  }
}

void ListenRelay::on_listener_closed(Server& listener) {
  if (&listener != listener_) return;
  const bool was_ready = listener_ready_;
  listener_ = nullptr;
  listener_ready_ = false;
  ++failures_;
  Worker& worker = group_.worker(listener_worker_);
  retry_at_ms_ = worker.now_ms() + backoff_ms(failures_);
  std::vector<RelaySubscriber> due;
  bool anyone = false;
  {
    std::lock_guard lock(mutex_);
    registry_.on_listener_lost();
    anyone = !registry_.empty();
    // Clients whose ReadyForQuery waits for a listener that cannot log in are not held up any
    // longer: they get it now, and the NOTICE when the listener is back.
    if (!was_ready) due = registry_.take_pending();
  }
  if (anyone) tell_missed_ = true;
  if (!due.empty()) post_to_clients(due, {}, {}, true);
  if (anyone && !worker.stopping()) {
    spdlog::warn("LISTEN relay of {}/{} lost its listener; reconnecting in {} ms",
                 listener.pool().database().name, listener.pool().credentials().user,
                 backoff_ms(failures_));
  }
}

void ListenRelay::tick(Worker& worker) {
  {
    std::lock_guard lock(mutex_);
    if (listener_worker_ != worker.index() || registry_.empty()) return;
  }
  if (listener_ == nullptr && worker.now_ms() >= retry_at_ms_) launch(worker);
}

void ListenRelay::post_to_clients(const std::vector<RelaySubscriber>& who, std::string channel,
                                  std::string wire, bool confirm) {
  std::map<int, std::vector<uint64_t>> by_worker;
  for (const RelaySubscriber& s : who) by_worker[s.worker].push_back(s.client);
  for (auto& [index, ids] : by_worker) {
    Worker& target = group_.worker(index);
    target.post([&target, ids = std::move(ids), channel, wire, confirm] {
      for (uint64_t id : ids) {
        Client* client = target.find_relay_client(id);
        if (client == nullptr) continue;
        if (confirm) {
          client->on_relay_confirmed();
        } else {
          client->on_relay_message(channel, wire);
        }
      }
    });
  }
}

ListenRelay& ListenRelays::for_pool(WorkerGroup& group, const LimitSlots& slots) {
  std::lock_guard lock(mutex_);
  std::unique_ptr<ListenRelay>& relay = relays_[slots.pool];
  if (relay == nullptr) relay = std::make_unique<ListenRelay>(group, slots);
  return *relay;
}

void ListenRelays::tick(Worker& worker) {
  std::vector<ListenRelay*> relays;
  {
    std::lock_guard lock(mutex_);
    if (relays_.empty()) return;
    for (auto& [key, relay] : relays_) relays.push_back(relay.get());
  }
  for (ListenRelay* relay : relays) relay->tick(worker);
}

}  // namespace pgsluice
