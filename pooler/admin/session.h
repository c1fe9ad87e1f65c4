// One admin console connection (database "pgsluice" or "pgbouncer"): after the usual
// authentication, it checks admin_users / stats_users, greets the client as a server would, and
// answers its messages itself: simple Query, and the extended protocol (Parse, Bind, Describe,
// Execute, Sync, Close, Flush) with the same command texts, so that drivers work too.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "pgsluice/protocol/frame.h"
#include "pooler/admin/parser.h"
#include "pooler/admin/result.h"
#include "pooler/core/extensions.h"

namespace pgsluice {

class Client;
class Console;
class Worker;

enum class AdminRole { admin, stats };

// The console's server_version: PgBouncer's form, "<version>/bouncer", with the PgBouncer release
// whose console this one follows, then pgsluice's own name and version (session.cc says why).
inline constexpr const char* kConsoleServerVersion =
    "1.25.2/bouncer (pgsluice " PGSLUICE_VERSION ")";

class AdminSession final : public ConsoleSession {
 public:
  // Checks the user's role and greets the client; on "not allowed" the client is failed and
  // null is returned.
  static std::unique_ptr<AdminSession> start(Console& console, Worker& worker, Client& client);
  AdminSession(Console& console, Worker& worker, Client& client, AdminRole role);
  AdminSession(const AdminSession&) = delete;
  AdminSession& operator=(const AdminSession&) = delete;
  ~AdminSession() override;

  // New bytes from the client.
  void on_input() override;
  // A command that was pending (PAUSE, WAIT_CLOSE, …) is done: its CommandComplete goes out
  // and the client's next messages are processed.
  void complete(const std::string& tag);

  [[nodiscard]] AdminRole role() const { return role_; }
  [[nodiscard]] Client& client() { return client_; }
  [[nodiscard]] Console& console() { return console_; }

 private:
  enum class Protocol { simple, extended };
  struct Portal {
    std::string sql;
    std::optional<AdminResult> described;  // a SHOW run at Describe, returned at Execute
  };

  bool handle_message(const protocol::Message& message);
  // The extended protocol's messages; false when the client was closed.
  bool on_parse(const protocol::Message& message);
  bool on_bind(const protocol::Message& message);
  bool on_describe(const protocol::Message& message);
  bool on_execute(const protocol::Message& message);
  bool on_close(const protocol::Message& message);
  AdminResult run(const std::string& sql);
  void finish(const AdminResult& result, Protocol protocol);
  void extended_error(const std::string& sqlstate, const std::string& message);
  [[nodiscard]] static bool is_show(const std::string& sql);

  Console& console_;
  Worker& worker_;
  Client& client_;
  AdminRole role_;
  bool pending_ = false;
  Protocol pending_protocol_ = Protocol::simple;
  bool skip_to_sync_ = false;  // an extended-protocol error: ignore messages until Sync
  bool counted_ = false;       // in the console's SHOW STATS row (its first message came)
  std::map<std::string, std::string> statements_;
  std::map<std::string, Portal> portals_;
};

}  // namespace pgsluice
