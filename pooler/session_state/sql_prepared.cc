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
constexpr std::string_view kPrepare = "PREPARE ";
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

// The 1-based character position `position` of a text whose definition of `stmt` starts after
// `definition_at` characters, counted in the client's PREPARE text instead; nullopt outside the
// definition.
std::optional<size_t> in_definition(size_t position, size_t definition_at,
                                    const SqlStatement& stmt) {
  if (position <= definition_at || position - definition_at > chars_in(stmt.definition())) {
    return std::nullopt;
  }
  return stmt.definition_position() + (position - definition_at);
}

// An ErrorResponse's 'P' field as a number; 0 when it is not one.
size_t position_field(std::string_view value) {
  size_t position = 0;
  for (char c : value) {
    if (c < '0' || c > '9' || position > 1'000'000'000) return 0;
    position = position * 10 + static_cast<size_t>(c - '0');
  }
  return position;
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

// The error body with the pooler's names in M, D and H replaced by `names` and its position
// mapped by `map` (nullopt: dropped). Nullopt: nothing changed, or not an ErrorResponse.
template <typename MapPosition>
std::optional<std::string> rewrite_error(
    std::string_view body, const std::vector<std::pair<std::string, std::string>>& names,
    MapPosition map) {
  auto error = pp::parse_error_fields(body);
  if (!error) return std::nullopt;
  std::string out;
  bool changed = false;
  for (const auto& [type, value] : error.value.fields) {
    std::string field(value);
    if (type == 'M' || type == 'D' || type == 'H') {
      field = replace_quoted_names(value, names);
    } else if (type == 'P') {
      if (const size_t position = position_field(value); position > 0) {
        std::optional<size_t> mapped = map(position);
        if (!mapped) {
          changed = true;
          continue;
        }
        field = std::to_string(*mapped);
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

// Builds the Query as sent, one edit at a time, in the order of the text.
class QueryWriter {
 public:
  QueryWriter(std::string_view sql, SqlQueryPlan& plan) : sql_(sql), plan_(plan) {}

  // Where byte `offset` of the client's text (not before the last edit) is in the text as sent.
  [[nodiscard]] size_t sent_offset(size_t offset) const {
    return plan_.sent_sql.size() + (offset - copied_);
  }

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

SqlStatement::SqlStatement(std::string definition, size_t definition_position)
    : id_(++g_next_id),
      server_name_(fmt::format("{}{}", kPrefix, id_)),
      definition_(std::move(definition)),
      definition_position_(definition_position) {}

std::string SqlStatement::prepare_text() const {
  return std::string(kPrepare) + server_name_ + definition_;
}

size_t SqlStatement::prepare_text_position() const {
  return kPrepare.size() + server_name_.size();  // ASCII
}

SqlStatement::~SqlStatement() {
  g_deaths.fetch_add(1, std::memory_order_relaxed);
}

bool is_pooler_sql_name(std::string_view name) {
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(kPrefix.size()), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

void ServerSqlStatements::add(const SqlStatementRef& statement, size_t definition_position) {
  entries_[statement->id()] = Entry{statement, statement->server_name(), definition_position};
}

std::optional<size_t> ServerSqlStatements::definition_position(uint64_t id) const {
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.definition_position;
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
        execute(use, it->second);
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
    if (mode_ == SqlPlanMode::parse) {
      server_.add(stmt, stmt->prepare_text_position());
      plan.prepares.push_back(stmt);
      return;
    }
    // The newline ends a -- comment the definition may end with.
    writer_.edit(use.statement_span.offset, 0, stmt->prepare_text() + "\n;");
    SqlEdit& edit = plan.edits.back();
    edit.inserted = stmt.get();
    server_.add(stmt, chars_in(std::string_view(plan.sent_sql).substr(0, edit.sent_offset)) +
                          stmt->prepare_text_position());
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
    auto stmt = std::make_shared<const SqlStatement>(std::string(sql_.substr(from, end - from)),
                                                     chars_in(sql_.substr(0, from)));
    client_[use.name] = stmt;
    plan.effects.push_back(SqlEffect{.kind = SqlEffect::Kind::prepare,
                                     .statement = statement(use),
                                     .sql_statement = stmt,
                                     .client_name = use.name});
    rename(use, stmt->server_name());
    server_.add(stmt, chars_in(plan.sent_sql));  // the text as sent ends with the name now
  }

  void execute(const pp::PreparedNameUse& use, const SqlStatementRef& stmt) {
    ensure(stmt, use);
    const pp::StatementSpan& span = use.statement_span;
    const size_t begin = writer_.sent_offset(span.offset);
    rename(use, stmt->server_name());
    plan.executions.push_back(
        SqlExecution{.statement = statement(use),
                     .sql_statement = stmt,
                     .sent_offset = begin,
                     .sent_length = writer_.sent_offset(span.offset + span.length) - begin});
  }

  void deallocate(const pp::PreparedNameUse& use, ClientSqlStatements::iterator it) {
    SqlStatementRef stmt = it->second;
    ensure(stmt, use);
    rename(use, stmt->server_name());
    client_.erase(it);
    const size_t server_position = server_.definition_position(stmt->id()).value_or(0);
    server_.remove(stmt->id());
    plan.effects.push_back(SqlEffect{.kind = SqlEffect::Kind::deallocate,
                                     .statement = statement(use),
                                     .sql_statement = stmt,
                                     .client_name = use.name,
                                     .server_position = server_position});
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
        server.add(e.sql_statement, e.server_position);
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

std::optional<std::string> SqlQueryPlan::client_error(std::string_view body,
                                                      const ServerSqlStatements& server) const {
  return rewrite_error(body, names,
                       [&](size_t position) { return client_position(position, server); });
}

std::optional<size_t> SqlQueryPlan::client_position(size_t position,
                                                    const ServerSqlStatements& server) const {
  const size_t sent_byte = byte_of_char(sent_sql, position - 1);
  for (const SqlEdit& e : edits) {
    if (e.inserted == nullptr || sent_byte < e.sent_offset ||
        sent_byte >= e.sent_offset + e.sent_length) {
      continue;
    }
    const size_t before = chars_in(std::string_view(sent_sql).substr(0, e.sent_offset));
    return in_definition(position, before + e.inserted->prepare_text_position(), *e.inserted);
  }
  // The statement that failed (its CommandComplete did not come) executes a SQL prepared
  // statement, and the position is not in its own text: PostgreSQL analysed the definition
  // again (a schema change), and the position is in the text that prepared it on the server.
  for (const SqlExecution& x : executions) {
    if (x.statement != completed_) continue;
    if (sent_byte >= x.sent_offset && sent_byte < x.sent_offset + x.sent_length) break;
    std::optional<size_t> at = server.definition_position(x.sql_statement->id());
    if (!at) return std::nullopt;
    return in_definition(position, *at, *x.sql_statement);
  }
  return map_error_position(position, sent_sql, client_sql, edits);
}

std::optional<std::string> hidden_prepare_error(std::string_view body, const SqlStatement& stmt) {
  return rewrite_error(body, {}, [&](size_t position) {
    return in_definition(position, stmt.prepare_text_position(), stmt);
  });
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
