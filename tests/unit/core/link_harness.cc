// See link_harness.h.
#include "tests/unit/core/link_harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tests/unit/core/link_wire.h"

namespace pgsluice::test_support {

namespace {

constexpr int kServerPort = 5432;
// PostgreSQL 18's answer to a 3.2 StartupMessage carries a 32-byte cancel key.
constexpr std::string_view kBackendKey = "0123456789abcdef0123456789abcdef";
// A loop that does not settle within this many turns after the worker stopped leaked a handle.
constexpr int kMaxShutdownTurns = 1000;

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  ASSERT_EQ(fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0) << std::strerror(errno);
}

std::string config_text(const std::string& socket_dir, std::string_view settings) {
  // The database line's host is a directory: the pool's servers connect to
  // <dir>/.s.PGSQL.5432 (config/server_address.cc), where the fake PostgreSQL listens.
  return "[databases]\n"
         "app = host=" +
         socket_dir + " port=" + std::to_string(kServerPort) +
         " dbname=appdb\n"
         "[pgsluice]\n"
         // trust: the client's login needs no exchange (alice must still be a known user).
         "auth_type = trust\n"
         "pool_mode = transaction\n"
         "workers = 1\n"
         // The janitor's line of every close is noise in a test's output.
         "log_connections = 0\n"
         "log_disconnections = 0\n" +
         std::string(settings);
}

}  // namespace

// --- TestEnd ---

TestEnd::TestEnd(int fd) : fd_(fd) {
  set_nonblocking(fd_);
}

TestEnd::~TestEnd() {
  close();
}

void TestEnd::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TestEnd::send(std::string_view bytes) {
  ASSERT_GE(fd_, 0) << "send on a closed test end";
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << "send: " << std::strerror(errno);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void TestEnd::read_available() {
  if (fd_ < 0 || peer_closed_) return;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) {
      received_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      peer_closed_ = true;  // end of file, or a reset: the pooler's side is gone either way
    }
    return;
  }
}

std::string TestEnd::take() {
  std::string taken;
  taken.swap(received_);
  return taken;
}

// --- LinkHarness ---

const std::vector<std::pair<std::string, std::string>> LinkHarness::kServerParameters = {
    {"application_name", ""},
    {"client_encoding", "UTF8"},
    {"DateStyle", "ISO, MDY"},
    {"integer_datetimes", "on"},
    {"IntervalStyle", "postgres"},
    {"is_superuser", "off"},
    {"server_encoding", "UTF8"},
    {"server_version", "18.0"},
    {"session_authorization", "alice"},
    {"standard_conforming_strings", "on"},
    {"TimeZone", "UTC"},
};

LinkHarness::LinkHarness(std::string_view settings) : log_level_before_(spdlog::get_level()) {
  // The tests assert what crosses the sockets; the pooler's warnings (a session-state
  // finding, a client failed at shutdown) would only clutter their output.
  spdlog::set_level(spdlog::level::err);
  char dir[] = "/tmp/pgsluice-link-XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return;
  }
  socket_dir_ = dir;
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = socket_dir_ + "/.s.PGSQL." + std::to_string(kServerPort);
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 16) != 0) {
    ADD_FAILURE() << "fake PostgreSQL cannot listen on " << path << ": " << std::strerror(errno);
  }

  ConfigLoadResult loaded = load_config_string(config_text(socket_dir_, settings), "link.ini");
  for (const auto& e : loaded.errors) ADD_FAILURE() << e.to_string();
  if (loaded.config == nullptr) return;
  // alice has no password: under trust only her name must be known (client_login.cc).
  auto secrets = std::make_shared<AuthSecrets>();
  secrets->by_user["alice"] = "";
  // The group's extensions stay its NoExtensions: the core alone, every client admitted.
  group_ = std::make_unique<WorkerGroup>(loaded.config, secrets, /*workers=*/1);
}

LinkHarness::~LinkHarness() {
  // PostgreSQL and the clients hang up first: the worker's closing servers wait for their peer
  // to close (Channel::close_when_peer_closes), which these closes give them.
  for (auto& end : clients_) end->close();
  for (auto& end : servers_) end->close();
  for (auto& end : arrived_servers_) end->close();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (group_) {
    worker().stop();
    int turns = 0;
    while (uv_loop_alive(worker().loop()) != 0 && turns++ < kMaxShutdownTurns) {
      uv_run(worker().loop(), UV_RUN_NOWAIT);
    }
    EXPECT_EQ(uv_loop_alive(worker().loop()), 0) << "a handle stayed open after stop()";
    group_.reset();
  }
  if (!socket_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(socket_dir_, ignored);
  }
  spdlog::set_level(log_level_before_);
}

void LinkHarness::turn() {
  // One pass of the loop: its timers, the I/O callbacks of what is readable now, then the
  // worker's uv_check sends the turn's batched output (net/flush_batch.h), so that what the
  // pooler wrote in this turn is in the test's sockets when uv_run returns.
  uv_run(worker().loop(), UV_RUN_NOWAIT);
  accept_waiting_servers();
  for (auto& end : clients_) end->read_available();
  for (auto& end : servers_) end->read_available();
  for (auto& end : arrived_servers_) end->read_available();
}

bool LinkHarness::pump_until(const std::function<bool()>& done, std::string_view what) {
  for (int i = 0; i < kMaxTurns; ++i) {
    if (done()) return true;
    turn();
  }
  if (done()) return true;
  ADD_FAILURE() << what << ": not within " << kMaxTurns << " loop turns";
  return false;
}

bool LinkHarness::pump_until_received(const TestEnd& end, size_t bytes, std::string_view what) {
  return pump_until([&] { return end.received().size() >= bytes; }, what);
}

void LinkHarness::send_byte_by_byte(TestEnd& end, std::string_view bytes) {
  for (char c : bytes) {
    end.send(std::string_view(&c, 1));
    turn();
  }
}

void LinkHarness::accept_waiting_servers() {
  if (listen_fd_ < 0) return;
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: nobody else connected
    arrived_servers_.push_back(std::make_unique<TestEnd>(fd));
  }
}

TestEnd& LinkHarness::connect_client() {
  int fds[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    ADD_FAILURE() << "socketpair: " << std::strerror(errno);
  }
  // The worker's end as the primary hands over an accepted Unix-socket connection.
  worker().adopt_client(fds[0], /*tcp=*/false);
  clients_.push_back(std::make_unique<TestEnd>(fds[1]));
  return *clients_.back();
}

TestEnd* LinkHarness::accept_server() {
  if (!pump_until([&] { return !arrived_servers_.empty(); }, "a server connection")) {
    return nullptr;
  }
  servers_.push_back(std::move(arrived_servers_.front()));
  arrived_servers_.erase(arrived_servers_.begin());
  return servers_.back().get();
}

TestEnd* LinkHarness::accept_and_log_in_server() {
  TestEnd* pg = accept_server();
  if (pg == nullptr) return nullptr;
  // server_max_protocol_minor's default asks for protocol 3.2; the pool's user and the entry's
  // dbname, nothing else (the entry sets no client_encoding, DateStyle, …).
  const std::string expected = wire::startup("alice", "appdb", (3 << 16) | 2);
  if (!pump_until_received(*pg, expected.size(), "the server's StartupMessage")) return nullptr;
  EXPECT_EQ(wire::show_wire(pg->take(), /*startup=*/true),
            wire::show_wire(expected, /*startup=*/true));
  std::string login = wire::authentication_ok();
  for (const auto& [name, value] : kServerParameters) {
    login += wire::parameter_status(name, value);
  }
  protocol::write_backend_key_data(login, kBackendPid, kBackendKey);
  login += wire::ready('I');
  pg->send(login);
  return pg;
}

TestEnd* LinkHarness::log_in_client(bool answer_server_login, const std::string& startup_packet) {
  TestEnd& client = connect_client();
  client.send(startup_packet.empty() ? wire::startup("alice", "app") : startup_packet);
  if (answer_server_login && accept_and_log_in_server() == nullptr) return nullptr;
  const std::string ready = wire::ready('I');
  const bool greeted =
      pump_until([&] { return client.received().ends_with(ready); }, "the client's greeting");
  return greeted ? &client : nullptr;
}

Pool& LinkHarness::pool() {
  Pool* found = nullptr;
  worker().for_each_own_pool([&](Pool& p) { found = &p; });
  EXPECT_NE(found, nullptr) << "no pool yet";
  EXPECT_EQ(worker().pool_count(), 1u);
  return *found;
}

Server* LinkHarness::only_server() {
  std::vector<Server*> servers;
  pool().for_each_server([&](Server& s) { servers.push_back(&s); });
  EXPECT_EQ(servers.size(), 1u) << "the pool's servers";
  return servers.size() == 1 ? servers.front() : nullptr;
}

}  // namespace pgsluice::test_support
