// The admin console protocol; see admin_session.h.
#include "pooler/admin/session.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/admin/commands.h"
#include "pooler/admin/console.h"
#include "pooler/base/secure_random.h"
#include "pooler/base/sqlstate.h"
#include "pooler/core/client.h"
#include "pooler/core/login_notice.h"
#include "pooler/core/worker.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace fe = pgsluice::protocol::frontend;

namespace {
bool listed(const std::vector<std::string>& users, const std::string& user) {
  return std::find(users.begin(), users.end(), user) != users.end();
}
}  // namespace

std::unique_ptr<AdminSession> AdminSession::start(Console& console, Worker& worker,
                                                  Client& client) {
  const Settings& s = worker.settings();
  AdminRole role = AdminRole::stats;
  if (client.is_own_user() || listed(s.admin_users, client.user())) {
    role = AdminRole::admin;
  } else if (!listed(s.stats_users, client.user())) {
    // PgBouncer's answer, after a successful authentication, to a user in neither list. Its
    // SQLSTATE is 08P01 for everything; 28000 says what this is.
    client.fail(sqlstate::kInvalidAuthorizationSpecification, "not allowed");
    return nullptr;
  }
  auto session = std::make_unique<AdminSession>(console, worker, client, role);
  std::string& out = client.channel().output();
  pp::write_authentication_ok(out);
  // PgBouncer's console greeting (its admin_setup()), in its order and with its values, then the
  // client's own startup values of the parameters PgBouncer tracks, as its welcome_client() adds
  // them: what tools that read the console were written against. server_version keeps
  // PgBouncer's form: libpq reads the leading numbers as PQserverVersion (12502, as for
  // PgBouncer 1.25.2, the console this one follows) and DBD::Pg, which refuses a server below 8.0,
  // lets one through whose version string contains "bouncer" (Munin's plugins and any Perl DBI
  // tool); pgsluice's own name and version follow in parentheses. is_superuser is "on" for
  // every console user, as in PgBouncer (a stats user still runs only SHOW).
  pp::write_parameter_status(out, "server_version", kConsoleServerVersion);
  pp::write_parameter_status(out, "client_encoding", "UTF8");
  pp::write_parameter_status(out, "server_encoding", "UTF8");
  pp::write_parameter_status(out, "DateStyle", "ISO");
  pp::write_parameter_status(out, "TimeZone", "GMT");
  pp::write_parameter_status(out, "standard_conforming_strings", "on");
  pp::write_parameter_status(out, "is_superuser", "on");
  for (const char* name : {"client_encoding", "DateStyle", "TimeZone",
                           "standard_conforming_strings", "application_name"}) {
    if (const std::string* value = client.tracked_parameters().get(name)) {
      pp::write_parameter_status(out, name, *value);
    }
  }
  // A key that matches no client: a CancelRequest for the console is ignored.
  uint32_t pid = 0;
  std::string key(4, '\0');
  // Unchecked: a failed draw leaves zeros, and this key cancels nothing anyway.
  (void)secure_random(&pid, sizeof(pid));
  (void)secure_random(key.data(), key.size());
  pp::write_backend_key_data(out, static_cast<int32_t>(pid & 0x7fffffff), key);
  // PgBouncer greets its console as any client, the login_notify_message included.
  write_login_notice(out, s.login_notify_message);
  pp::write_ready_for_query(out, pp::TransactionStatus::idle);
  client.channel().flush();
  if (s.log_connections) {
    spdlog::info("{} admin console login ok ({})", client.log_id(),
                 role == AdminRole::admin ? "admin" : "stats");
  }
  client.channel().start_reading();
  return session;
}

AdminSession::AdminSession(Console& console, Worker& worker, Client& client, AdminRole role)
    : console_(console), worker_(worker), client_(client), role_(role) {
  console_.control().console_opened();
}

AdminSession::~AdminSession() {
  console_.control().forget(*this);
  console_.control().console_closed();
}

bool AdminSession::is_show(const std::string& sql) {
  AdminParseResult parsed = parse_admin_command(sql);
  return parsed.command && parsed.command->verb == "SHOW";
}

AdminResult AdminSession::run(const std::string& sql) {
  AdminParseResult parsed = parse_admin_command(sql);
  if (parsed.empty) {
    AdminResult r;
    return r;  // EmptyQueryResponse is written by the caller
  }
  if (!parsed.command) {
    return AdminResult::failure(sqlstate::kSyntaxError,
                                "invalid command '" + sql + "', use SHOW HELP;");
  }
  // Every worker's clients, servers and pools are this command's to read and change.
  WorldPause pause = worker_.pause_world();
  return execute_admin_command(worker_, *this, *parsed.command, sql);
}

void AdminSession::on_input() {
  pp::FrameReader& in = client_.channel().input();
  while (!pending_ && client_.state() != Client::State::closing) {
    pp::FrameResult frame = in.next();
    if (frame.status == pp::FrameStatus::need_more) break;
    if (frame.status == pp::FrameStatus::error) {
      client_.fail(sqlstate::kProtocolViolation,
                   fmt::format("invalid message: {}", pp::to_string(frame.error)));
      return;
    }
    if (!handle_message(frame.message)) return;
  }
  client_.channel().flush();
  // A pending command holds the client's later messages where they are, as a server would.
  if (pending_) client_.channel().stop_reading();
}

void AdminSession::finish(const AdminResult& result, Protocol protocol) {
  std::string& out = client_.channel().output();
  if (result.is_pending()) {
    pending_ = true;
    pending_protocol_ = protocol;
    return;
  }
  if (protocol == Protocol::simple) {
    result.write_simple(out);
    pp::write_ready_for_query(out, pp::TransactionStatus::idle);
  } else {
    result.write_execute(out);
    if (result.error()) skip_to_sync_ = true;
  }
}

void AdminSession::complete(const std::string& tag) {
  if (!pending_ || client_.state() == Client::State::closing) return;
  pending_ = false;
  std::string& out = client_.channel().output();
  pp::write_command_complete(out, tag);
  if (pending_protocol_ == Protocol::simple)
    pp::write_ready_for_query(out, pp::TransactionStatus::idle);
  client_.channel().flush();
  client_.channel().start_reading();
  on_input();
}

void AdminSession::extended_error(const std::string& sqlstate, const std::string& message) {
  AdminResult::failure(sqlstate, message).write_error(client_.channel().output());
  skip_to_sync_ = true;
}

bool AdminSession::handle_message(const pp::Message& message) {
  std::string& out = client_.channel().output();
  const char type = message.type;
  if (type == fe::kTerminate) {
    client_.close("client sent Terminate");
    return false;
  }
  // disable_pqexec holds for the console too, as in PgBouncer (psql cannot use it then).
  if (client_.refused_simple_query(type)) return false;
  if (!counted_) {
    // PgBouncer 1.25 starts a query and a transaction of its admin database at a session's
    // first message, and no server ever ends them: one of each per session that sent anything.
    counted_ = true;
    console_.control().count_console_session();
  }
  if (type == fe::kQuery) {
    auto q = pp::parse_query(message.body);
    if (!q) {
      client_.fail(sqlstate::kProtocolViolation, "malformed Query message");
      return false;
    }
    std::string sql(q.value.sql);
    AdminResult result = run(sql);
    if (!result.error() && !result.is_pending() && result.tag().empty() && !result.has_rows()) {
      pp::write_empty_query_response(out);
      pp::write_ready_for_query(out, pp::TransactionStatus::idle);
      return true;
    }
    finish(result, Protocol::simple);
    return true;
  }
  if (type == fe::kSync) {
    skip_to_sync_ = false;
    portals_.erase("");
    pp::write_ready_for_query(out, pp::TransactionStatus::idle);
    return true;
  }
  if (type == fe::kFlush) {
    client_.channel().flush();
    return true;
  }
  if (skip_to_sync_) return true;
  switch (type) {
    case fe::kParse:
      return on_parse(message);
    case fe::kBind:
      return on_bind(message);
    case fe::kDescribe:
      return on_describe(message);
    case fe::kExecute:
      return on_execute(message);
    case fe::kClose:
      return on_close(message);
    default:
      client_.fail(sqlstate::kProtocolViolation,
                   fmt::format("unsupported message type '{}' on the admin console", type));
      return false;
  }
}

bool AdminSession::on_parse(const pp::Message& message) {
  std::string& out = client_.channel().output();
  auto p = pp::parse_parse(message.body);
  if (!p) {
    extended_error(sqlstate::kProtocolViolation, "malformed Parse message");
    return true;
  }
  statements_[std::string(p.value.statement)] = std::string(p.value.query);
  pp::write_parse_complete(out);
  return true;
}

bool AdminSession::on_bind(const pp::Message& message) {
  std::string& out = client_.channel().output();
  auto b = pp::parse_bind(message.body);
  if (!b) {
    extended_error(sqlstate::kProtocolViolation, "malformed Bind message");
    return true;
  }
  auto it = statements_.find(std::string(b.value.statement));
  if (it == statements_.end()) {
    extended_error(sqlstate::kInvalidSqlStatementName,
                   fmt::format("prepared statement \"{}\" does not exist", b.value.statement));
    return true;
  }
  if (!b.value.parameters.empty()) {
    extended_error(sqlstate::kSyntaxError, "admin console commands take no parameters");
    return true;
  }
  portals_[std::string(b.value.portal)] = Portal{it->second, std::nullopt};
  pp::write_bind_complete(out);
  return true;
}

bool AdminSession::on_describe(const pp::Message& message) {
  std::string& out = client_.channel().output();
  auto d = pp::parse_describe(message.body);
  if (!d) {
    extended_error(sqlstate::kProtocolViolation, "malformed Describe message");
    return true;
  }
  std::string sql;
  Portal* portal = nullptr;
  if (d.value.target() == pp::DescribeTarget::statement) {
    auto it = statements_.find(std::string(d.value.name));
    if (it == statements_.end()) {
      extended_error(sqlstate::kInvalidSqlStatementName,
                     fmt::format("prepared statement \"{}\" does not exist", d.value.name));
      return true;
    }
    sql = it->second;
    pp::MessageWriter(out, pp::backend::kParameterDescription).i16(0);  // no parameters
  } else {
    auto it = portals_.find(std::string(d.value.name));
    if (it == portals_.end()) {
      extended_error(sqlstate::kInvalidCursorName,
                     fmt::format("portal \"{}\" does not exist", d.value.name));
      return true;
    }
    portal = &it->second;
    sql = portal->sql;
  }
  // Only SHOW has columns, and running it twice is harmless; a command that acts (PAUSE,
  // KILL…) must run once, at Execute, so it is described as returning no rows.
  if (!is_show(sql)) {
    pp::write_no_data(out);
    return true;
  }
  AdminResult result = run(sql);
  if (result.error()) {
    pp::write_no_data(out);
    return true;
  }
  result.write_row_description(out);
  if (portal != nullptr) portal->described = std::move(result);
  return true;
}

bool AdminSession::on_execute(const pp::Message& message) {
  std::string& out = client_.channel().output();
  auto e = pp::parse_execute(message.body);
  if (!e) {
    extended_error(sqlstate::kProtocolViolation, "malformed Execute message");
    return true;
  }
  auto it = portals_.find(std::string(e.value.portal));
  if (it == portals_.end()) {
    extended_error(sqlstate::kInvalidCursorName,
                   fmt::format("portal \"{}\" does not exist", e.value.portal));
    return true;
  }
  if (it->second.described) {
    AdminResult result = std::move(*it->second.described);
    it->second.described.reset();
    finish(result, Protocol::extended);
    return true;
  }
  AdminResult result = run(it->second.sql);
  if (!result.error() && !result.is_pending() && result.tag().empty() && !result.has_rows()) {
    pp::write_empty_query_response(out);
    return true;
  }
  finish(result, Protocol::extended);
  return true;
}

bool AdminSession::on_close(const pp::Message& message) {
  std::string& out = client_.channel().output();
  auto c = pp::parse_close(message.body);
  if (c) {
    if (c.value.target() == pp::DescribeTarget::statement) {
      statements_.erase(std::string(c.value.name));
    } else {
      portals_.erase(std::string(c.value.name));
    }
  }
  pp::write_close_complete(out);
  return true;
}

}  // namespace pgsluice
