// See worker_group.h.
#include "pooler/core/worker_group.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "pooler/core/worker.h"
#include "pooler/net/tls_context.h"

namespace pgsluice {

void SharedWelcomes::publish(const std::string& db, const std::string& user,
                             const ParameterSet& params) {
  std::lock_guard lock(mutex_);
  welcomes_.try_emplace({db, user}, params);
}

std::optional<ParameterSet> SharedWelcomes::find(const std::string& db, const std::string& user) {
  std::lock_guard lock(mutex_);
  auto it = welcomes_.find({db, user});
  if (it == welcomes_.end()) return std::nullopt;
  return it->second;
}

WorkerGroup::WorkerGroup(const std::shared_ptr<const Config>& config,
                         const std::shared_ptr<const AuthSecrets>& secrets, int workers) {
  world_ = std::make_unique<World>(workers, [this](int i) { return worker(i).wake(); });
  for (int i = 0; i < workers; ++i) {
    workers_.push_back(std::make_unique<Worker>(*this, i, config, secrets));
  }
}

WorkerGroup::~WorkerGroup() = default;

Worker& WorkerGroup::next_for_client(size_t spread_above) {
  // Fewest clients rather than blind turns: clients that leave unevenly (long sessions on one
  // worker, short ones on another) would otherwise leave the workers unbalanced for good.
  const size_t clients =
      clients_.load(std::memory_order_relaxed) + handoffs_.load(std::memory_order_relaxed);
  if (clients < spread_above) return primary();
  const size_t n = workers_.size();
  size_t best = next_worker_;
  size_t best_load = workers_[best]->placed_clients();
  for (size_t k = 1; k < n; ++k) {
    const size_t i = (next_worker_ + k) % n;
    const size_t load = workers_[i]->placed_clients();
    if (load < best_load) {
      best = i;
      best_load = load;
    }
  }
  next_worker_ = (best + 1) % n;
  return *workers_[best];
}

void WorkerGroup::set_tls(const TlsContexts& tls) {
  for (auto& w : workers_) w->set_tls(tls);
}

std::string WorkerGroup::listen() {
  return primary().listen();
}

void WorkerGroup::run() {
  std::vector<std::thread> threads;
  for (size_t i = 1; i < workers_.size(); ++i) {
    threads.emplace_back([w = workers_[i].get()] { w->run(); });
  }
  if (workers_.size() > 1) spdlog::info("{} workers running", workers_.size());
  primary().run();
  for (auto& t : threads) t.join();
}

void WorkerGroup::stop_all() {
  for (auto& w : workers_) w->stop();
}

}  // namespace pgsluice
