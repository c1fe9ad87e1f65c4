// Plain SETs whose value the pooler can know without a read-back (set_literal.h).
#include "pooler/session_state/set_literal.h"

#include <algorithm>
#include <array>

#include "pgsluice/protocol/sql_lexer.h"
#include "pooler/base/text.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

namespace {

// PostgreSQL 15's settings of type bool, integer, real or enum that SET may change (pg_settings'
// context user or superuser), less those whose SHOW is not a function of the value alone: the
// socket's tcp_keepalives_* and tcp_user_timeout, max_stack_depth (checked against the process's
// stack limit), the transaction's own transaction_isolation, transaction_read_only and
// transaction_deferrable, and the reported IntervalStyle and standard_conforming_strings (their
// ParameterStatus says their value already). A name missing here is read back, as before.
constexpr std::array kDeterministicSettings =
    std::to_array<std::string_view>({"allow_in_place_tablespaces",
                                     "allow_system_table_mods",
                                     "array_nulls",
                                     "backend_flush_after",
                                     "backslash_quote",
                                     "bytea_output",
                                     "check_function_bodies",
                                     "client_connection_check_interval",
                                     "client_min_messages",
                                     "commit_delay",
                                     "commit_siblings",
                                     "compute_query_id",
                                     "constraint_exclusion",
                                     "cpu_index_tuple_cost",
                                     "cpu_operator_cost",
                                     "cpu_tuple_cost",
                                     "cursor_tuple_fraction",
                                     "deadlock_timeout",
                                     "debug_discard_caches",
                                     "debug_pretty_print",
                                     "debug_print_parse",
                                     "debug_print_plan",
                                     "debug_print_rewritten",
                                     "default_statistics_target",
                                     "default_toast_compression",
                                     "default_transaction_deferrable",
                                     "default_transaction_isolation",
                                     "default_transaction_read_only",
                                     "effective_cache_size",
                                     "effective_io_concurrency",
                                     "enable_async_append",
                                     "enable_bitmapscan",
                                     "enable_gathermerge",
                                     "enable_hashagg",
                                     "enable_hashjoin",
                                     "enable_incremental_sort",
                                     "enable_indexonlyscan",
                                     "enable_indexscan",
                                     "enable_material",
                                     "enable_memoize",
                                     "enable_mergejoin",
                                     "enable_nestloop",
                                     "enable_parallel_append",
                                     "enable_parallel_hash",
                                     "enable_partition_pruning",
                                     "enable_partitionwise_aggregate",
                                     "enable_partitionwise_join",
                                     "enable_seqscan",
                                     "enable_sort",
                                     "enable_tidscan",
                                     "escape_string_warning",
                                     "exit_on_error",
                                     "extra_float_digits",
                                     "force_parallel_mode",
                                     "from_collapse_limit",
                                     "geqo",
                                     "geqo_effort",
                                     "geqo_generations",
                                     "geqo_pool_size",
                                     "geqo_seed",
                                     "geqo_selection_bias",
                                     "geqo_threshold",
                                     "gin_fuzzy_search_limit",
                                     "gin_pending_list_limit",
                                     "hash_mem_multiplier",
                                     "idle_in_transaction_session_timeout",
                                     "idle_session_timeout",
                                     "ignore_checksum_failure",
                                     "jit",
                                     "jit_above_cost",
                                     "jit_dump_bitcode",
                                     "jit_expressions",
                                     "jit_inline_above_cost",
                                     "jit_optimize_above_cost",
                                     "jit_tuple_deforming",
                                     "join_collapse_limit",
                                     "lo_compat_privileges",
                                     "lock_timeout",
                                     "log_duration",
                                     "log_error_verbosity",
                                     "log_executor_stats",
                                     "log_lock_waits",
                                     "log_min_duration_sample",
                                     "log_min_duration_statement",
                                     "log_min_error_statement",
                                     "log_min_messages",
                                     "log_parameter_max_length",
                                     "log_parameter_max_length_on_error",
                                     "log_parser_stats",
                                     "log_planner_stats",
                                     "log_replication_commands",
                                     "log_statement",
                                     "log_statement_sample_rate",
                                     "log_statement_stats",
                                     "log_temp_files",
                                     "log_transaction_sample_rate",
                                     "logical_decoding_work_mem",
                                     "maintenance_io_concurrency",
                                     "maintenance_work_mem",
                                     "max_parallel_maintenance_workers",
                                     "max_parallel_workers",
                                     "max_parallel_workers_per_gather",
                                     "min_parallel_index_scan_size",
                                     "min_parallel_table_scan_size",
                                     "parallel_leader_participation",
                                     "parallel_setup_cost",
                                     "parallel_tuple_cost",
                                     "password_encryption",
                                     "plan_cache_mode",
                                     "quote_all_identifiers",
                                     "random_page_cost",
                                     "recursive_worktable_factor",
                                     "row_security",
                                     "seq_page_cost",
                                     "session_replication_role",
                                     "statement_timeout",
                                     "stats_fetch_consistency",
                                     "synchronize_seqscans",
                                     "synchronous_commit",
                                     "temp_buffers",
                                     "temp_file_limit",
                                     "trace_notify",
                                     "trace_sort",
                                     "track_activities",
                                     "track_counts",
                                     "track_functions",
                                     "track_io_timing",
                                     "track_wal_io_timing",
                                     "transform_null_equals",
                                     "update_process_title",
                                     "vacuum_cost_delay",
                                     "vacuum_cost_limit",
                                     "vacuum_cost_page_dirty",
                                     "vacuum_cost_page_hit",
                                     "vacuum_cost_page_miss",
                                     "vacuum_failsafe_age",
                                     "vacuum_freeze_min_age",
                                     "vacuum_freeze_table_age",
                                     "vacuum_multixact_failsafe_age",
                                     "vacuum_multixact_freeze_min_age",
                                     "vacuum_multixact_freeze_table_age",
                                     "wal_compression",
                                     "wal_init_zero",
                                     "wal_recycle",
                                     "wal_sender_timeout",
                                     "wal_skip_threshold",
                                     "work_mem",
                                     "xmlbinary",
                                     "xmloption",
                                     "zero_damaged_pages"});
static_assert(std::ranges::is_sorted(kDeterministicSettings));

bool is_plain_word(std::string_view w) {
  return std::ranges::all_of(w, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A number as the grammar passes it on: an integer that fits in 32 bits is printed back from its
// value (so "007" would become "7": refused here), any other numeric text (1.5, 2e3) as written.
bool is_plain_number(std::string_view n) {
  if (n.empty() || n.size() > 18) return false;
  size_t dots = 0;
  for (char c : n) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;  // exponents and signs: read back
    }
  }
  if (dots > 1 || n == ".") return false;
  if (dots == 0) return n.size() <= 9 && (n[0] != '0' || n.size() == 1);
  return true;
}

// The contents of a plain '…' literal ('' is one quote); nullopt for one with a backslash (its
// meaning depends on standard_conforming_strings) or left open.
std::optional<std::string> unquote(std::string_view literal) {
  if (literal.size() < 2 || literal.front() != '\'' || literal.back() != '\'') return std::nullopt;
  if (literal.find('\\') != std::string_view::npos) return std::nullopt;
  std::string out;
  const size_t last = literal.size() - 1;
  for (size_t i = 1; i < last; ++i) {
    if (literal[i] == '\'') {
      // Inside, quotes come doubled; a lone one means the closing quote is missing ('a'').
      if (i + 1 >= last || literal[i + 1] != '\'') return std::nullopt;
      ++i;
    }
    out.push_back(literal[i]);
  }
  return out;
}

std::optional<std::string> value_of(const pp::SqlToken& token) {
  switch (token.kind) {
    case pp::SqlTokenKind::string_literal:
      return unquote(token.text);
    case pp::SqlTokenKind::number:
      if (!is_plain_number(token.text)) return std::nullopt;
      return std::string(token.text);
    case pp::SqlTokenKind::word:
      // DEFAULT resets; LOCAL and the like are no values (the SET then fails anyway).
      if (!is_plain_word(token.text) || iequals(token.text, "default")) return std::nullopt;
      return ascii_lower(token.text);
    case pp::SqlTokenKind::quoted_identifier:
    case pp::SqlTokenKind::dollar_string:
    case pp::SqlTokenKind::parameter:
    case pp::SqlTokenKind::punct:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> simple_set_literal(std::string_view statement, std::string_view name) {
  pp::SqlTokenizer tokens(statement);
  std::array<pp::SqlToken, 7> t;
  size_t n = 0;
  while (n < t.size() && tokens.next(t[n])) ++n;
  if (n == t.size()) return std::nullopt;  // more than SET SESSION name = value ;
  size_t i = 0;
  auto is_word = [&](size_t k, std::string_view w) {
    return k < n && t[k].kind == pp::SqlTokenKind::word && iequals(t[k].text, w);
  };
  if (!is_word(i++, "set")) return std::nullopt;
  if (is_word(i, "session") && i + 1 < n && t[i + 1].kind == pp::SqlTokenKind::word &&
      !is_word(i + 1, "to")) {
    ++i;
  }
  if (i >= n || t[i].kind != pp::SqlTokenKind::word || !iequals(t[i].text, name)) {
    return std::nullopt;
  }
  ++i;
  const bool equals = i < n && t[i].kind == pp::SqlTokenKind::punct && t[i].text == "=";
  if (!equals && !is_word(i, "to")) return std::nullopt;
  ++i;
  if (i >= n) return std::nullopt;
  std::optional<std::string> value = value_of(t[i++]);
  if (i < n && t[i].kind == pp::SqlTokenKind::punct && t[i].text == ";") ++i;
  if (i != n) return std::nullopt;  // a list (a, b), or anything after the value
  return value;
}

bool is_deterministic_setting(std::string_view lowercase_name) {
  return std::ranges::binary_search(kDeterministicSettings, lowercase_name);
}

const std::string* SetValueCache::find(std::string_view version, std::string_view name,
                                       std::string_view literal) const {
  for (const Entry& e : entries_) {
    if (e.literal == literal && e.name == name && e.version == version) return &e.value;
  }
  return nullptr;
}

void SetValueCache::learn(std::string_view version, std::string_view name, std::string_view literal,
                          std::string_view value) {
  for (Entry& e : entries_) {
    if (e.literal == literal && e.name == name && e.version == version) {
      e.value.assign(value);
      return;
    }
  }
  if (entries_.size() >= kMaxEntries) return;
  entries_.push_back(Entry{.version = std::string(version),
                           .name = std::string(name),
                           .literal = std::string(literal),
                           .value = std::string(value)});
}

}  // namespace pgsluice
