// The /metrics HTTP responder; see metrics_server.h.
#include "pooler/admin/metrics_server.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "pooler/admin/control.h"
#include "pooler/admin/metrics_format.h"
#include "pooler/admin/show.h"
#include "pooler/admin/views.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace {
constexpr size_t kMaxConnections = 64;       // scrapers are few; more is a misbehaving client
constexpr size_t kMaxRequestBytes = 8192;    // a GET with headers fits easily
constexpr uint64_t kIdleTimeoutMs = 10'000;  // a connection that sends no request goes
}  // namespace

struct MetricsServer::Connection {
  MetricsServer* server = nullptr;
  uv_tcp_t tcp{};
  uv_timer_t timer{};
  uv_write_t write_req{};
  std::string request;
  std::string response;
  int open_handles = 0;  // tcp and timer; deleted when both have closed
  bool closing = false;
  bool responded = false;
};

MetricsServer::MetricsServer(Worker& worker, const AdminControl& control)
    : worker_(worker), control_(control) {}

MetricsServer::~MetricsServer() = default;

std::string MetricsServer::listen(const std::string& addr, int port) {
  sockaddr_storage storage{};
  if (uv_ip4_addr(addr.c_str(), port, reinterpret_cast<sockaddr_in*>(&storage)) != 0 &&
      uv_ip6_addr(addr.c_str(), port, reinterpret_cast<sockaddr_in6*>(&storage)) != 0) {
    return "metrics_addr is not an IP address";
  }
  listener_ = static_cast<uv_tcp_t*>(std::malloc(sizeof(uv_tcp_t)));
  uv_tcp_init(worker_.loop(), listener_);
  listener_->data = this;
  int rc = uv_tcp_bind(listener_, reinterpret_cast<sockaddr*>(&storage), 0);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(listener_), 128, on_connection);
  if (rc != 0) {
    close();
    return uv_strerror(rc);
  }
  return {};
}

void MetricsServer::close() {
  if (listener_ != nullptr) {
    uv_close(reinterpret_cast<uv_handle_t*>(listener_), [](uv_handle_t* h) { std::free(h); });
    listener_ = nullptr;
  }
  // close_connection erases from the set: iterate over a copy.
  std::set<Connection*> open = connections_;
  for (Connection* c : open) close_connection(*c);
}

void MetricsServer::on_connection(uv_stream_t* listener, int status) {
  auto* self = static_cast<MetricsServer*>(listener->data);
  if (status < 0) return;
  self->accept();
}

void MetricsServer::accept() {
  auto* conn = new Connection();
  conn->server = this;
  uv_tcp_init(worker_.loop(), &conn->tcp);
  uv_timer_init(worker_.loop(), &conn->timer);
  conn->tcp.data = conn->timer.data = conn;
  conn->open_handles = 2;
  connections_.insert(conn);
  if (uv_accept(reinterpret_cast<uv_stream_t*>(listener_),
                reinterpret_cast<uv_stream_t*>(&conn->tcp)) != 0 ||
      connections_.size() > kMaxConnections) {
    close_connection(*conn);
    return;
  }
  uv_timer_start(
      &conn->timer,
      [](uv_timer_t* t) {
        auto* c = static_cast<Connection*>(t->data);
        c->server->close_connection(*c);
      },
      kIdleTimeoutMs, 0);
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&conn->tcp),
      [](uv_handle_t* h, size_t, uv_buf_t* buf) {
        auto* c = static_cast<Connection*>(h->data);
        // Reads go straight into the request string's spare room.
        const size_t used = c->request.size();
        c->request.resize(used + 2048);
        *buf = uv_buf_init(c->request.data() + used, 2048);
      },
      [](uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
        auto* c = static_cast<Connection*>(s->data);
        if (nread < 0 || buf->base == nullptr) {
          if (nread < 0) c->server->close_connection(*c);
          return;
        }
        // on_alloc grew the string by 2048 at buf->base: keep what was read.
        const size_t used = static_cast<size_t>(buf->base - c->request.data());
        c->request.resize(used + static_cast<size_t>(nread));
        if (c->request.find("\r\n\r\n") != std::string::npos ||
            c->request.find("\n\n") != std::string::npos) {
          c->server->respond(*c);
        } else if (c->request.size() > kMaxRequestBytes) {
          c->server->close_connection(*c);
        }
      });
}

std::string MetricsServer::render() {
  WorldPause pause = worker_.pause_world();  // every worker's pools and clients
  std::vector<PoolMetrics> pools;
  for (PoolRow& row : collect_pool_rows(worker_)) {
    PoolMetrics m{row, {}, {}, {}, {}};
    for (Pool* share : row.shares) {
      const PoolStats& s = share->stats();
      m.totals += s.totals;
      m.xact_time += s.xact_time;
      m.query_time += s.query_time;
      m.wait_time += s.wait_time;
    }
    pools.push_back(std::move(m));
  }
  ProcessMetrics process;
  worker_.for_each_client([&](Client& c) {
    ++process.clients;
    process.client_buffer_bytes += c.channel().buffer_bytes();
    if (c.state() == Client::State::startup || c.state() == Client::State::auth) {
      ++process.login_clients;
    }
  });
  worker_.for_each_pool([&](Pool& p) {
    p.for_each_server(
        [&](Server& s) { process.server_buffer_bytes += s.channel().buffer_bytes(); });
  });
  const Refusals& refused = worker_.refusals();
  const std::pair<const char*, const std::atomic<uint64_t>*> refusal_counts[] = {
      {"oversized_login_message", &refused.oversized_login_messages},
      {"oversized_message", &refused.oversized_messages},
      {"malformed_client_auth", &refused.malformed_client_auth},
      {"server_login", &refused.server_logins},
  };
  for (const auto& [reason, count] : refusal_counts) {
    process.refusals.emplace_back(reason, count->load(std::memory_order_relaxed));
  }
  process.uptime_seconds = (worker_.now_ms() - worker_.started_ms()) / 1000;
  process.paused = control_.mode() != AdminControl::Mode::active;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, uint64_t> findings;
  for (const FindingRow& row : worker_.findings().rows()) {
    findings[{row.kind, row.action, row.database, row.user}] += row.count;
  }
  for (const auto& [key, count] : findings) {
    const auto& [kind, action, database, user] = key;
    process.findings.push_back({kind, action, database, user, count});
  }
  process.findings_dropped = worker_.findings().dropped();
  std::string body;
  body.reserve(16 * 1024);
  write_prometheus(body, pools, process);
  write_exporter_metrics(body, exporter_sources());
  return body;
}

ExporterSources MetricsServer::exporter_sources() {
  auto show = [this](const char* subject) {
    return admin_show(worker_, control_, subject).value_or(AdminResult());
  };
  return {.databases = show("DATABASES"),
          .stats = show("STATS"),
          .stats_totals = show("STATS_TOTALS"),
          .pools = show("POOLS"),
          .lists = show("LISTS"),
          .config = show("CONFIG"),
          .version = show("VERSION"),
          .clients = show("CLIENTS")};
}

void MetricsServer::respond(Connection& conn) {
  if (conn.responded) return;
  conn.responded = true;
  uv_read_stop(reinterpret_cast<uv_stream_t*>(&conn.tcp));
  uv_timer_stop(&conn.timer);
  const std::string_view req = conn.request;
  const std::string_view line = req.substr(0, req.find_first_of("\r\n"));
  std::string status = "200 OK";
  std::string type = "text/plain; version=0.0.4; charset=utf-8";
  std::string body;
  if (!line.starts_with("GET ") && !line.starts_with("HEAD ")) {
    status = "405 Method Not Allowed";
    type = "text/plain";
    body = "only GET\n";
  } else {
    std::string_view target = line.substr(line.find(' ') + 1);
    target = target.substr(0, target.find(' '));
    target = target.substr(0, target.find('?'));
    if (target == "/metrics") {
      body = render();
      ++scrapes_;
    } else {
      status = "404 Not Found";
      type = "text/plain";
      body = "not found: try /metrics\n";
    }
  }
  const bool head = line.starts_with("HEAD ");
  conn.response = fmt::format(
      "HTTP/1.0 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", status,
      type, body.size());
  if (!head) conn.response += body;
  uv_buf_t buf = uv_buf_init(conn.response.data(), static_cast<unsigned>(conn.response.size()));
  conn.write_req.data = &conn;
  int rc = uv_write(&conn.write_req, reinterpret_cast<uv_stream_t*>(&conn.tcp), &buf, 1,
                    [](uv_write_t* req, int) {
                      auto* c = static_cast<Connection*>(req->data);
                      c->server->close_connection(*c);
                    });
  if (rc != 0) close_connection(conn);
}

void MetricsServer::close_connection(Connection& conn) {
  if (conn.closing) return;
  conn.closing = true;
  connections_.erase(&conn);
  auto on_closed = [](uv_handle_t* h) {
    auto* c = static_cast<Connection*>(h->data);
    if (--c->open_handles == 0) delete c;
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&conn.timer), on_closed);
  // A write in flight is cancelled by the close and its callback runs first (status
  // UV_ECANCELED), finding the connection closing.
  uv_close(reinterpret_cast<uv_handle_t*>(&conn.tcp), on_closed);
}

}  // namespace pgsluice
