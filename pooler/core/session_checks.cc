// Session-state checks on the forwarding path, the verify findings and long holds: where the
// session_state/ logic meets clients, servers and the worker (see session_checks.h), and the
// client's side of a verdict (a refusal in place of the statement, the wait for a pin).
#include "pooler/core/session_checks.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "pgsluice/protocol/frontend.h"
#include "pgsluice/protocol/function_ddl.h"
#include "pgsluice/protocol/message_types.h"
#include "pgsluice/protocol/session_state.h"
#include "pgsluice/protocol/sql_lexer.h"
#include "pgsluice/protocol/writer.h"
#include "pooler/base/sqlstate.h"
#include "pooler/base/text.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/server.h"
#include "pooler/core/stats.h"
#include "pooler/core/worker.h"
#include "pooler/net/forwarder.h"
#include "pooler/session_state/findings.h"
#include "pooler/session_state/function_verdicts.h"
#include "pooler/session_state/params.h"
#include "pooler/session_state/set_literal.h"
#include "pooler/session_state/sql_prepared.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;
namespace fe = pgsluice::protocol::frontend;

namespace {

std::string_view hint_for(pp::SessionStateKind kind) {
  return finding_hint(pp::to_string(kind));
}

// The DO body's dollar-quote tag: one that neither text contains, so that the message shows
// the client's statement as it was sent ($1, $$…$$) and still cannot end the body early.
std::string body_tag(std::string_view message, std::string_view hint) {
  std::string tag = "$pgsluice$";
  for (int n = 0;
       message.find(tag) != std::string_view::npos || hint.find(tag) != std::string_view::npos;
       ++n) {
    tag = fmt::format("$pgsluice{}$", n);
  }
  return tag;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view statement_text(std::string_view sql, const pp::StatementSpan& span) {
  if (span.offset >= sql.size()) return sql;
  return sql.substr(span.offset, span.length);
}

FindingEvent query_finding(const Client& client, std::string_view kind, std::string_view detail,
                           std::string_view certainty, SessionAction action,
                           std::string_view statement) {
  const std::string* app = client.tracked_parameters().get("application_name");
  return FindingEvent{.kind = kind,
                      .detail = detail,
                      .certainty = certainty,
                      .action = to_string(action),
                      .database = client.database(),
                      .user = client.user(),
                      .application_name = app != nullptr ? std::string_view(*app) : "",
                      .client_addr = client.peer(),
                      .source = "query",
                      .statement = statement};
}

void record_event(Worker& worker, std::string_view who, const FindingEvent& event) {
  if (std::optional<std::string> sample = worker.findings().record(event, unix_now())) {
    spdlog::warn("{} session state: {} {} ({}), action {}: {}", who, event.kind, event.detail,
                 event.certainty, event.action, *sample);
  }
}

void record_query_finding(Worker& worker, const Client& client, const pp::SessionStateFinding& f,
                          SessionAction action, std::string_view statement) {
  FindingEvent event = query_finding(client, pp::to_string(f.kind), f.detail,
                                     pp::to_string(f.certainty), action, statement);
  event.uses_earlier_state = f.effect == pp::SessionStateEffect::use;
  record_event(worker, client.log_id(), event);
}

// The opaque calls of a statement. A call of a function that does not exist changes nothing: it
// fails. The SQL text cannot tell such a name from a user function (in a schema on the client's
// search_path, or one created a moment ago), so the server's answer decides: a single-statement
// Query, sent when the server owes nothing else (so that its first reply is this Query's), waits
// for it on the server (Server::defer_call), and failed_before_running() (findings.h) drops the
// calls of a statement PostgreSQL refused before running any of it. The same text once the
// function exists runs, and is a finding then. A Parse, a Query of several statements (an error
// in the second leaves the first one run) or one behind other requests is recorded at once.
void record_opaque_calls(Worker& worker, const Client& client, Server& server,
                         const SessionPolicy& policy, const pp::Classification& verdict,
                         std::string_view sql, bool deferrable, uint64_t judged) {
  const SessionAction action = policy.opaque_action();
  if (action == SessionAction::off) return;
  const bool defer = deferrable && verdict.source == pp::VerdictSource::parser &&
                     verdict.statements == 1 && server.owes_nothing();
  for (size_t i = 0; i < verdict.opaque_calls.size(); ++i) {
    if (i < 64 && (judged & (uint64_t{1} << i)) != 0) continue;
    const pp::OpaqueCall& call = verdict.opaque_calls[i];
    const FindingEvent event = query_finding(client, "opaque_call", call.name, "possible", action,
                                             statement_text(sql, call.span));
    if (defer) {
      server.defer_call(OwnedFindingEvent(event));
    } else {
      record_event(worker, client.log_id(), event);
    }
  }
}

// Under opaque_call:reset (the transaction-mode default) a server on which an opaque call runs
// is verified at its release, strictly (SessionVerifier::note_opaque_call), and cleaned with
// DISCARD ALL when it holds what nobody tracked. At every execution, a Bind of a prepared
// statement included: each may leave state on another server. A call PostgreSQL refuses (a
// function that does not exist) costs a check all the same: conservative, and rare.
// A function whose every overload the catalog showed to change no session state
// (function_verdicts.h) costs nothing: no check, no finding. The calls judged so are returned as
// bits (call i: bit i), which record_opaque_calls skips.
uint64_t note_opaque_calls(Worker& worker, Server& server, const SessionPolicy& policy,
                           const pp::Classification& verdict) {
  if (policy.opaque_action() != SessionAction::reset) return 0;
  uint64_t judged = 0;
  for (size_t i = 0; i < verdict.opaque_calls.size(); ++i) {
    const pp::OpaqueCall& call = verdict.opaque_calls[i];
    if (!call.lexer_only && names_a_function(call.name)) {
      const std::optional<FunctionJudgement> known = FunctionVerdictCache::process().find(
          server.function_verdict_key(call.name), worker.now_ms());
      // Not after a SET in the same transaction: the verdict was keyed by the search_path the
      // pooler believed, which that SET may have changed.
      if (known && !server.settings_changing()) {
        if (known->verdict == FunctionVerdict::no_state) {
          if (i < 64) judged |= uint64_t{1} << i;
          continue;
        }
        if (known->verdict == FunctionVerdict::resets_settings) {
          // What the body sets is reset at the release, as the reset action does; the next
          // link applies the client's kept value again (forget_reset_settings).
          for (const std::string& name : known->settings) {
            pp::SessionStateFinding f;
            f.kind = pp::SessionStateKind::set;
            f.detail = name;
            server.mark_dirty(f);
          }
          continue;
        }
      }
      if (!known) server.look_up_function(call.name);
    }
    server.verifier().note_opaque_call(call.name);
  }
  return judged;
}

void record_server_finding(Worker& worker, Server& server, std::string_view kind,
                           std::string_view detail, std::string_view action,
                           std::string_view what_log) {
  const SessionVerifier& v = server.verifier();
  FindingEvent event{.kind = kind,
                     .detail = detail,
                     .certainty = "definite",
                     .action = action,
                     .database = server.pool().database().name,
                     .user = server.pool().credentials().user,
                     .application_name = v.last_application_name(),
                     .client_addr = v.last_client_addr(),
                     .source = "server",
                     .statement = ""};
  if (worker.findings().record(event, unix_now())) {
    spdlog::warn("{} session state: {} {} ({}), action {}", server.log_id(), kind, detail, what_log,
                 action);
  }
}

// The refusal of `f`'s statement: under reject (`pool` null), or because pinning a server for
// it would take one of the `reserve` servers of `pool` that are kept unpinned.
void refusal_texts(std::string_view sql, const pp::SessionStateFinding& f, Pool* pool, int reserve,
                   std::string& message, std::string& hint) {
  std::string what = std::string(pp::to_string(f.kind));
  if (!f.detail.empty()) what += " " + f.detail;
  hint = std::string(hint_for(f.kind));
  if (pool == nullptr) {
    message = fmt::format(
        "pgsluice refused \"{}\": session state ({}) would outlive the transaction on a shared "
        "server in transaction pooling mode",
        statement_text(sql, f.span), what);
    return;
  }
  reserve = std::min(reserve, pool->pool_size());
  message = fmt::format(
      "pgsluice refused \"{}\": session state ({}) would pin a server of pool {}/{}, whose "
      "last {} unpinned server{} kept for other clients (session_state_pin_reserve)",
      statement_text(sql, f.span), what, pool->database().name, pool->credentials().user, reserve,
      reserve == 1 ? " is" : "s are");
  // LISTEN's and SQL PREPARE's hints name session pooling already.
  if (hint.find("session-mode pool") == std::string::npos) {
    hint += " Or use a session-mode pool for this user.";
  }
}

}  // namespace

std::string rejection_statement(std::string_view message, std::string_view hint) {
  const std::string tag = body_tag(message, hint);
  return "DO " + tag +
         "BEGIN RAISE EXCEPTION USING ERRCODE = '0A000', MESSAGE = " + quote_literal(message) +
         ", HINT = " + quote_literal(hint) + "; END" + tag;
}

namespace {

// A SQL PREPARE is kept by renaming it in the client's text (sql_prepared.h): one the pooler
// cannot rename (a named Parse, a text libpg_query cannot read, no statement rewriting:
// max_prepared_statements = 0) pins the client to the server it ran on instead.
SessionAction keep_or_pin(SessionAction action, const pp::SessionStateFinding& f,
                          const pp::Classification& verdict, bool renamable) {
  if (action != SessionAction::keep || f.kind != pp::SessionStateKind::prepare ||
      f.effect != pp::SessionStateEffect::acquire) {
    return action;
  }
  return renamable && sql_prepare_renamable(verdict) ? action : SessionAction::pin;
}

// What a kept SET gives its setting, when the pool may know its read-back already
// (set_literal.h): a plain SET, alone in a Query, sent to a server that is idle and owes the
// client nothing (so that nothing before it, a BEGIN say, can roll it back).
std::optional<std::string> committed_set_literal(const Server& server,
                                                 const pp::Classification& verdict,
                                                 const pp::SessionStateFinding& f,
                                                 std::string_view sql, bool is_query) {
  if (!is_query || verdict.source != pp::VerdictSource::parser || verdict.statements != 1 ||
      f.kind != pp::SessionStateKind::set || f.effect != pp::SessionStateEffect::acquire ||
      f.certainty != pp::Certainty::definite || f.lexer_only || !server.owes_client_nothing() ||
      server.transaction_status() != pp::TransactionStatus::idle ||
      !is_deterministic_setting(f.detail)) {
    return std::nullopt;
  }
  return simple_set_literal(statement_text(sql, f.span), f.detail);
}

// A finding whose statement may or may not take what it names, as the server decides at run
// time: pg_try_advisory_lock answers false when another session holds the lock.
bool acquires_only_maybe(const pp::SessionStateFinding& f) {
  return f.kind == pp::SessionStateKind::advisory_lock &&
         f.detail.find("pg_try_advisory") != std::string::npos;
}

// A statement whose pin the reserve refuses waits for one instead, where nothing is owed (at
// the start of a transaction of its own, which gives its server back meanwhile, or between
// statements of a transaction block, which keeps it) and for at most query_wait_timeout
// (2 minutes when that is 0): a direct backend would run it.
bool may_wait_for_pin(Worker& worker, const Client& client, const Server& server) {
  if (!server.owes_client_nothing() ||
      server.transaction_status() == pp::TransactionStatus::failed) {
    return false;
  }
  // A pool no larger than its reserve never has a server to pin: waiting would only delay the
  // refusal by query_wait_timeout (a pool of 1 held every such statement for two minutes).
  if (server.pool().pool_size() <= worker.settings().session_state_pin_reserve) return false;
  if (client.wait.pin_since_ms == 0) return true;
  auto limit = static_cast<uint64_t>(
      worker.config().query_wait_timeout_for(client.pool()->database(), client.user()).count());
  if (limit == 0) limit = 120'000;
  return worker.now_ms() < client.wait.pin_since_ms + limit;
}

// Pin without starving: a pin that would take one of the pool's reserved servers refuses the
// statement instead (false), so that other clients are still served.
bool pin_for(const Client& client, Server& server, const pp::SessionStateFinding& f) {
  std::string why(pp::to_string(f.kind));
  if (!f.detail.empty()) why.append(" ").append(f.detail);
  if (server.pin(why)) {
    spdlog::info("{} pinned to {} ({}, under the pin action)", client.log_id(), server.log_id(),
                 server.pinned_for());
    return true;
  }
  // pg_try_advisory_lock: whether it takes anything is the server's answer. Refusing it would
  // refuse a `false` PostgreSQL gives (a second instance's migration lock); it runs, and the pin
  // check at the end of its transaction keeps the pin only when the lock was granted.
  if (!acquires_only_maybe(f) || !server.pin(std::move(why), /*past_reserve=*/true)) return false;
  server.note_pin_may_end();
  spdlog::info("{} pinned to {} past the reserve until the server says whether {} took a lock",
               client.log_id(), server.log_id(), f.detail);
  return true;
}

// One statement text to check, and where it came from.
struct CheckedStatement {
  std::string_view sql;
  // What the prefilter said of `sql`. A flagged statement, whatever it is, may change what a
  // kept SET before it gave (a function, RESET, another SET): their literals are forgotten.
  bool flagged = false;
  // At its Query or Parse: the findings are counted and logged once per message, not at the
  // Binds that execute a prepared statement again.
  bool record = false;
  bool is_query = false;   // a Query (a SET in it may commit alone: set_literal.h)
  bool renamable = false;  // a Query or an unnamed Parse: SQL PREPARE in it can be kept
};

// What a statement's cleanups (DISCARD ALL, UNLISTEN *, …) mean for the client's server.
void note_cleanups(const Client& client, Server& server, const SessionPolicy& policy,
                   const pp::Classification& verdict) {
  if (verdict.cleanup.any() && server.pinned()) server.note_pin_may_end();
  // RESET ALL is a finding (set:all); DISCARD ALL only a cleanup. Either way the settings the
  // pooler keeps for the client are read back after the transaction.
  if (verdict.cleanup.discard_all &&
      policy.action_for(pp::SessionStateKind::set) == SessionAction::keep) {
    server.keep_settings_discarded();
  }
  if (verdict.cleanup.discard_all &&
      policy.action_for(pp::SessionStateKind::listen) == SessionAction::relay) {
    server.relay_listen_discarded();
  }
  // The client's channels go onto the server first when they can (listen_channels.h), so that
  // the read-back after the transaction is exactly the client's set.
  if (client.relays_listen()) server.sync_listen_channels(client.listen_channels());
}

// The checks of one statement text (CheckedStatement).
SessionCheckResult check_sql(Worker& worker, const Client& client, Server& server,
                             const SessionPolicy& policy, const CheckedStatement& statement,
                             std::string& message_out, std::string& hint_out) {
  const std::string_view sql = statement.sql;
  const bool record = statement.record;
  // The common case ends here, without allocating.
  if (!statement.flagged) return SessionCheckResult::forward;
  server.forget_kept_literals();
  const pp::Classification& verdict = worker.classifier().classify(sql);
  if (verdict.empty()) return SessionCheckResult::forward;

  const pp::SessionStateFinding* rejected = nullptr;
  const pp::SessionStateFinding* pin_refused = nullptr;
  // Recorded once the statement's outcome is known: one that waits for a pin is checked again
  // at each retry (every janitor round), and counted once, when it runs or is refused at last.
  std::vector<std::pair<const pp::SessionStateFinding*, SessionAction>> recorded;
  for (const pp::SessionStateFinding& f : verdict.findings) {
    // Inside a transaction block an earlier statement on this server may have advanced the
    // sequence (BEGIN; INSERT …; SELECT lastval()): only a transaction of its own is certain.
    if (f.kind == pp::SessionStateKind::currval) {
      if (server.transaction_status() != pp::TransactionStatus::idle) continue;
      if (server.owes_client_nothing()) server.forget_other_clients_sequences(client);
    }
    // Releasing state (RESET x, UNLISTEN, pg_advisory_unlock) never leaks anything; a kept
    // setting that is reset is read back like one that is set.
    if (f.effect == pp::SessionStateEffect::release) {
      if (policy.action_for(f.kind) == SessionAction::keep) server.keep_setting(f);
      if (policy.action_for(f.kind) == SessionAction::relay) server.relay_listen(f);
      if (server.pinned()) server.note_pin_may_end();
      continue;
    }
    SessionAction action = policy.action_for(f.kind);
    if (action == SessionAction::off) continue;
    if (action == SessionAction::reject && f.certainty == pp::Certainty::possible) {
      action = SessionAction::warn;  // refuse only what is certain; warn on what may be
    }
    // A setting is kept by reading it back, which needs its name: set_config(name, …) with a
    // computed name is cleaned after the transaction instead.
    if (action == SessionAction::keep && f.detail.empty()) action = SessionAction::reset;
    action = keep_or_pin(action, f, verdict, statement.renamable && server.rewrites_statements());
    // Pin without starving: a pin that would take one of the pool's reserved servers refuses
    // the statement instead, so that other clients are still served.
    if (action == SessionAction::pin && !server.pinned() && !pin_for(client, server, f)) {
      action = SessionAction::reject;
      if (pin_refused == nullptr) pin_refused = &f;
    }
    if (record) recorded.emplace_back(&f, action);
    // Forwarded: state the server may now carry, which session_state_verify does not call hidden.
    if (action != SessionAction::reject) server.note_session_state(f);
    switch (action) {
      case SessionAction::reject:
        if (rejected == nullptr) rejected = &f;
        break;
      case SessionAction::pin:
      case SessionAction::reset:
        server.mark_dirty(f);
        break;
      case SessionAction::keep:  // a prepare finding: none (renamed: client_sql_prepare.cc)
        server.keep_setting(f, committed_set_literal(server, verdict, f, sql, statement.is_query));
        break;
      case SessionAction::relay:
        server.relay_listen(f);
        break;
      case SessionAction::warn:
      case SessionAction::off:
        break;
    }
  }
  note_cleanups(client, server, policy, verdict);
  // A function the pooler cannot see into may change anything: "possible", counted and shown;
  // the server's own word after the release is what can confirm it.
  const uint64_t judged = note_opaque_calls(worker, server, policy, verdict);
  // At a Query or Parse; a Bind of a prepared statement (not recorded) is refused as before.
  if (pin_refused != nullptr && record && may_wait_for_pin(worker, client, server)) {
    return SessionCheckResult::wait_for_pin;
  }
  for (const auto& [f, action] : recorded) {
    record_query_finding(worker, client, *f, action, statement_text(sql, f->span));
  }
  if (record) {
    record_opaque_calls(worker, client, server, policy, verdict, sql, statement.is_query, judged);
  }
  if (pin_refused != nullptr) {
    refusal_texts(sql, *pin_refused, &server.pool(), worker.settings().session_state_pin_reserve,
                  message_out, hint_out);
    server.note_pin_may_end();  // another finding of the statement may have pinned it
    return SessionCheckResult::refused;
  }
  if (rejected != nullptr) {
    refusal_texts(sql, *rejected, nullptr, 0, message_out, hint_out);
    return SessionCheckResult::refused;
  }
  return SessionCheckResult::forward;
}

}  // namespace

SessionCheckResult check_session_state(Worker& worker, const Client& client, Server& server,
                                       const SessionPolicy& policy, PrefilterMemo& prefilter,
                                       const pp::Message& message, std::string& message_out,
                                       std::string& hint_out) {
  std::string_view sql;
  bool renamable = true;  // a Query, or an unnamed Parse (client_sql_prepare.cc)
  if (message.type == fe::kQuery) {
    auto q = pp::parse_query(message.body);
    if (!q) return SessionCheckResult::forward;
    sql = q.value.sql;
  } else {
    auto p = pp::parse_parse(message.body);
    if (!p) return SessionCheckResult::forward;
    sql = p.value.query;
    renamable = p.value.statement.empty();
  }
  // DDL that may change what a function name resolves to, or its body, through this pooler:
  // every verdict goes (function_verdicts.h). The first byte decides for all other SQL.
  if (pp::function_ddl(sql)) FunctionVerdictCache::process().clear();
  const CheckedStatement statement{.sql = sql,
                                   .flagged = prefilter.may_change_session_state(sql),
                                   .record = true,
                                   .is_query = message.type == fe::kQuery,
                                   .renamable = renamable};
  return check_sql(worker, client, server, policy, statement, message_out, hint_out);
}

SessionCheckResult check_bound_statement(Worker& worker, const Client& client, Server& server,
                                         const SessionPolicy& policy, std::string_view sql,
                                         std::string& message_out, std::string& hint_out) {
  // A Bind of a prepared statement: its Parse recorded the findings already.
  const CheckedStatement statement{.sql = sql,
                                   .flagged = pp::may_change_session_state(sql),
                                   .record = false,
                                   .is_query = false,
                                   .renamable = false};
  return check_sql(worker, client, server, policy, statement, message_out, hint_out);
}

void settle_deferred_calls(Worker& worker, std::vector<OwnedFindingEvent>& calls,
                           const std::string& who, const pp::Message* first_reply) {
  const bool never_ran = first_reply != nullptr &&
                         first_reply->type == pp::backend::kErrorResponse &&
                         failed_before_running(first_reply->body);
  if (!never_ran) {
    for (const OwnedFindingEvent& call : calls) record_event(worker, who, call.view());
  }
  calls.clear();
}

void note_last_client(SessionVerifier& verifier, const Client& client) {
  const std::string* app = client.tracked_parameters().get("application_name");
  verifier.note_client(app != nullptr ? std::string_view(*app) : std::string_view(), client.peer());
}

void record_hidden_findings(Worker& worker, Server& server,
                            const std::vector<VerifyDifference>& differences) {
  const std::string& caused_by = server.verifier().caused_by();
  for (const VerifyDifference& d : differences) {
    if (caused_by.empty()) {
      record_server_finding(worker, server, "hidden", fmt::format("{}: {}", d.kind, d.detail),
                            "reset",
                            "found by session_state_verify where the SQL checks saw nothing");
    } else {
      // The opaque calls that ran on the server since its last check: the likely cause.
      record_server_finding(worker, server, "hidden",
                            fmt::format("{}: {} (after {})", d.kind, d.detail, caused_by), "reset",
                            "found on the server after a call of a function the SQL checks "
                            "cannot see into");
    }
  }
}

void check_long_holds(Worker& worker) {
  const auto limit = worker.settings().session_state_long_hold;
  if (limit.count() <= 0) return;
  const uint64_t limit_us =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(limit).count());
  const uint64_t now = now_us();
  // Once a second is enough for a threshold counted in seconds; the janitor ticks faster.
  thread_local uint64_t last_check = 0;
  if (now < last_check + 1'000'000) return;
  last_check = now;
  const std::string detail = fmt::format("idle in transaction over {}s", limit_us / 1'000'000.0);
  worker.for_each_own_pool([&](Pool& pool) {
    if (!shares_servers(pool.mode())) return;
    pool.for_each_server([&](Server& s) {
      if (s.state() != Server::State::active || s.client() == nullptr) return;
      const protocol::TransactionStatus tx = s.transaction_status();
      const uint64_t start = s.timing.xact_start_us;
      // Idle in a transaction: a transaction is open and no query runs.
      if (tx == protocol::TransactionStatus::idle || start == 0 || s.timing.query_start_us != 0)
        return;
      if (now < start + limit_us) return;
      SessionVerifier& v = s.verifier();
      if (v.long_hold_counted_xact == start) return;
      v.long_hold_counted_xact = start;
      note_last_client(v, *s.client());
      record_server_finding(worker, s, "long_hold", detail, "warn",
                            "a client holds its server in an open transaction");
    });
  });
}

// ------------------------------------------------------------------------------------------------
// Where a check's verdict meets the client's Query or Parse (Client members): a refusal written in
// place of the statement, or a wait for a pin that the pool's reserve refuses now (issue 42):
// the client gives its server back (or keeps it, in a transaction block) and its pool asks
// again at each maintenance round.

bool Client::refused_by_session_checks(const pp::Message& message, Forwarder& batch,
                                       std::string& out) {
  std::string text, hint;
  const SessionCheckResult result = check_session_state(worker_, *this, *server_, session_policy_,
                                                        prefilter_, message, text, hint);
  if (result == SessionCheckResult::forward) {
    if (wait.pin_since_ms != 0) wait.pin_since_ms = 0;  // not written (a cache line) every time
    return false;
  }
  batch.flush(&out);
  if (result == SessionCheckResult::wait_for_pin) {
    // Read again when a pin may be free: nothing of it went to the server.
    channel_.input().give_back(message);
    server_->channel().flush();
    wait_for_pin();
    return true;
  }
  // A refused unnamed Parse ends the unnamed statement as its error would (a Query: as sent).
  if (message.type == fe::kParse && pp::parse_parse(message.body).value.statement.empty()) {
    forget_unnamed_statement();
  }
  if (message.type == fe::kParse && server_->rewrites_statements()) {
    refuse_until_sync(sqlstate::kFeatureNotSupported, text, hint);
    server_->note_client_message(message.type, /*queue_reply=*/false);
  } else {
    write_refusal(message, text, hint, out);
    server_->note_client_message(message.type);
  }
  return true;
}

namespace {
// Session mode's gate (below), a few instructions for the usual statement: one that starts with
// RESET, SET or DISCARD, or that holds more than one statement (or ends in ';'), may reset a
// setting and goes on to the prefilter; any other single statement cannot.
bool may_reset_a_setting(std::string_view sql) {
  const size_t start = sql.find_first_not_of(" \t\r\n\f\v");
  if (start == std::string_view::npos) return false;
  size_t end = start;
  while (end < sql.size() && ascii_lower(sql[end]) >= 'a' && ascii_lower(sql[end]) <= 'z') ++end;
  const std::string_view word = sql.substr(start, end - start);
  return iequals(word, "reset") || iequals(word, "set") || iequals(word, "discard") ||
         sql.find(';') != std::string_view::npos;
}
}  // namespace

void Client::note_session_mode_resets(const pp::Message& message) {
  // Session mode: the guard does not look at the statements of a client that keeps its server
  // for its whole session, but for one thing a pooled server cannot give by itself. A RESET of
  // a reported setting the client gave at startup (RESET name, SET name TO DEFAULT, RESET ALL,
  // DISCARD ALL) goes back to the startup value on a direct connection; the pooler applied that
  // value with SET at the link, so PostgreSQL goes back to its own default instead. The
  // statement's settings are noted as `keep` notes them, and the end of its transaction puts
  // the startup value back (Server::restore_startup_reported, from inspect_reply).
  if (pool_->mode() != PoolMode::session) return;
  std::string_view sql;
  if (message.type == fe::kQuery) {
    auto q = pp::parse_query(message.body);
    if (!q) return;
    sql = q.value.sql;
  } else {
    auto p = pp::parse_parse(message.body);
    if (!p) return;
    sql = p.value.query;
  }
  if (!may_reset_a_setting(sql) || !prefilter_.may_change_session_state(sql)) return;
  const pp::Classification& verdict = worker_.classifier().classify(sql);
  for (const pp::SessionStateFinding& f : verdict.findings) {
    if (f.kind == pp::SessionStateKind::set) server_->keep_setting(f);
  }
  if (verdict.cleanup.discard_all) server_->keep_settings_discarded();
  // Only the reported ones: the others are the session's own, and the server's cleaning at the
  // end of the session resets them.
  server_->forget_unreported_kept_settings();
}

void Client::wait_for_pin() {
  if (wait.pin_since_ms == 0) wait.pin_since_ms = worker_.now_ms();
  spdlog::debug("{} waits for a pin (session_state_pin_reserve)", who_.log_id);
  if (server_->transaction_status() != pp::TransactionStatus::idle) {
    // In a transaction block the client keeps its server and waits on the pool's pin list.
    if (!wait.on_pin_list) pool_->wait_for_pin(*this);
    return;
  }
  // The server goes back at once (nothing was sent); once released the client queues on the
  // pool's pin list (process_regular_input), not for the next idle server.
  Server* server = server_;
  held_.for_read_back = true;
  server->release_if_nothing_owed();
}

void Client::retry_after_pin_wait() {
  if (state_ == State::waiting) {
    pool_->request_server(*this);
  } else if (state_ == State::active) {
    process_regular_input();  // still linked (a transaction block): the check runs again
  }
}

}  // namespace pgsluice
