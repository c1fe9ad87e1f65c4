// The admin console's command table; see admin_commands.h.
#include "pooler/admin/commands.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <functional>
#include <map>

#include "pgsluice/protocol/writer.h"
#include "pooler/admin/console.h"
#include "pooler/admin/control.h"
#include "pooler/admin/session.h"
#include "pooler/admin/show.h"
#include "pooler/core/takeover.h"
#include "pooler/core/worker.h"
#include "pooler/ops/shutdown.h"

namespace pgsluice {

namespace {

AdminResult done(std::string tag) {
  AdminResult r;
  r.set_tag(std::move(tag));
  return r;
}

AdminResult from_error(const std::string& error, const std::string& tag) {
  if (error.empty()) return done(tag);
  const bool unknown = error.starts_with("no such") || error.starts_with("client not found");
  return AdminResult::failure(unknown ? kAdminUnknownObject : kAdminInvalidState, error);
}

// Settings drivers SET on connect: accepted and ignored, as PgBouncer does.
bool is_fake_setting(const std::string& key) {
  return key == "client_encoding" || key == "default_transaction_isolation" ||
         key == "standard_conforming_strings" || key == "datestyle" || key == "timezone" ||
         key == "extra_float_digits" || key == "application_name";
}

using Handler = std::function<AdminResult(Worker&, AdminSession&, const AdminCommand&)>;

struct CommandSpec {
  bool needs_arg;   // a database / client id is required
  bool allows_arg;  // an argument may be given
  Handler handler;
};

AdminResult pause_command(Worker&, AdminSession& s, const AdminCommand& c) {
  std::string err = s.console().control().pause(c.arg);
  if (!err.empty()) return from_error(err, "PAUSE");
  // PAUSE answers when the paused pools' servers are all released (and closed).
  if (s.console().control().settled(AdminControl::WaitKind::pause, c.arg)) return done("PAUSE");
  s.console().control().wait(s, AdminControl::WaitKind::pause, c.arg, "PAUSE");
  return AdminResult::pending();
}

AdminResult suspend_command(Worker&, AdminSession& s, const AdminCommand&) {
  std::string err = s.console().control().suspend();
  if (!err.empty()) return from_error(err, "SUSPEND");
  if (s.console().control().settled(AdminControl::WaitKind::pause, "")) return done("SUSPEND");
  s.console().control().wait(s, AdminControl::WaitKind::pause, "", "SUSPEND");
  return AdminResult::pending();
}

AdminResult wait_close_command(Worker&, AdminSession& s, const AdminCommand& c) {
  if (!c.arg.empty() && !s.console().control().known_database(c.arg)) {
    return AdminResult::failure(kAdminUnknownObject, "no such database: " + c.arg);
  }
  if (s.console().control().settled(AdminControl::WaitKind::wait_close, c.arg)) {
    return done("WAIT_CLOSE");
  }
  s.console().control().wait(s, AdminControl::WaitKind::wait_close, c.arg, "WAIT_CLOSE");
  return AdminResult::pending();
}

AdminResult shutdown_command(Worker& w, AdminSession& s, const AdminCommand& c) {
  if (c.arg == "WAIT_FOR_CLIENTS") {
    s.console().control().shutdown_when_clients_gone();
    return done("SHUTDOWN");
  }
  if (c.arg == "WAIT_FOR_SERVERS") {
    s.console().shutdown().wait_for_servers();  // the same path as SIGINT (shutdown.h)
    return done("SHUTDOWN");
  }
  if (!c.arg.empty()) {
    return AdminResult::failure(kAdminSyntaxError, "SHUTDOWN: unknown mode '" + c.arg + "'");
  }
  // The console's own connection closes with everything else (as with PgBouncer); every
  // worker stops (the world is stopped while a console command runs).
  w.group().stop_all();
  return done("SHUTDOWN");
}

const std::map<std::string, CommandSpec>& commands() {
  static const std::map<std::string, CommandSpec> table = {
      {"PAUSE", {false, true, pause_command}},
      {"SUSPEND", {false, false, suspend_command}},
      {"RESUME",
       {false, true,
        [](Worker&, AdminSession& s, const AdminCommand& c) {
          return from_error(s.console().control().resume(c.arg), "RESUME");
        }}},
      {"DISABLE",
       {true, true,
        [](Worker&, AdminSession& s, const AdminCommand& c) {
          return from_error(s.console().control().disable(c.arg), "DISABLE");
        }}},
      {"ENABLE",
       {true, true,
        [](Worker&, AdminSession& s, const AdminCommand& c) {
          return from_error(s.console().control().enable(c.arg), "ENABLE");
        }}},
      {"RECONNECT",
       {false, true,
        [](Worker&, AdminSession& s, const AdminCommand& c) {
          return from_error(s.console().control().reconnect(c.arg), "RECONNECT");
        }}},
      {"KILL",
       {false, true,
        [](Worker&, AdminSession& s, const AdminCommand& c) {
          return from_error(s.console().control().kill(c.arg), "KILL");
        }}},
      {"KILL_CLIENT",
       {true, true,
        [](Worker&, AdminSession& s, const AdminCommand& c) {
          uint64_t id = 0;
          auto [ptr, ec] = std::from_chars(c.arg.data(), c.arg.data() + c.arg.size(), id);
          if (ec != std::errc{} || ptr != c.arg.data() + c.arg.size()) {
            return AdminResult::failure(
                kAdminSyntaxError,
                "invalid client pointer supplied: KILL_CLIENT takes a client id, not '" + c.arg +
                    "'");
          }
          return from_error(s.console().control().kill_client(id), "KILL_CLIENT");
        }}},
      {"WAIT_CLOSE", {false, true, wait_close_command}},
      {"RELOAD",
       {false, false,
        [](Worker& w, AdminSession&, const AdminCommand&) {
          std::string err = w.reload();
          if (!err.empty()) {
            // PgBouncer's words first (scripts match them), then what was wrong.
            return AdminResult::failure(kAdminConfigError,
                                        "RELOAD failed, see logs for additional details; the "
                                        "old configuration stays: " +
                                            err);
          }
          return done("RELOAD");
        }}},
      {"SHUTDOWN", {false, true, shutdown_command}},
  };
  return table;
}

// Online restart (core/takeover.h): only the pooler's own OS user over the Unix socket (the
// `pgbouncer` login client_login.cc admits), as in PgBouncer; the descriptors go with the rows.
AdminResult show_fds(Worker& worker, AdminSession& session) {
  Client& client = session.client();
  if (!client.is_own_user()) {
    return AdminResult::failure(kAdminInsufficientPrivilege,
                                "SHOW FDS: only the pooler's own OS user over the Unix socket");
  }
  // It gives the sockets away and stops this process listening: a psql that ran it by mistake
  // would take the listeners with it. Only a new process's takeover names itself so.
  const std::string* app = client.tracked_parameters().get("application_name");
  if (app == nullptr || *app != kTakeoverApplicationName) {
    return AdminResult::failure(kAdminInvalidState,
                                "SHOW FDS hands this process's sockets over: only pgsluice -R "
                                "runs it (docs/operations.md, \"Online restart\")");
  }
  uv_os_fd_t fd = -1;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(client.channel().stream()), &fd) != 0 ||
      !client.channel().output().empty()) {
    return AdminResult::failure(kAdminInvalidState, "SHOW FDS: the console socket is busy");
  }
  std::string err = worker.group().primary().hand_over_sockets(fd);
  if (!err.empty()) {
    // Rows may have gone before: the new process stops at the error and starts as without -R.
    spdlog::error("{}", err);
    return AdminResult::failure(kAdminInvalidState, err);
  }
  // The end of the reply goes now, as its rows did: with no client left the shutdown below ends
  // at once, and its end fails the console sessions, this one too. The session answers nothing
  // more; the new process closes the connection.
  std::string end;
  protocol::write_command_complete(end, "SHOW");
  protocol::write_ready_for_query(end, protocol::TransactionStatus::idle);
  if (!send_all(fd, end)) spdlog::warn("SHOW FDS: the console connection failed at its end");
  // The clients that could not move (in a transaction, holding a session server) finish here.
  AdminControl& control = session.console().control();
  if (!worker.group().primary().post([&control] { control.shutdown_when_clients_gone(); })) {
    control.shutdown_when_clients_gone();
  }
  return AdminResult::pending();
}

AdminResult run_set(Worker& worker, AdminSession& session, const AdminCommand& cmd) {
  if (is_fake_setting(cmd.set_key)) {
    AdminResult r;
    r.notice("SET ignored");
    r.set_tag("SET");
    return r;
  }
  if (session.role() != AdminRole::admin) {
    return AdminResult::failure(kAdminInsufficientPrivilege, "admin access needed");
  }
  std::string notice;
  std::string err = worker.set_setting(cmd.set_key, cmd.set_value, notice);
  // PgBouncer's SET failure is an ordinary console error (08P01); only RELOAD's is F0000.
  if (!err.empty()) return AdminResult::failure(kAdminInvalidState, err);
  AdminResult r = done("SET");
  if (!notice.empty()) r.notice(notice);
  return r;
}

}  // namespace

AdminResult execute_admin_command(Worker& worker, AdminSession& session,
                                  const AdminCommand& command, const std::string& sql) {
  auto invalid = [&] {
    return AdminResult::failure(kAdminSyntaxError, "invalid command '" + sql + "', use SHOW HELP;");
  };
  if (command.verb == "SHOW") {
    if (!command.has_arg) return invalid();
    if (command.arg == "FDS") return show_fds(worker, session);
    std::optional<AdminResult> r = admin_show(worker, session.console().control(), command.arg);
    return r ? std::move(*r) : invalid();
  }
  if (command.verb == "SET") return run_set(worker, session, command);
  auto it = commands().find(command.verb);
  if (it == commands().end()) return invalid();
  const CommandSpec& spec = it->second;
  if ((spec.needs_arg && !command.has_arg) || (!spec.allows_arg && command.has_arg)) {
    return invalid();
  }
  if (session.role() != AdminRole::admin) {
    return AdminResult::failure(kAdminInsufficientPrivilege, "admin access needed");
  }
  return spec.handler(worker, session, command);
}

}  // namespace pgsluice
