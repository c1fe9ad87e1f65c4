// The public entry points of the session-state classifier: classify_sql (prefilter, then
// libpg_query, then the lexer for what does not parse), the fingerprint for reports, the compact
// verdict string, and the per-thread verdict cache.
#include "pgsluice/protocol/session_state.h"

#include <functional>

#include "pg_query_library.h"
#include "pgsluice/protocol/sql_lexer.h"
#include "session_state_internal.h"

namespace pgsluice::protocol {

using session_state_detail::classify_by_lexer;
using session_state_detail::classify_parsed;
using session_state_detail::Scope;

std::string_view to_string(SessionStateKind kind) {
  switch (kind) {
    case SessionStateKind::set:
      return "set";
    case SessionStateKind::set_config:
      return "set_config";
    case SessionStateKind::role:
      return "role";
    case SessionStateKind::advisory_lock:
      return "advisory_lock";
    case SessionStateKind::listen:
      return "listen";
    case SessionStateKind::prepare:
      return "prepare";
    case SessionStateKind::hold_cursor:
      return "hold_cursor";
    case SessionStateKind::temp_object:
      return "temp_object";
    case SessionStateKind::load:
      return "load";
    case SessionStateKind::seed:
      return "seed";
    case SessionStateKind::currval:
      return "currval";
  }
  return "unknown";
}

std::string_view to_string(Certainty certainty) {
  switch (certainty) {
    case Certainty::definite:
      return "definite";
    case Certainty::possible:
      return "possible";
  }
  return "unknown";
}

std::string_view to_string(SessionStateEffect effect) {
  switch (effect) {
    case SessionStateEffect::acquire:
      return "acquire";
    case SessionStateEffect::release:
      return "release";
    case SessionStateEffect::use:
      return "use";
  }
  return "unknown";
}

std::string_view to_string(VerdictSource source) {
  switch (source) {
    case VerdictSource::prefilter:
      return "prefilter";
    case VerdictSource::parser:
      return "parser";
    case VerdictSource::lexer_fallback:
      return "lexer_fallback";
  }
  return "unknown";
}

bool SessionCleanup::any() const {
  return discard_all || discard_temp || discard_plans || discard_sequences || reset_all ||
         unlisten_all || advisory_unlock_all || deallocate_all || close_all;
}

bool SessionCleanup::clears(SessionStateKind kind) const {
  // DISCARD ALL = SET SESSION AUTHORIZATION DEFAULT; RESET ALL; DEALLOCATE ALL; CLOSE ALL;
  // UNLISTEN *; SELECT pg_advisory_unlock_all(); DISCARD PLANS; DISCARD TEMP; DISCARD SEQUENCES.
  if (discard_all) return kind != SessionStateKind::load && kind != SessionStateKind::seed;
  switch (kind) {
    case SessionStateKind::set:
    case SessionStateKind::set_config:
      return reset_all;
    case SessionStateKind::role:
      // role and session_authorization are GUC_NO_RESET_ALL: RESET ALL leaves them.
      return false;
    case SessionStateKind::advisory_lock:
      return advisory_unlock_all;
    case SessionStateKind::listen:
      return unlisten_all;
    case SessionStateKind::prepare:
      return deallocate_all;
    case SessionStateKind::hold_cursor:
      return close_all;
    case SessionStateKind::temp_object:
      return discard_temp;
    case SessionStateKind::load:
      return false;  // a loaded library stays until the backend exits
    case SessionStateKind::seed:
      return false;  // nothing resets the seed: the sequence stays the seeded one
    case SessionStateKind::currval:
      return discard_sequences;
  }
  return false;
}

bool Classification::has_definite() const {
  for (const SessionStateFinding& f : findings) {
    if (f.certainty == Certainty::definite) return true;
  }
  return false;
}

std::string describe(const Classification& c) {
  std::string out;
  auto sep = [&] {
    if (!out.empty()) out += ", ";
  };
  for (const SessionStateFinding& f : c.findings) {
    sep();
    if (f.certainty == Certainty::possible) out += '?';
    switch (f.effect) {
      case SessionStateEffect::acquire:
        break;
      case SessionStateEffect::release:
        out += '-';
        break;
      case SessionStateEffect::use:
        out += '~';
        break;
    }
    out += to_string(f.kind);
    out += ':';
    out += f.detail;
    if (f.lexer_only) out += "@lexer";
  }
  for (const OpaqueCall& call : c.opaque_calls) {
    sep();
    out += "opaque:";
    out += call.name;
    if (call.lexer_only) out += "@lexer";
  }
  const std::pair<bool, std::string_view> cleanups[] = {
      {c.cleanup.discard_all, "discard_all"},
      {c.cleanup.discard_temp, "discard_temp"},
      {c.cleanup.discard_plans, "discard_plans"},
      {c.cleanup.discard_sequences, "discard_sequences"},
      {c.cleanup.reset_all, "reset_all"},
      {c.cleanup.unlisten_all, "unlisten_all"},
      {c.cleanup.advisory_unlock_all, "advisory_unlock_all"},
      {c.cleanup.deallocate_all, "deallocate_all"},
      {c.cleanup.close_all, "close_all"},
  };
  for (const auto& [on, name] : cleanups) {
    if (!on) continue;
    sep();
    out += "clean:";
    out += name;
  }
  return out;
}

Classification classify_sql(std::string_view sql, Prefilter prefilter) {
  Classification out;
  if (prefilter == Prefilter::use && !may_change_session_state(sql)) return out;
  out.source = VerdictSource::parser;
  if (classify_parsed(sql, Scope{}, out)) return out;

  // libpg_query refuses the whole string when one statement does not parse. Split it with the
  // scanner (which knows nothing of the grammar) and give each piece its own chance, so that one
  // statement in newer syntax does not blind us to a plain SET beside it.
  const std::string text(sql);
  PgQuerySplitResult split = pg_query_library::split_with_scanner(text.c_str());
  bool any_fallback = false;
  if (split.error == nullptr) {
    for (int i = 0; i < split.n_stmts; ++i) {
      const auto offset = static_cast<size_t>(split.stmts[i]->stmt_location);
      const auto length = static_cast<size_t>(split.stmts[i]->stmt_len);
      if (offset > sql.size() || length > sql.size() - offset) continue;
      const std::string_view piece = sql.substr(offset, length);
      Scope scope;
      scope.base_offset = offset;
      if (!classify_parsed(piece, scope, out)) {
        classify_by_lexer(piece,
                          session_state_detail::trim_span(sql, StatementSpan{offset, length}), out);
        any_fallback = true;
      }
    }
  } else {
    // Not even the scanner could read it (an unterminated literal): the server will refuse it,
    // but the lexer still reports what it would have done.
    classify_by_lexer(sql, StatementSpan{0, sql.size()}, out);
    any_fallback = true;
  }
  pg_query_library::free_split_result(split);
  if (any_fallback) out.source = VerdictSource::lexer_fallback;
  return out;
}

Classification classify_function_body(const FunctionDefinition& f) {
  Classification out;
  out.source = VerdictSource::parser;
  const StatementSpan whole{0, f.body.size()};
  auto opaque = [&](std::string why) {
    out.opaque_calls.push_back(OpaqueCall{.name = "function (" + why + ")", .span = whole});
  };
  const std::string language = session_state_detail::to_lower(f.language);
  if (language == "sql") {
    if (session_state_detail::trim_span(f.body, whole).length == 0) {
      opaque("SQL body not in prosrc");
      return out;
    }
    // Prefilter::use: a body the lexer clears has nothing to parse.
    return classify_sql(f.body);
  }
  if (language != "plpgsql") {
    opaque("language " + std::string(f.language));
    return out;
  }
  std::string wrapper = "CREATE ";
  wrapper += f.result.empty() ? "PROCEDURE" : "FUNCTION";
  wrapper += " pg_temp.pgsluice_f(";
  wrapper += f.arguments;
  wrapper += ")";
  if (!f.result.empty()) {
    wrapper += " RETURNS ";
    wrapper += f.result;
  }
  wrapper += " LANGUAGE plpgsql AS ";
  wrapper += session_state_detail::dollar_quote(f.body);
  if (!session_state_detail::classify_plpgsql_function(wrapper, whole, out)) {
    opaque("body not analysed");
  }
  return out;
}

namespace {

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 14695981039346656037ULL;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

// The lexer's normalization: literals and numbers become $n, words are lowercased, tokens are
// joined by one space (no space around punctuation), comments disappear.
std::string normalize_by_lexer(std::string_view sql) {
  std::string out;
  out.reserve(sql.size());
  SqlTokenizer tokenizer(sql);
  SqlToken token;
  int n = 0;
  bool prev_punct = true;
  while (tokenizer.next(token)) {
    const bool punct = token.kind == SqlTokenKind::punct;
    if (!out.empty() && !punct && !prev_punct) out += ' ';
    switch (token.kind) {
      case SqlTokenKind::string_literal:
      case SqlTokenKind::dollar_string:
      case SqlTokenKind::number:
        out += '$';
        out += std::to_string(++n);
        break;
      case SqlTokenKind::word:
        out += session_state_detail::to_lower(token.text);
        break;
      case SqlTokenKind::quoted_identifier:
      case SqlTokenKind::parameter:
      case SqlTokenKind::punct:
        out += token.text;
        break;
    }
    prev_punct = punct;
  }
  return out;
}

}  // namespace

StatementFingerprint fingerprint_sql(std::string_view sql) {
  StatementFingerprint out;
  const std::string text(sql);
  PgQueryNormalizeResult normalized = pg_query_library::normalize(text.c_str());
  PgQueryFingerprintResult fingerprint = pg_query_library::fingerprint(text.c_str());
  if (normalized.error == nullptr && fingerprint.error == nullptr &&
      normalized.normalized_query != nullptr) {
    out.value = fingerprint.fingerprint;
    out.normalized = normalized.normalized_query;
    out.from_parser = true;
  }
  pg_query_library::free_normalize_result(normalized);
  pg_query_library::free_fingerprint_result(fingerprint);
  if (!out.from_parser) {
    out.normalized = normalize_by_lexer(sql);
    out.value = fnv1a(out.normalized);
  }
  return out;
}

SessionStateClassifier::SessionStateClassifier(size_t capacity)
    : capacity_(capacity == 0 ? 1 : capacity) {}

const Classification& SessionStateClassifier::classify(std::string_view sql) {
  // The common case: the prefilter clears it, nothing is hashed, stored or parsed.
  static const Classification kNothing;
  if (!may_change_session_state(sql)) {
    ++prefiltered_;
    return kNothing;
  }
  const uint64_t hash = std::hash<std::string_view>{}(sql);
  if (auto it = index_.find(hash); it != index_.end()) {
    if (it->second->sql == sql) {
      ++hits_;
      entries_.splice(entries_.begin(), entries_, it->second);
      return entries_.front().verdict;
    }
    entries_.erase(it->second);  // a collision: the newer text takes the slot
    index_.erase(it);
  }
  ++misses_;
  if (entries_.size() >= capacity_) {
    index_.erase(entries_.back().hash);
    entries_.pop_back();
  }
  Entry entry;
  entry.hash = hash;
  entry.sql = std::string(sql);
  entry.verdict = classify_sql(sql, Prefilter::skip);
  entries_.push_front(std::move(entry));
  index_.emplace(hash, entries_.begin());
  return entries_.front().verdict;
}

void SessionStateClassifier::clear() {
  entries_.clear();
  index_.clear();
}

}  // namespace pgsluice::protocol
