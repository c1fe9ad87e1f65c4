// The exact verdict: walks the JSON parse tree libpg_query prints for each statement, and the
// PL/pgSQL tree of DO blocks, and turns the nodes that touch session state into findings.
#include <algorithm>
#include <array>
#include <string>

#include "pg_json.h"
#include "pg_query_library.h"
#include "pgsluice/protocol/sql_lexer.h"
#include "session_state_internal.h"

namespace pgsluice::protocol::session_state_detail {
namespace {

using pg_json::Value;

// parsenodes.h: DECLARE … WITH HOLD sets this bit in DeclareCursorStmt.options.
constexpr int64_t kCursorOptHold = 0x0020;

constexpr std::array<std::string_view, 4> kAdvisoryAcquire = {
    "pg_advisory_lock", "pg_advisory_lock_shared", "pg_try_advisory_lock",
    "pg_try_advisory_lock_shared"};
constexpr std::array<std::string_view, 2> kAdvisoryRelease = {"pg_advisory_unlock",
                                                              "pg_advisory_unlock_shared"};

// Statements that define code or objects without running the expressions they contain (a view's
// query, a function body, a column default, a trigger's WHEN): their function calls are not
// calls now, so the tree below them is not searched for any.
constexpr std::array<std::string_view, 20> kDefiningStatements = {"AlterDatabaseSetStmt",
                                                                  "AlterDomainStmt",
                                                                  "AlterFunctionStmt",
                                                                  "AlterPolicyStmt",
                                                                  "AlterRoleSetStmt",
                                                                  "AlterRoleStmt",
                                                                  "AlterSystemStmt",
                                                                  "AlterTableStmt",
                                                                  "CompositeTypeStmt",
                                                                  "CreateDomainStmt",
                                                                  "CreateEventTrigStmt",
                                                                  "CreateForeignTableStmt",
                                                                  "CreateFunctionStmt",
                                                                  "CreatePolicyStmt",
                                                                  "CreateSeqStmt",
                                                                  "CreateStmt",
                                                                  "CreateTrigStmt",
                                                                  "DefineStmt",
                                                                  "RuleStmt",
                                                                  "ViewStmt"};

template <size_t N>
bool one_of(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::string_view n : names) {
    if (n == name) return true;
  }
  return false;
}

// The single member of a node wrapper such as {"SelectStmt": {...}}.
bool unwrap(const Value& node, std::string_view& type, const Value*& body) {
  if (!node.is_object() || node.members.size() != 1) return false;
  type = node.members[0].first;
  body = &node.members[0].second;
  return true;
}

// The string of a {"String":{"sval":"…"}} node.
std::string_view string_node(const Value& node) {
  const Value* s = node.get("String");
  return s != nullptr ? s->get_string("sval") : std::string_view{};
}

// A constant argument seen through casts: 'x', 'x'::text, CAST(false AS bool).
const Value* constant(const Value& node) {
  const Value* v = &node;
  for (int i = 0; i < 8; ++i) {
    if (const Value* c = v->get("A_Const")) return c;
    const Value* cast = v->get("TypeCast");
    if (cast == nullptr || cast->get("arg") == nullptr) return nullptr;
    v = cast->get("arg");
  }
  return nullptr;
}

// PostgreSQL's boolean input (parse_bool): t/true/y/yes/on/1 and f/false/n/no/off/0, any case,
// a prefix of the word allowed (but "o" alone is ambiguous).
std::optional<bool> parse_bool_text(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  const std::string t = to_lower(text);
  if (t.empty()) return std::nullopt;
  auto prefix_of = [&](std::string_view word) { return word.substr(0, t.size()) == t; };
  if (t == "1" || prefix_of("true") || prefix_of("yes") || (t.size() >= 2 && prefix_of("on"))) {
    return true;
  }
  if (t == "0" || prefix_of("false") || prefix_of("no") || (t.size() >= 2 && prefix_of("off"))) {
    return false;
  }
  return std::nullopt;
}

// The value of set_config's is_local argument when it is a constant. NULL counts as false:
// set_config_by_name() treats a NULL is_local as false.
std::optional<bool> constant_bool(const Value& arg) {
  const Value* c = constant(arg);
  if (c == nullptr) return std::nullopt;
  if (c->get_bool("isnull")) return false;
  if (const Value* b = c->get("boolval")) return b->get_bool("boolval");
  if (const Value* s = c->get("sval")) return parse_bool_text(s->get_string("sval"));
  return std::nullopt;
}

std::optional<std::string> constant_string(const Value& arg) {
  const Value* c = constant(arg);
  if (c == nullptr) return std::nullopt;
  if (const Value* s = c->get("sval")) return std::string(s->get_string("sval"));
  return std::nullopt;
}

class TreeWalker {
 public:
  TreeWalker(Classification& out, const Scope& scope) : out_(out), scope_(scope) {}

  // A user function's PL/pgSQL body, `wrapper` being its CREATE FUNCTION statement.
  bool function_body(const std::string& wrapper, StatementSpan span) {
    span_ = span;
    return plpgsql_function(wrapper);
  }

  // One element of the "stmts" array: {"stmt": {...}, "stmt_location": n, "stmt_len": n}.
  void raw_statement(const Value& raw, std::string_view text) {
    if (scope_.fixed_span) {
      span_ = *scope_.fixed_span;
    } else {
      auto location = std::min(static_cast<size_t>(raw.get_int("stmt_location")), text.size());
      auto length = static_cast<size_t>(raw.get_int("stmt_len"));
      // stmt_len 0 means "to the end of the string" (the last statement).
      if (length == 0 || length > text.size() - location) length = text.size() - location;
      // libpg_query's statement starts right after the previous ';', spaces included.
      const StatementSpan trimmed = trim_span(text, StatementSpan{location, length});
      span_ = StatementSpan{scope_.base_offset + trimmed.offset, trimmed.length};
      text_ = text;
      local_span_ = trimmed;
      ++out_.statements;
    }
    if (const Value* stmt = raw.get("stmt")) statement(*stmt);
  }

 private:
  void add(SessionStateKind kind, Certainty certainty, SessionStateEffect effect,
           std::string_view detail) {
    SessionStateFinding f;
    f.kind = kind;
    f.certainty = scope_.deferred ? Certainty::possible : certainty;
    f.effect = effect;
    f.detail = std::string(detail);
    f.span = span_;
    out_.findings.push_back(std::move(f));
  }

  // A top-level PREPARE, EXECUTE, DEALLOCATE or DISCARD ALL of the client's own text: the pooler
  // renames the statements it names (keep). Not inside a DO block or a PREPARE's query.
  void note_name(PreparedNameUse::Op op, std::string_view name) {
    if (scope_.fixed_span || scope_.deferred || out_.statements == 0) return;
    PreparedNameUse use;
    use.op = op;
    use.statement = out_.statements - 1;
    use.statement_span = span_;
    use.name = std::string(name);
    if (!name.empty()) {
      const StatementSpan local = locate_prepared_name(text_, local_span_, name);
      if (local.length > 0) use.name_span = {scope_.base_offset + local.offset, local.length};
    }
    out_.prepared_names.push_back(std::move(use));
  }

  void opaque(std::string name) {
    OpaqueCall call;
    call.name = std::move(name);
    call.span = span_;
    out_.opaque_calls.push_back(std::move(call));
  }

  void statement(const Value& node) {
    std::string_view type;
    const Value* body = nullptr;
    if (!unwrap(node, type, body)) return;
    const Value& s = *body;
    note_sequence_advance(type, s);

    if (type == "VariableSetStmt") {
      variable_set(s);
    } else if (type == "ListenStmt") {
      add(SessionStateKind::listen, Certainty::definite, SessionStateEffect::acquire,
          s.get_string("conditionname"));
    } else if (type == "UnlistenStmt") {
      // UNLISTEN * is the statement without a channel.
      if (s.get("conditionname") == nullptr) {
        out_.cleanup.unlisten_all = true;
        add(SessionStateKind::listen, Certainty::definite, SessionStateEffect::release, "*");
      } else {
        add(SessionStateKind::listen, Certainty::definite, SessionStateEffect::release,
            s.get_string("conditionname"));
      }
    } else if (type == "PrepareStmt") {
      add(SessionStateKind::prepare, Certainty::definite, SessionStateEffect::acquire,
          s.get_string("name"));
      note_name(PreparedNameUse::Op::prepare, s.get_string("name"));
      // The prepared query runs at EXECUTE time: what it would do is only possible now.
      if (const Value* q = s.get("query")) {
        const bool was_deferred = scope_.deferred;
        scope_.deferred = true;
        statement(*q);
        scope_.deferred = was_deferred;
      }
    } else if (type == "ExecuteStmt") {
      add(SessionStateKind::prepare, Certainty::definite, SessionStateEffect::use,
          s.get_string("name"));
      note_name(PreparedNameUse::Op::execute, s.get_string("name"));
      walk(s);
    } else if (type == "DeallocateStmt") {
      deallocate(s);
    } else if (type == "DeclareCursorStmt") {
      // Only WITH HOLD outlives the transaction; a plain cursor is closed at COMMIT.
      if ((s.get_int("options") & kCursorOptHold) != 0) {
        add(SessionStateKind::hold_cursor, Certainty::definite, SessionStateEffect::acquire,
            s.get_string("portalname"));
      }
      if (const Value* q = s.get("query")) statement(*q);
    } else if (type == "ClosePortalStmt") {
      if (s.get("portalname") == nullptr) {
        out_.cleanup.close_all = true;
        add(SessionStateKind::hold_cursor, Certainty::definite, SessionStateEffect::release, "all");
      } else {
        add(SessionStateKind::hold_cursor, Certainty::definite, SessionStateEffect::release,
            s.get_string("portalname"));
      }
    } else if (type == "CreateStmt") {
      if (const Value* rel = s.get("relation")) temp_relation(*rel, s.get_string("oncommit"));
    } else if (type == "CreateTableAsStmt") {
      if (const Value* into = s.get("into")) into_clause(*into);
      if (const Value* q = s.get("query")) statement(*q);
    } else if (type == "SelectStmt") {
      // SELECT … INTO TEMP t is CREATE TEMP TABLE t AS SELECT ….
      if (const Value* into = s.get("intoClause")) into_clause(*into);
      walk(s);
    } else if (type == "ViewStmt") {
      if (const Value* view = s.get("view")) temp_relation(*view, "");
    } else if (type == "CreateSeqStmt") {
      if (const Value* seq = s.get("sequence")) temp_relation(*seq, "");
    } else if (type == "CreateFunctionStmt") {
      // CREATE FUNCTION pg_temp.f(): a function in the session's temporary schema.
      const Value* names = s.get("funcname");
      if (names != nullptr && names->is_array() && names->items.size() == 2 &&
          string_node(names->items[0]).starts_with("pg_temp")) {
        add(SessionStateKind::temp_object, Certainty::definite, SessionStateEffect::acquire,
            string_node(names->items[1]));
      }
    } else if (temp_schema_object(type, s)) {
    } else if (type == "LoadStmt") {
      add(SessionStateKind::load, Certainty::definite, SessionStateEffect::acquire,
          s.get_string("filename"));
    } else if (type == "DiscardStmt") {
      discard(s.get_string("target"));
    } else if (type == "DoStmt") {
      do_block(s);
    } else if (type == "ExplainStmt") {
      explain(s);
    } else if (type == "CallStmt") {
      // The FuncCall of CALL is printed without its node wrapper.
      if (const Value* call = s.get("funccall")) func_call(*call);
    } else if (!one_of(kDefiningStatements, type)) {
      // INSERT, UPDATE, DELETE, MERGE, CALL, COPY (query), CREATE INDEX (expressions), … : any
      // function call in them runs now.
      walk(s);
    }
  }

  // CREATE STATISTICS, TYPE, DOMAIN, AGGREGATE … of an object in pg_temp: the session's own.
  // False for other statements.
  bool temp_schema_object(std::string_view type, const Value& s) {
    const Value* names = nullptr;
    if (type == "CreateStatsStmt" || type == "DefineStmt") {
      names = s.get("defnames");
    } else if (type == "CreateEnumStmt" || type == "CreateRangeStmt") {
      names = s.get("typeName");
    } else if (type == "CreateDomainStmt") {
      names = s.get("domainname");
    } else if (type == "CompositeTypeStmt") {
      if (const Value* rel = s.get("typevar")) temp_relation(*rel, "");
      return true;
    } else {
      return false;
    }
    if (names != nullptr && names->is_array() && names->items.size() == 2 &&
        string_node(names->items[0]).starts_with("pg_temp")) {
      add(SessionStateKind::temp_object, Certainty::definite, SessionStateEffect::acquire,
          string_node(names->items[1]));
    }
    return true;
  }

  void deallocate(const Value& s) {
    if (s.get("name") == nullptr) {
      out_.cleanup.deallocate_all = true;
      add(SessionStateKind::prepare, Certainty::definite, SessionStateEffect::release, "all");
      note_name(PreparedNameUse::Op::deallocate_all, "");
    } else {
      add(SessionStateKind::prepare, Certainty::definite, SessionStateEffect::release,
          s.get_string("name"));
      note_name(PreparedNameUse::Op::deallocate, s.get_string("name"));
    }
  }

  // A serial or identity column's default calls nextval: after these, currval/lastval in the
  // same input read this statement's value.
  void note_sequence_advance(std::string_view type, const Value& s) {
    if (type == "InsertStmt" || type == "MergeStmt" ||
        (type == "CopyStmt" && s.get_bool("is_from"))) {
      advanced_sequence_ = true;
    }
  }

  void variable_set(const Value& s) {
    const std::string_view kind = s.get_string("kind");
    const std::string_view name = s.get_string("name");
    // SET LOCAL (and SET LOCAL x TO DEFAULT) ends with the transaction: nothing outlives it.
    if (s.get_bool("is_local")) return;
    const bool is_role = name == "role" || name == "session_authorization";
    const SessionStateKind k = is_role ? SessionStateKind::role : SessionStateKind::set;
    if (kind == "VAR_SET_VALUE" || kind == "VAR_SET_CURRENT") {
      // SET ROLE NONE is RESET ROLE.
      const Value* args = s.get("args");
      if (name == "role" && args != nullptr && args->is_array() && args->items.size() == 1 &&
          constant_string(args->items[0]) == "none") {
        add(k, Certainty::definite, SessionStateEffect::release, name);
      } else {
        add(k, Certainty::definite, SessionStateEffect::acquire, name);
      }
    } else if (kind == "VAR_SET_DEFAULT" || kind == "VAR_RESET") {
      add(k, Certainty::definite, SessionStateEffect::release, name);
    } else if (kind == "VAR_RESET_ALL") {
      out_.cleanup.reset_all = true;
      add(SessionStateKind::set, Certainty::definite, SessionStateEffect::release, "all");
    } else if (kind == "VAR_SET_MULTI") {
      // SET TRANSACTION … lasts for the transaction; SET SESSION CHARACTERISTICS AS TRANSACTION
      // sets the default_transaction_* settings of the session.
      if (name != "SESSION CHARACTERISTICS") return;
      const Value* args = s.get("args");
      if (args == nullptr || !args->is_array()) return;
      for (const Value& item : args->items) {
        const Value* def = item.get("DefElem");
        if (def == nullptr) continue;
        add(SessionStateKind::set, Certainty::definite, SessionStateEffect::acquire,
            "default_" + std::string(def->get_string("defname")));
      }
    }
  }

  // A relation is temporary by TEMP/TEMPORARY (relpersistence 't') or by being created in
  // pg_temp explicitly. ON COMMIT DROP removes it with the transaction; ON COMMIT DELETE ROWS
  // still leaves the table itself behind.
  void temp_relation(const Value& range_var, std::string_view on_commit) {
    const bool temp = range_var.get_string("relpersistence") == "t" ||
                      range_var.get_string("schemaname").starts_with("pg_temp");
    if (!temp || on_commit == "ONCOMMIT_DROP") return;
    add(SessionStateKind::temp_object, Certainty::definite, SessionStateEffect::acquire,
        range_var.get_string("relname"));
  }

  void into_clause(const Value& into) {
    if (const Value* rel = into.get("rel")) temp_relation(*rel, into.get_string("onCommit"));
  }

  void discard(std::string_view target) {
    if (target == "DISCARD_ALL") {
      out_.cleanup.discard_all = true;
      note_name(PreparedNameUse::Op::discard_all, "");
    } else if (target == "DISCARD_TEMP") {
      out_.cleanup.discard_temp = true;
    } else if (target == "DISCARD_PLANS") {
      out_.cleanup.discard_plans = true;
    } else if (target == "DISCARD_SEQUENCES") {
      out_.cleanup.discard_sequences = true;
    }
  }

  // EXPLAIN only plans; EXPLAIN ANALYZE runs the statement.
  void explain(const Value& s) {
    bool analyze = false;
    if (const Value* options = s.get("options"); options != nullptr && options->is_array()) {
      for (const Value& o : options->items) {
        const Value* def = o.get("DefElem");
        if (def == nullptr || def->get_string("defname") != "analyze") continue;
        // EXPLAIN (ANALYZE false) does not run it.
        const Value* arg = def->get("arg");
        analyze = arg == nullptr || constant_bool(*arg).value_or(true);
      }
    }
    const Value* q = s.get("query");
    if (q == nullptr) return;
    if (analyze) {
      statement(*q);
      return;
    }
    // EXPLAIN EXECUTE p, EXPLAIN CREATE TABLE t AS EXECUTE p: the statement is planned (its
    // name must be the server's), the table is not created.
    const Value* exec = q->get("ExecuteStmt");
    if (const Value* ctas = q->get("CreateTableAsStmt"); ctas != nullptr) {
      if (const Value* inner = ctas->get("query")) exec = inner->get("ExecuteStmt");
    }
    if (exec == nullptr) return;
    add(SessionStateKind::prepare, Certainty::definite, SessionStateEffect::use,
        exec->get_string("name"));
    note_name(PreparedNameUse::Op::execute, exec->get_string("name"));
  }

  // Searches an expression tree for function calls.
  void walk(const Value& v) {
    if (v.is_object()) {
      for (const auto& [key, child] : v.members) {
        if (key == "FuncCall") {
          func_call(child);
        } else {
          walk(child);
        }
      }
    } else if (v.is_array()) {
      for (const Value& child : v.items) walk(child);
    }
  }

  void func_call(const Value& fc) {
    const Value* names = fc.get("funcname");
    if (names != nullptr && names->is_array() && !names->items.empty()) {
      const std::string_view name = string_node(names->items.back());
      const bool unqualified = names->items.size() == 1;
      const bool catalog = names->items.size() == 2 && string_node(names->items[0]) == "pg_catalog";
      if (unqualified || catalog) {
        builtin_call(name, fc);
      } else {
        std::string full;
        for (const Value& part : names->items) {
          if (!full.empty()) full += '.';
          full += string_node(part);
        }
        opaque(std::move(full));
      }
    }
    for (const auto& [key, child] : fc.members) {
      if (key != "funcname") walk(child);
    }
  }

  void builtin_call(std::string_view name, const Value& fc) {
    if (one_of(kAdvisoryAcquire, name)) {
      add(SessionStateKind::advisory_lock, Certainty::definite, SessionStateEffect::acquire, name);
    } else if (one_of(kAdvisoryRelease, name)) {
      add(SessionStateKind::advisory_lock, Certainty::definite, SessionStateEffect::release, name);
    } else if (name == "pg_advisory_unlock_all") {
      out_.cleanup.advisory_unlock_all = true;
      add(SessionStateKind::advisory_lock, Certainty::definite, SessionStateEffect::release, name);
    } else if (name == "set_config") {
      set_config(fc);
    } else if (name == "nextval" || name == "setval") {
      advanced_sequence_ = true;
    } else if (name == "setseed") {
      add(SessionStateKind::seed, Certainty::definite, SessionStateEffect::acquire, name);
    } else if (name == "currval" || name == "lastval") {
      // Calls are walked in evaluation order, so `SELECT nextval('s'), currval('s')` is fine.
      if (!advanced_sequence_) {
        add(SessionStateKind::currval, Certainty::definite, SessionStateEffect::use, name);
      }
    } else if (!is_known_safe_builtin(name)) {
      opaque(std::string(name));
    }
  }

  // set_config(name, value, is_local): only is_local = false outlives the transaction.
  void set_config(const Value& fc) {
    const Value* args = fc.get("args");
    if (args == nullptr || !args->is_array() || args->items.size() != 3) {
      add(SessionStateKind::set_config, Certainty::possible, SessionStateEffect::acquire, "");
      return;
    }
    const std::string detail = to_lower(constant_string(args->items[0]).value_or(""));
    const std::optional<bool> is_local = constant_bool(args->items[2]);
    if (is_local == true) return;
    add(SessionStateKind::set_config, is_local ? Certainty::definite : Certainty::possible,
        SessionStateEffect::acquire, detail);
  }

  void do_block(const Value& s);
  void plpgsql(const Value& v);
  bool plpgsql_function(const std::string& wrapper);
  void plpgsql_static(const Value& expr_wrapper);
  void plpgsql_dynamic(const Value& expr_wrapper);
  void nested_sql(std::string_view sql, bool allow_expression);

  Classification& out_;
  Scope scope_;
  StatementSpan span_;
  std::string_view text_;           // the text libpg_query parsed (a piece of the input)
  StatementSpan local_span_;        // span_ in text_
  bool advanced_sequence_ = false;  // an earlier statement or call of the input did
};

// A DO block in PL/pgSQL is parsed as the body of a function, and each SQL statement and
// expression of it is classified like top-level SQL, with findings pointing at the DO statement.
void TreeWalker::do_block(const Value& s) {
  std::string_view language = "plpgsql";
  std::string_view body;
  if (const Value* args = s.get("args"); args != nullptr && args->is_array()) {
    for (const Value& item : args->items) {
      const Value* def = item.get("DefElem");
      if (def == nullptr || def->get("arg") == nullptr) continue;
      if (def->get_string("defname") == "language") language = string_node(*def->get("arg"));
      if (def->get_string("defname") == "as") body = string_node(*def->get("arg"));
    }
  }
  if (to_lower(language) != "plpgsql") {
    opaque("DO (language " + std::string(language) + ")");
    return;
  }
  if (scope_.depth >= kMaxNesting) {
    opaque("DO (nested too deep)");
    return;
  }
  std::string wrapper = "CREATE FUNCTION pg_temp.pgsluice_do() RETURNS void LANGUAGE plpgsql AS ";
  wrapper += dollar_quote(body);
  if (!plpgsql_function(wrapper)) opaque("DO (body not analysed)");
}

// `wrapper`: a CREATE FUNCTION or CREATE PROCEDURE statement in PL/pgSQL, parsed with the
// PL/pgSQL compiler of libpg_query; each SQL statement and expression of its body is classified,
// with findings pointing at span_. False when the body does not compile.
bool TreeWalker::plpgsql_function(const std::string& wrapper) {
  // (libpg_query 15-4.0.0 leaks one byte here when the body does not compile; the verdict is
  // cached, so that is one byte per distinct unparsable DO text.)
  PgQueryPlpgsqlParseResult result = pg_query_library::parse_plpgsql(wrapper.c_str());
  std::optional<Value> tree;
  if (result.error == nullptr && result.plpgsql_funcs != nullptr) {
    tree = pg_json::parse(result.plpgsql_funcs);
  }
  pg_query_library::free_plpgsql_parse_result(result);
  if (!tree) return false;
  const Scope saved = scope_;
  scope_.fixed_span = span_;
  ++scope_.depth;
  plpgsql(*tree);
  scope_ = saved;
  return true;
}

void TreeWalker::plpgsql(const Value& v) {
  if (v.is_array()) {
    for (const Value& child : v.items) plpgsql(child);
    return;
  }
  if (!v.is_object()) return;
  for (const auto& [key, child] : v.members) {
    if (key == "PLpgSQL_expr") {
      plpgsql_static(v);
    } else if (key == "PLpgSQL_stmt_dynexecute" || key == "PLpgSQL_stmt_dynfors" ||
               key == "PLpgSQL_stmt_open" || key == "PLpgSQL_stmt_return_query") {
      // EXECUTE expr, FOR … IN EXECUTE expr, OPEN … FOR EXECUTE expr, RETURN QUERY EXECUTE expr:
      // the value of the expression is SQL that runs.
      for (const auto& [field, value] : child.members) {
        const bool dynamic =
            field == "dynquery" ||
            (field == "query" && key != "PLpgSQL_stmt_open" && key != "PLpgSQL_stmt_return_query");
        if (dynamic) {
          plpgsql_dynamic(value);
        } else {
          plpgsql(value);
        }
      }
    } else {
      plpgsql(child);
    }
  }
}

void TreeWalker::plpgsql_static(const Value& expr_wrapper) {
  const Value* expr = expr_wrapper.get("PLpgSQL_expr");
  if (expr == nullptr) return;
  nested_sql(expr->get_string("query"), true);
}

// EXECUTE of a constant string is classified as the SQL it is; anything computed (format(),
// concatenation, a variable) is code the pooler cannot see.
void TreeWalker::plpgsql_dynamic(const Value& expr_wrapper) {
  const Value* expr = expr_wrapper.get("PLpgSQL_expr");
  if (expr == nullptr) return;
  const std::string select = "SELECT " + std::string(expr->get_string("query"));
  PgQueryParseResult result = pg_query_library::parse(select.c_str());
  std::optional<Value> tree;
  if (result.error == nullptr && result.parse_tree != nullptr)
    tree = pg_json::parse(result.parse_tree);
  pg_query_library::free_parse_result(result);

  std::optional<std::string> text;
  if (tree) {
    const Value* stmts = tree->get("stmts");
    const Value* stmt = stmts != nullptr && stmts->is_array() && stmts->items.size() == 1
                            ? stmts->items[0].get("stmt")
                            : nullptr;
    const Value* select_stmt = stmt != nullptr ? stmt->get("SelectStmt") : nullptr;
    const Value* targets = select_stmt != nullptr ? select_stmt->get("targetList") : nullptr;
    if (targets != nullptr && targets->is_array() && targets->items.size() == 1) {
      const Value* res = targets->items[0].get("ResTarget");
      if (res != nullptr && res->get("val") != nullptr) text = constant_string(*res->get("val"));
    }
  }
  if (text) {
    nested_sql(*text, false);
    return;
  }
  opaque("DO: EXECUTE of dynamic SQL");
  if (tree) {
    if (const Value* stmts = tree->get("stmts")) walk(*stmts);
  }
}

// SQL found inside a DO block: a statement ("SET x = 1", "SELECT f()"), or an expression
// ("pg_advisory_lock(1)", "v := f(2)") when `allow_expression`.
void TreeWalker::nested_sql(std::string_view sql, bool allow_expression) {
  if (!may_change_session_state(sql)) return;
  Scope inner = scope_;
  if (classify_parsed(sql, inner, out_)) return;
  if (allow_expression) {
    if (classify_parsed("SELECT " + std::string(sql), inner, out_)) return;
    // PL/pgSQL assignment: target := expression.
    if (const size_t assign = sql.find(":="); assign != std::string_view::npos) {
      if (classify_parsed("SELECT " + std::string(sql.substr(assign + 2)), inner, out_)) return;
    }
  }
  classify_by_lexer(sql, span_, out_);
}

}  // namespace

std::string dollar_quote(std::string_view body) {
  std::string tag = "$pgsluice$";
  for (int i = 0; body.find(tag) != std::string_view::npos; ++i) {
    tag = "$pgsluice" + std::to_string(i) + "$";
  }
  std::string out = tag;
  out += body;
  out += tag;
  return out;
}

bool classify_plpgsql_function(const std::string& wrapper, StatementSpan span,
                               Classification& out) {
  TreeWalker walker(out, Scope{});
  return walker.function_body(wrapper, span);
}

bool classify_parsed(std::string_view sql, const Scope& scope, Classification& out) {
  const std::string text(sql);
  PgQueryParseResult result = pg_query_library::parse(text.c_str());
  std::optional<Value> tree;
  if (result.error == nullptr && result.parse_tree != nullptr) {
    tree = pg_json::parse(result.parse_tree);
  }
  pg_query_library::free_parse_result(result);
  if (!tree) return false;
  const Value* stmts = tree->get("stmts");
  if (stmts == nullptr || !stmts->is_array()) return true;  // only comments or whitespace
  TreeWalker walker(out, scope);
  for (const Value& raw : stmts->items) walker.raw_statement(raw, sql);
  return true;
}

StatementSpan trim_span(std::string_view text, StatementSpan span) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; };
  while (span.length > 0 && space(text[span.offset])) {
    ++span.offset;
    --span.length;
  }
  while (span.length > 0 && space(text[span.offset + span.length - 1])) --span.length;
  return span;
}

std::string to_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace pgsluice::protocol::session_state_detail
