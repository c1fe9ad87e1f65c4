// SQL PREPARE kept across servers: the statements, each server's set, the renaming of a Query
// and its replies; see sql_prepared.h.
#include "pooler/session_state/sql_prepared.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "pgsluice/protocol/backend.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
using Op = pp::PreparedNameUse::Op;

namespace {

std::atomic<uint64_t> g_next_id{0};
// Statements destroyed so far: a server whose count seen is older may hold dead ones.
std::atomic<uint64_t> g_deaths{0};

constexpr std::string_view kPrefix = "pgsluice_s";
// Where an EXECUTE or DEALLOCATE of a name the client never prepared goes when that name is
// spelled like one of the pooler's: it never exists, so the client gets PostgreSQL's 26000 (under
// its own name) instead of another client's statement.
constexpr std::string_view kNoSuchName = "pgsluice_none";

bool is_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

size_t chars_in(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return !is_continuation(c); }));
}

// The byte offset of the `index`-th character (from 0) of `text`, or its size.
size_t byte_of_char(std::string_view text, size_t index) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (is_continuation(text[i])) continue;
    if (seen == index) return i;
    ++seen;
  }
  return text.size();
}

std::string replace_quoted_names(std::string_view text,
                                 const std::vector<std::pair<std::string, std::string>>& names) {
  std::string out(text);
  for (const auto& [server, client] : names) {
    const std::string from = "\"" + server + "\"";
    const std::string to = "\"" + client + "\"";
    for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size())) {
      out.replace(at, from.size(), to);
    }
  }
  return out;
}

// Builds the Query as sent, one edit at a time, in the order of the text.
class QueryWriter {
 public:
  QueryWriter(std::string_view sql, SqlQueryPlan& plan) : sql_(sql), plan_(plan) {}

  // The client's text up to `offset`, then `text` in place of `length` bytes of it.
  void edit(size_t offset, size_t length, std::string_view text) {
    plan_.sent_sql.append(sql_.substr(copied_, offset - copied_));
    plan_.edits.push_back(SqlEdit{.sent_offset = plan_.sent_sql.size(),
                                  .sent_length = text.size(),
                                  .client_offset = offset,
                                  .client_length = length});
    plan_.sent_sql.append(text);
    copied_ = offset + length;
  }
  void finish() { plan_.sent_sql.append(sql_.substr(copied_)); }

 private:
  std::string_view sql_;
  SqlQueryPlan& plan_;
  size_t copied_ = 0;
};

bool renames(Op op) {
  return op == Op::prepare || op == Op::execute || op == Op::deallocate;
}

// Every use can be renamed, in the order of the text.
bool renamable(std::string_view sql, const std::vector<pp::PreparedNameUse>& uses) {
  size_t end = 0;
  for (const pp::PreparedNameUse& use : uses) {
    const pp::StatementSpan& s = use.statement_span;
    if (s.offset < end || s.offset > sql.size() || s.length > sql.size() - s.offset) return false;
    if (renames(use.op)) {
      const pp::StatementSpan& n = use.name_span;
      if (n.length == 0 || n.offset < s.offset || n.offset + n.length > s.offset + s.length) {
        return false;
      }
    }
    end = s.offset + s.length;
  }
  return true;
}

}  // namespace

bool sql_prepare_renamable(const pp::Classification& verdict) {
  if (verdict.source != pp::VerdictSource::parser) return false;
  return std::all_of(
      verdict.prepared_names.begin(), verdict.prepared_names.end(),
      [](const pp::PreparedNameUse& use) { return !renames(use.op) || use.name_span.length > 0; });
}

SqlStatement::SqlStatement(std::string definition)
    : id_(++g_next_id),
      server_name_(fmt::format("{}{}", kPrefix, id_)),
      definition_(std::move(definition)) {}

SqlStatement::~SqlStatement() {
  g_deaths.fetch_add(1, std::memory_order_relaxed);
}

bool is_pooler_sql_name(std::string_view name) {
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(kPrefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

void ServerSqlStatements::add(const SqlStatementRef& statement) {
  entries_[statement->id()] = Entry{statement, statement->server_name()};
}

void ServerSqlStatements::restore(Entries entries) {
  for (auto& [id, entry] : entries) entries_.try_emplace(id, std::move(entry));
}

bool ServerSqlStatements::deaths_since_seen() const {
  return g_deaths.load(std::memory_order_relaxed) != deaths_seen_;
}

std::vector<std::string> ServerSqlStatements::take_dead() {
  deaths_seen_ = g_deaths.load(std::memory_order_relaxed);
  std::vector<std::string> dead;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.statement.expired()) {
      dead.push_back(std::move(it->second.server_name));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(dead.begin(), dead.end());  // a stable order for the log and the tests
  return dead;
}

namespace {

// plan_sql_query's work, one use at a time in the order of the text.
class Planner {
 public:
  Planner(std::string_view sql, ClientSqlStatements& client, ServerSqlStatements& server,
          SqlPlanMode mode)
      : sql_(sql), client_(client), server_(server), mode_(mode), writer_(sql, plan) {
    plan.client_sql = std::string(sql);
  }

  void use(const pp::PreparedNameUse& use) {
    auto it = client_.find(use.name);
    const bool known = renames(use.op) && it != client_.end();
    if (renames(use.op) && !known && use.op != Op::prepare) {
      // PostgreSQL's own 26000 under the client's name, unless the name is spelled like one of
      // the pooler's: then a name that never exists takes its place.
      if (is_pooler_sql_name(use.name) || use.name == kNoSuchName) {
        rename(use, std::string(kNoSuchName));
      }
      return;
    }
    switch (use.op) {
      case Op::prepare:
        if (known) {
          // A live name: the server refuses the PREPARE of a name it has (42P05, after checking
          // what PostgreSQL checks first), which leaves the transaction as PostgreSQL would.
          ensure(it->second, use);
          rename(use, it->second->server_name());
        } else {
          prepare(use);
        }
        break;
      case Op::execute:
        ensure(it->second, use);
        rename(use, it->second->server_name());
        break;
      case Op::deallocate:
        deallocate(use, it);
        break;
      case Op::deallocate_all:
      case Op::discard_all: {
        SqlEffect effect{.kind = SqlEffect::Kind::deallocate_all, .statement = statement(use)};
        effect.client_had.assign(client_.begin(), client_.end());
        client_.clear();
        effect.server_had = server_.take_all();
        plan.effects.push_back(std::move(effect));
        break;
      }
    }
  }

  void finish() { writer_.finish(); }

  SqlQueryPlan plan;

 private:
  // `use`'s statement counted in the Query as sent.
  [[nodiscard]] size_t statement(const pp::PreparedNameUse& use) const {
    return use.statement + inserted_;
  }

  // The statement exists on the server before `use` runs: its PREPARE goes just before it.
  void ensure(const SqlStatementRef& stmt, const pp::PreparedNameUse& use) {
    if (server_.has(stmt->id())) return;
    server_.add(stmt);
    if (mode_ == SqlPlanMode::parse) {
      plan.prepares.push_back(stmt);
      return;
    }
    // The newline ends a -- comment the definition may end with.
    writer_.edit(use.statement_span.offset, 0,
                 "PREPARE " + stmt->server_name() + stmt->definition() + "\n;");
    plan.effects.push_back(SqlEffect{
        .kind = SqlEffect::Kind::ensure, .statement = statement(use), .sql_statement = stmt});
    ++inserted_;
  }

  void rename(const pp::PreparedNameUse& use, const std::string& server_name) {
    writer_.edit(use.name_span.offset, use.name_span.length, server_name);
    plan.names.emplace_back(server_name, use.name);
  }

  // The client's PREPARE of a new name.
  void prepare(const pp::PreparedNameUse& use) {
    const size_t end = use.statement_span.offset + use.statement_span.length;
    const size_t from = use.name_span.offset + use.name_span.length;
    auto stmt = std::make_shared<const SqlStatement>(std::string(sql_.substr(from, end - from)));
    client_[use.name] = stmt;
    server_.add(stmt);
    plan.effects.push_back(SqlEffect{.kind = SqlEffect::Kind::prepare,
                                     .statement = statement(use),
                                     .sql_statement = stmt,
                                     .client_name = use.name});
    rename(use, stmt->server_name());
  }

  void deallocate(const pp::PreparedNameUse& use, ClientSqlStatements::iterator it) {
    SqlStatementRef stmt = it->second;
    ensure(stmt, use);
    rename(use, stmt->server_name());
    client_.erase(it);
    server_.remove(stmt->id());
    plan.effects.push_back(SqlEffect{.kind = SqlEffect::Kind::deallocate,
                                     .statement = statement(use),
                                     .sql_statement = stmt,
                                     .client_name = use.name});
  }

  std::string_view sql_;
  ClientSqlStatements& client_;
  ServerSqlStatements& server_;
  SqlPlanMode mode_;
  QueryWriter writer_;
  size_t inserted_ = 0;  // PREPAREs inserted so far
};

}  // namespace

std::optional<SqlQueryPlan> plan_sql_query(std::string_view sql,
                                           const std::vector<pp::PreparedNameUse>& uses,
                                           ClientSqlStatements& client, ServerSqlStatements& server,
                                           SqlPlanMode mode) {
  if (uses.empty() || !renamable(sql, uses)) return std::nullopt;
  // A Parse of several statements is PostgreSQL's error: it goes as it is.
  if (mode == SqlPlanMode::parse && uses.back().statement != 0) return std::nullopt;
  Planner planner(sql, client, server, mode);
  for (const pp::PreparedNameUse& use : uses) planner.use(use);
  SqlQueryPlan& plan = planner.plan;
  // Only names the client never prepared: PostgreSQL answers them as they are.
  if (plan.edits.empty() && plan.effects.empty() && plan.prepares.empty()) return std::nullopt;
  planner.finish();
  return std::move(plan);
}

bool SqlQueryPlan::on_command_complete() {
  const size_t statement = completed_++;
  return std::any_of(effects.begin(), effects.end(), [&](const SqlEffect& e) {
    return e.kind == SqlEffect::Kind::ensure && e.statement == statement;
  });
}

void SqlQueryPlan::on_error(ClientSqlStatements* client, ServerSqlStatements& server) {
  if (std::exchange(undone_, true)) return;
  for (auto it = effects.rbegin(); it != effects.rend() && it->statement >= completed_; ++it) {
    SqlEffect& e = *it;
    switch (e.kind) {
      case SqlEffect::Kind::ensure:
        server.remove(e.sql_statement->id());
        break;
      case SqlEffect::Kind::prepare:
        server.remove(e.sql_statement->id());
        if (client != nullptr) {
          auto named = client->find(e.client_name);
          if (named != client->end() && named->second == e.sql_statement) client->erase(named);
        }
        break;
      case SqlEffect::Kind::deallocate:
        server.add(e.sql_statement);
        if (client != nullptr) client->try_emplace(e.client_name, e.sql_statement);
        break;
      case SqlEffect::Kind::deallocate_all:
        server.restore(std::move(e.server_had));
        if (client != nullptr) {
          for (auto& [name, stmt] : e.client_had) client->try_emplace(name, std::move(stmt));
        }
        break;
    }
  }
}

std::optional<std::string> SqlQueryPlan::client_error(std::string_view body) const {
  auto error = pp::parse_error_fields(body);
  if (!error) return std::nullopt;
  std::string out;
  bool changed = false;
  for (const auto& [type, value] : error.value.fields) {
    std::string field(value);
    if (type == 'M' || type == 'D' || type == 'H') {
      field = replace_quoted_names(value, names);
    } else if (type == 'P') {
      size_t position = 0;
      for (char c : value) {
        if (c < '0' || c > '9' || position > 1'000'000'000) {
          position = 0;
          break;
        }
        position = position * 10 + static_cast<size_t>(c - '0');
      }
      if (position > 0) {
        field = std::to_string(map_error_position(position, sent_sql, client_sql, edits));
      }
    }
    changed = changed || field != value;
    out.push_back(type);
    out.append(field);
    out.push_back('\0');
  }
  out.push_back('\0');
  if (!changed) return std::nullopt;
  return out;
}

size_t map_error_position(size_t position, std::string_view sent, std::string_view client,
                          const std::vector<SqlEdit>& edits) {
  const size_t sent_byte = byte_of_char(sent, position - 1);
  size_t client_byte = sent_byte;
  for (const SqlEdit& e : edits) {
    if (sent_byte < e.sent_offset) break;
    if (sent_byte < e.sent_offset + e.sent_length) {
      client_byte = e.client_offset;
      break;
    }
    client_byte = e.client_offset + e.client_length + (sent_byte - e.sent_offset - e.sent_length);
  }
  client_byte = std::min(client_byte, client.size());
  return chars_in(client.substr(0, client_byte)) + 1;
}

}  // namespace pgsluice
