// The admin console object; see console.h.
#include "pooler/admin/console.h"

#include <spdlog/spdlog.h>

#include "pooler/admin/metrics_server.h"
#include "pooler/admin/session.h"
#include "pooler/core/worker.h"

namespace pgsluice {

Console::Console(Worker& primary, Shutdown& shutdown)
    : shutdown_(shutdown),
      control_(primary, shutdown),
      pause_signals_(primary, control_, shutdown) {}

Console::~Console() = default;

std::unique_ptr<ConsoleSession> Console::open(Worker& worker, Client& client) {
  return AdminSession::start(*this, worker, client);
}

bool Console::start_metrics(Worker& primary) {
  const Settings& s = primary.settings();
  if (s.metrics_port == 0) return true;
  metrics_ = std::make_unique<MetricsServer>(primary, control_);
  std::string error = metrics_->listen(s.metrics_addr, s.metrics_port);
  if (!error.empty()) {
    spdlog::error("metrics endpoint {}:{}: {}", s.metrics_addr, s.metrics_port, error);
    metrics_.reset();
    return false;
  }
  spdlog::info("metrics on http://{}:{}/metrics", s.metrics_addr, s.metrics_port);
  return true;
}

void Console::stop_metrics() {
  if (metrics_) metrics_->close();
}

}  // namespace pgsluice
