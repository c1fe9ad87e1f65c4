// Per-function verdicts: the lookup query, the judgement of each overload's body and the
// process's cache; see function_verdicts.h.
#include "pooler/session_state/function_verdicts.h"

#include <algorithm>
#include <charconv>

#include "pgsluice/protocol/backend.h"
#include "pgsluice/protocol/session_state.h"
#include "pgsluice/protocol/sql_lexer.h"
#include "pooler/base/text.h"
#include "pooler/session_state/params.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

FunctionJudgement judge_function(const FunctionRow& row) {
  const pp::Classification c =
      pp::classify_function_body(pp::FunctionDefinition{.language = row.language,
                                                        .arguments = row.arguments,
                                                        .result = row.result,
                                                        .body = row.body});
  const FunctionJudgement unknown{FunctionVerdict::may_change, {}};
  if (c.source == pp::VerdictSource::lexer_fallback || c.calls_opaque_function() ||
      c.cleanup.any()) {
    return unknown;
  }
  // A use (currval, EXECUTE p) reads state and leaves it as it was. A setting named by a
  // constant, set or reset, is undone by a RESET of it. (A SET in a body persists even under a
  // SET clause of the same setting, PostgreSQL's documented rule, so the clause excuses
  // nothing.) Anything else, a computed set_config name included, needs the server's word.
  FunctionJudgement out;
  for (const pp::SessionStateFinding& f : c.findings) {
    if (f.effect == pp::SessionStateEffect::use) continue;
    const bool setting =
        f.kind == pp::SessionStateKind::set || f.kind == pp::SessionStateKind::set_config;
    if (!setting || f.detail.empty() || f.lexer_only || f.detail == "all") return unknown;
    out.verdict = FunctionVerdict::resets_settings;
    const std::string name = ascii_lower(f.detail);
    if (std::find(out.settings.begin(), out.settings.end(), name) == out.settings.end()) {
      out.settings.push_back(name);
    }
  }
  return out;
}

void merge_judgement(FunctionJudgement& into, const FunctionJudgement& other) {
  if (into.verdict == FunctionVerdict::may_change) return;
  if (other.verdict == FunctionVerdict::may_change) {
    into = other;
    return;
  }
  if (other.verdict == FunctionVerdict::no_state) return;
  into.verdict = FunctionVerdict::resets_settings;
  for (const std::string& name : other.settings) {
    if (std::find(into.settings.begin(), into.settings.end(), name) == into.settings.end()) {
      into.settings.push_back(name);
    }
  }
}

bool names_a_function(std::string_view name) {
  if (name.empty() || name.front() == '.' || name.back() == '.') return false;
  size_t dots = 0;
  for (char c : name) {
    if (c == '.') ++dots;
    // The descriptions of DO blocks and dynamic SQL ("DO (language plperl)", "DO: EXECUTE …").
    if (c == ' ' || c == '(' || c == ':' || c == '\0') return false;
  }
  return dots <= 1;
}

std::string function_lookup_query(const std::vector<std::string>& names) {
  // Every operator qualified: the query runs with the client's search_path.
  std::string values;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string_view name = names[i];
    const size_t dot = name.find('.');
    const std::string schema =
        dot == std::string_view::npos ? std::string("NULL") : quote_literal(name.substr(0, dot));
    const std::string_view function = dot == std::string_view::npos ? name : name.substr(dot + 1);
    if (!values.empty()) values += ", ";
    values += "(" + std::to_string(i) + ", " + quote_literal(function) + ", " + schema +
              "::pg_catalog.text)";
  }
  return "SELECT c.i, l.lanname, p.prosrc, pg_catalog.pg_get_function_arguments(p.oid), "
         "pg_catalog.pg_get_function_result(p.oid) FROM (VALUES " +
         values +
         ") AS c(i, fname, nsp) "
         "JOIN pg_catalog.pg_proc p ON p.proname OPERATOR(pg_catalog.=) c.fname::pg_catalog.name "
         "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace "
         "JOIN pg_catalog.pg_language l ON l.oid OPERATOR(pg_catalog.=) p.prolang "
         "WHERE CASE WHEN c.nsp IS NULL "
         "THEN n.nspname OPERATOR(pg_catalog.=) ANY (pg_catalog.current_schemas(true)) "
         "ELSE n.nspname OPERATOR(pg_catalog.=) c.nsp::pg_catalog.name END";
}

// --- FunctionLookup ---

void FunctionLookup::start(std::vector<std::string> names, std::string key_prefix) {
  awaiting_ = true;
  verdicts_.assign(names.size(), FunctionJudgement{});
  found_.assign(names.size(), false);
  names_ = std::move(names);
  key_prefix_ = std::move(key_prefix);
  malformed_ = false;
}

void FunctionLookup::on_row(std::string_view body) {
  auto row = pp::parse_data_row(body);
  if (!row || row.value.values.size() != 5 || !row.value.values[0] || !row.value.values[1] ||
      !row.value.values[2]) {
    malformed_ = true;
    return;
  }
  const auto& v = row.value.values;
  size_t i = 0;
  auto r = std::from_chars(v[0]->data(), v[0]->data() + v[0]->size(), i);
  if (r.ec != std::errc() || i >= names_.size()) {
    malformed_ = true;
    return;
  }
  found_[i] = true;
  if (verdicts_[i].verdict == FunctionVerdict::may_change) return;
  merge_judgement(verdicts_[i],
                  judge_function(FunctionRow{.language = std::string(*v[1]),
                                             .body = std::string(*v[2]),
                                             .arguments = std::string(v[3].value_or("")),
                                             .result = std::string(v[4].value_or(""))}));
}

void FunctionLookup::finish(uint64_t now_ms) {
  awaiting_ = false;
  if (malformed_) return;  // nothing is judged from an answer the pooler did not understand
  FunctionVerdictCache& cache = FunctionVerdictCache::process();
  for (size_t i = 0; i < names_.size(); ++i) {
    // No overload on the path: the call failed, or the name resolves elsewhere than the lookup
    // looked; either way nothing is known.
    cache.store(key_prefix_ + names_[i],
                found_[i] ? verdicts_[i] : FunctionJudgement{FunctionVerdict::may_change, {}},
                now_ms);
  }
}

std::string verdict_key_prefix(std::string_view database, std::string_view user,
                               std::string_view search_path) {
  std::string key;
  key.reserve(database.size() + user.size() + search_path.size() + 3);
  key.append(database)
      .append(1, '\0')
      .append(user)
      .append(1, '\0')
      .append(search_path)
      .append(1, '\0');
  return key;
}

// --- FunctionVerdictCache ---

FunctionVerdictCache& FunctionVerdictCache::process() {
  static FunctionVerdictCache cache;
  return cache;
}

std::optional<FunctionJudgement> FunctionVerdictCache::find(const std::string& key,
                                                            uint64_t now_ms) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  if (now_ms >= it->second.expires_ms) {
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.judgement;
}

void FunctionVerdictCache::store(const std::string& key, FunctionJudgement judgement,
                                 uint64_t now_ms) {
  std::lock_guard lock(mutex_);
  if (entries_.size() >= kMaxEntries && entries_.find(key) == entries_.end()) entries_.clear();
  entries_[key] = Entry{std::move(judgement), now_ms + kFunctionVerdictTtlMs};
}

void FunctionVerdictCache::clear() {
  std::lock_guard lock(mutex_);
  entries_.clear();
}

size_t FunctionVerdictCache::size() {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace pgsluice
