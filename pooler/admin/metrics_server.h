// The /metrics endpoint: a minimal HTTP/1.0 responder on the worker's own libuv loop. It answers
// `GET /metrics` with the Prometheus text format (metrics_format.h, and pgbouncer_exporter's
// names: exporter_metrics.h), anything else with 404 (405
// for other methods), one request per connection, then closes.
//
// Why not libmicrohttpd (Debian has it): it polls in threads of its own, or must be driven by
// select()/MHD_run() from outside; either way the numbers would be read from another thread (a
// worker's pools are lock-free because only its loop touches them) or libuv would have to wrap
// MHD's descriptor set. A scrape is one small GET: ~150 lines on the loop read the pools directly,
// never block (every read and write is asynchronous), cap connections and time out idle ones.
#pragma once

#include <uv.h>

#include <cstdint>
#include <set>
#include <string>

#include "pooler/admin/exporter_metrics.h"

namespace pgsluice {

class AdminControl;
class Worker;

class MetricsServer {
 public:
  MetricsServer(Worker& worker, const AdminControl& control);
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer();

  // Returns an error message, empty when listening.
  std::string listen(const std::string& addr, int port);
  // Stops listening and closes open connections (at shutdown).
  void close();

  // The response body for GET /metrics (also used by tests).
  std::string render();

 private:
  struct Connection;
  static void on_connection(uv_stream_t* listener, int status);
  void accept();
  void respond(Connection& conn);
  void close_connection(Connection& conn);
  // The SHOW results pgbouncer_exporter would scrape (exporter_metrics.h); the world is stopped.
  ExporterSources exporter_sources();

  Worker& worker_;
  const AdminControl& control_;
  uv_tcp_t* listener_ = nullptr;  // malloc'd; freed in its close callback
  std::set<Connection*> connections_;
  uint64_t scrapes_ = 0;
};

}  // namespace pgsluice
