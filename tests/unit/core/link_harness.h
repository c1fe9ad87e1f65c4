// An in-process link of the core, for tests that read like a protocol trace: one Worker of a
// WorkerGroup with the core's NoExtensions (core/extensions.h), listening on nothing. Its
// clients are socketpair ends handed to Worker::adopt_client, whose other end the test plays;
// its servers connect to a Unix socket in a temporary directory, where the test plays
// PostgreSQL. The test drives the worker's loop itself, one UV_RUN_NOWAIT turn at a time
// (pump_until): no thread, no sleep, no PostgreSQL, and a step that does not happen fails the
// test after a bounded number of turns instead of hanging it.
//
// Why real sockets rather than a fake Channel: Channel owns its descriptor and sends through
// send()/recv() on a uv_poll_t (net/channel.h). A socketpair costs the test nothing and keeps
// the forwarding path exactly as it runs in production; what crosses it is still asserted byte
// for byte.
#pragma once

#include <spdlog/spdlog.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pooler/auth/sources.h"
#include "pooler/config/config.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"
#include "pooler/core/worker_group.h"

namespace pgsluice::test_support {

// The test's end of one connection: a client's socket, or PostgreSQL's side of a server's.
// Reads never block: what arrived is collected by LinkHarness::turn().
class TestEnd {
 public:
  explicit TestEnd(int fd);
  TestEnd(const TestEnd&) = delete;
  TestEnd& operator=(const TestEnd&) = delete;
  ~TestEnd();

  // Writes all of `bytes` (the tests' messages are far below a socket buffer).
  void send(std::string_view bytes);
  // Appends what the socket has to received(); notes an end of file.
  void read_available();
  // What arrived and was not taken yet; take() returns it and forgets it.
  [[nodiscard]] const std::string& received() const { return received_; }
  std::string take();
  // The pooler closed its end (end of file read).
  [[nodiscard]] bool peer_closed() const { return peer_closed_; }
  void close();

 private:
  int fd_;
  std::string received_;
  bool peer_closed_ = false;
};

class LinkHarness {
 public:
  // `settings`: extra `key = value` lines for the [pgsluice] section.
  explicit LinkHarness(std::string_view settings = "");
  LinkHarness(const LinkHarness&) = delete;
  LinkHarness& operator=(const LinkHarness&) = delete;
  ~LinkHarness();

  Worker& worker() { return group_->primary(); }
  // One loop turn (its I/O callbacks, then the turn's batched sends), then every test end reads
  // what arrived and the fake PostgreSQL accepts what connected.
  void turn();
  // Turns until `done()` holds; false, with a test failure naming `what`, when it did not
  // within kMaxTurns.
  [[nodiscard]] bool pump_until(const std::function<bool()>& done, std::string_view what);
  // Turns until `end` holds at least `bytes` bytes not yet taken.
  [[nodiscard]] bool pump_until_received(const TestEnd& end, size_t bytes, std::string_view what);
  // Writes `bytes` to `end` one byte per loop turn: the pooler reads every split of them.
  void send_byte_by_byte(TestEnd& end, std::string_view bytes);

  // A client connection adopted by the worker (over a socketpair); the test's end.
  TestEnd& connect_client();
  // connect_client, then StartupMessage (user alice, database app) and the greeting up to
  // ReadyForQuery 'I'. The pool's first client makes it log in a server: `answer_server_login`
  // plays PostgreSQL's side of it. Returns null (with a test failure) when the login stalls.
  // `startup_packet`, when given, is sent instead of that StartupMessage.
  TestEnd* log_in_client(bool answer_server_login, const std::string& startup_packet = {});
  // PostgreSQL's end of the next server connection the pooler made (null, with a test
  // failure: none within kMaxTurns).
  TestEnd* accept_server();
  // accept_server, then PostgreSQL's side of the login: the pooler's StartupMessage is checked
  // byte for byte and answered with AuthenticationOk, a ParameterStatus per kServerParameters,
  // BackendKeyData (kBackendPid) and ReadyForQuery 'I'.
  TestEnd* accept_and_log_in_server();
  // PostgreSQL's end of the `index`-th server connection accepted.
  TestEnd& pg(size_t index = 0) { return *servers_.at(index); }
  // Server connections the fake PostgreSQL took that no accept_server() has handed out yet.
  [[nodiscard]] size_t connections_waiting() const { return arrived_servers_.size(); }

  // The pool of the database `app` and user alice (the only one the tests make).
  Pool& pool();
  // The pool's only server (a test failure when there is not exactly one).
  Server* only_server();

  // The parameters the fake PostgreSQL reports at login. Sorted as the pooler's ParameterSet
  // keeps them (case-insensitively): a client's greeting lists them in this order.
  static const std::vector<std::pair<std::string, std::string>> kServerParameters;
  static constexpr int32_t kBackendPid = 4242;
  static constexpr int kMaxTurns = 200;

 private:
  void accept_waiting_servers();

  spdlog::level::level_enum log_level_before_;
  std::string socket_dir_;
  int listen_fd_ = -1;
  std::unique_ptr<WorkerGroup> group_;
  std::vector<std::unique_ptr<TestEnd>> clients_;
  std::vector<std::unique_ptr<TestEnd>> servers_;
  std::vector<std::unique_ptr<TestEnd>> arrived_servers_;
};

}  // namespace pgsluice::test_support
