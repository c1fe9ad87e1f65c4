// The lexer's verdict, for SQL that libpg_query cannot parse (syntax newer than its PostgreSQL
// 15 grammar, or broken SQL): the keywords of the prefilter read with a little context, every
// finding `possible` and marked lexer_only, so that the pooler never calls such SQL safe.
#include <string>
#include <vector>

#include "pgsluice/protocol/sql_lexer.h"
#include "session_state_internal.h"

namespace pgsluice::protocol::session_state_detail {
namespace {

// A quoted identifier or string without its quotes (good enough for a detail string).
std::string unquote(const SqlToken& t) {
  std::string_view s = t.text;
  if (t.kind == SqlTokenKind::word) return to_lower(s);
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"'))
    return std::string(s.substr(1, s.size() - 2));
  if (s.size() >= 3 && s[1] == '\'') return std::string(s.substr(2, s.size() - 3));  // E'…'
  return std::string(s);
}

class LexerVerdict {
 public:
  LexerVerdict(StatementSpan span, Classification& out) : span_(span), out_(out) {}

  void statement(const std::vector<SqlToken>& t) {
    if (t.empty()) return;
    tokens_ = &t;
    leading(t);
    anywhere(t);
  }

 private:
  bool is(size_t i, std::string_view keyword) const {
    return i < tokens_->size() && (*tokens_)[i].kind == SqlTokenKind::word &&
           iequals_keyword((*tokens_)[i].text, keyword);
  }
  std::string detail_at(size_t i) const {
    return i < tokens_->size() ? unquote((*tokens_)[i]) : std::string();
  }

  void add(SessionStateKind kind, SessionStateEffect effect, std::string detail) {
    SessionStateFinding f;
    f.kind = kind;
    f.certainty = Certainty::possible;
    f.effect = effect;
    f.detail = std::move(detail);
    f.span = span_;
    f.lexer_only = true;
    out_.findings.push_back(std::move(f));
  }
  void opaque(std::string name) {
    OpaqueCall call;
    call.name = std::move(name);
    call.span = span_;
    call.lexer_only = true;
    out_.opaque_calls.push_back(std::move(call));
  }

  // What the first word says.
  void leading(const std::vector<SqlToken>& t) {
    const SqlToken& first = t[0];
    if (first.kind != SqlTokenKind::word) return;
    const std::string w = to_lower(first.text);
    if (w == "set" || w == "reset") {
      set_or_reset(w == "reset");
    } else if (w == "listen") {
      add(SessionStateKind::listen, SessionStateEffect::acquire, detail_at(1));
    } else if (w == "unlisten") {
      const bool all = t.size() > 1 && t[1].text == "*";
      if (all) out_.cleanup.unlisten_all = true;
      add(SessionStateKind::listen, SessionStateEffect::release, all ? "*" : detail_at(1));
    } else if (w == "prepare") {
      add(SessionStateKind::prepare, SessionStateEffect::acquire, detail_at(1));
    } else if (w == "execute") {
      add(SessionStateKind::prepare, SessionStateEffect::use, detail_at(1));
    } else if (w == "deallocate") {
      const size_t i = is(1, "prepare") ? 2 : 1;
      if (is(i, "all")) out_.cleanup.deallocate_all = true;
      add(SessionStateKind::prepare, SessionStateEffect::release, detail_at(i));
    } else if (w == "declare") {
      for (size_t i = 1; i < t.size(); ++i) {
        if (is(i, "hold") && !is(i - 1, "without")) {
          add(SessionStateKind::hold_cursor, SessionStateEffect::acquire, detail_at(1));
          break;
        }
      }
    } else if (w == "close") {
      if (is(1, "all")) out_.cleanup.close_all = true;
      add(SessionStateKind::hold_cursor, SessionStateEffect::release, detail_at(1));
    } else if (w == "load") {
      add(SessionStateKind::load, SessionStateEffect::acquire, detail_at(1));
    } else if (w == "discard") {
      if (is(1, "all")) out_.cleanup.discard_all = true;
      if (is(1, "temp") || is(1, "temporary")) out_.cleanup.discard_temp = true;
      if (is(1, "plans")) out_.cleanup.discard_plans = true;
      if (is(1, "sequences")) out_.cleanup.discard_sequences = true;
    } else if (w == "do") {
      opaque("DO (not analysed)");
    }
  }

  void set_or_reset(bool reset) {
    size_t i = 1;
    if (is(i, "local")) return;  // SET LOCAL ends with the transaction
    if (is(i, "transaction")) return;
    const SessionStateEffect effect =
        reset ? SessionStateEffect::release : SessionStateEffect::acquire;
    if (is(i, "session")) {
      if (is(i + 1, "authorization")) {
        add(SessionStateKind::role, effect, "session_authorization");
        return;
      }
      if (is(i + 1, "characteristics")) {
        add(SessionStateKind::set, effect, "default_transaction");
        return;
      }
      ++i;
    }
    if (is(i, "role")) {
      add(SessionStateKind::role, effect, "role");
    } else if (is(i, "time") && is(i + 1, "zone")) {
      add(SessionStateKind::set, effect, "timezone");
    } else if (is(i, "names")) {
      add(SessionStateKind::set, effect, "client_encoding");
    } else if (reset && is(i, "all")) {
      out_.cleanup.reset_all = true;
      add(SessionStateKind::set, effect, "all");
    } else {
      // SET a.b = 1: the name may be dotted.
      std::string name = detail_at(i);
      while (i + 2 < tokens_->size() && (*tokens_)[i + 1].text == ".") {
        name += "." + detail_at(i + 2);
        i += 2;
      }
      add(SessionStateKind::set, effect, name);
    }
  }

  // What may be anywhere: CREATE TEMP, INTO TEMP, pg_temp names, function calls.
  void anywhere(const std::vector<SqlToken>& t) {
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i].kind != SqlTokenKind::word) continue;
      const std::string w = to_lower(t[i].text);
      if ((w == "temp" || w == "temporary") && i > 0 &&
          (is(i - 1, "create") || is(i - 1, "global") || is(i - 1, "local") ||
           is(i - 1, "replace") || is(i - 1, "into"))) {
        size_t n = i + 1;
        if (is(n, "table") || is(n, "view") || is(n, "sequence")) ++n;
        if (is(n, "if") && is(n + 1, "not") && is(n + 2, "exists")) n += 3;
        add(SessionStateKind::temp_object, SessionStateEffect::acquire, detail_at(n));
      } else if (w.starts_with("pg_temp") && i + 2 < t.size() && t[i + 1].text == ".") {
        add(SessionStateKind::temp_object, SessionStateEffect::acquire, detail_at(i + 2));
      } else if (i + 1 < t.size() && t[i + 1].text == "(") {
        call(i, w);
      }
    }
  }

  void call(size_t i, const std::string& name) {
    const std::vector<SqlToken>& t = *tokens_;
    const bool qualified = i > 0 && t[i - 1].text == ".";
    const bool catalog = qualified && i > 1 && iequals_keyword(t[i - 2].text, "pg_catalog");
    if (qualified && !catalog) {
      // Why i > 1: broken SQL (what reaches the lexer) may start with ".f(": then no schema
      // token precedes the dot, and t[i - 2] would read before the vector (found by
      // fuzz_session_state; a client's Query could crash the pooler).
      opaque((i > 1 ? to_lower(t[i - 2].text) : std::string()) + "." + name);
      return;
    }
    if (name == "pg_advisory_lock" || name == "pg_advisory_lock_shared" ||
        name == "pg_try_advisory_lock" || name == "pg_try_advisory_lock_shared") {
      add(SessionStateKind::advisory_lock, SessionStateEffect::acquire, name);
    } else if (name == "pg_advisory_unlock" || name == "pg_advisory_unlock_shared") {
      add(SessionStateKind::advisory_lock, SessionStateEffect::release, name);
    } else if (name == "pg_advisory_unlock_all") {
      out_.cleanup.advisory_unlock_all = true;
      add(SessionStateKind::advisory_lock, SessionStateEffect::release, name);
    } else if (name == "setseed") {
      add(SessionStateKind::seed, SessionStateEffect::acquire, name);
    } else if (name == "set_config") {
      const bool constant_name = i + 2 < t.size() && t[i + 2].kind == SqlTokenKind::string_literal;
      add(SessionStateKind::set_config, SessionStateEffect::acquire,
          constant_name ? to_lower(unquote(t[i + 2])) : std::string());
    } else if (!is_known_safe_builtin(name) && !may_be_keyword_paren(i)) {
      opaque(name);
    }
  }

  // `IN (`, `VALUES (`, `varchar(`, `INTO t (`, `AS x (` are not calls.
  bool may_be_keyword_paren(size_t i) const {
    const std::vector<SqlToken>& t = *tokens_;
    if (is_paren_keyword(to_lower(t[i].text))) return true;
    return i > 0 && t[i - 1].kind == SqlTokenKind::word &&
           is_column_list_intro(to_lower(t[i - 1].text));
  }

  StatementSpan span_;
  Classification& out_;
  const std::vector<SqlToken>* tokens_ = nullptr;
};

}  // namespace

void classify_by_lexer(std::string_view sql, StatementSpan span, Classification& out) {
  LexerVerdict verdict(span, out);
  SqlTokenizer tokenizer(sql);
  SqlToken token;
  std::vector<SqlToken> statement;
  while (tokenizer.next(token)) {
    if (token.kind == SqlTokenKind::punct && token.text == ";") {
      verdict.statement(statement);
      statement.clear();
    } else {
      statement.push_back(token);
    }
  }
  verdict.statement(statement);
}

}  // namespace pgsluice::protocol::session_state_detail
