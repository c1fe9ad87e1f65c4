// The SQL tokenizer and the session-state prefilter (see sql_lexer.h): one pass over the bytes,
// no allocation, a handful of comparisons per word.
#include "pgsluice/protocol/sql_lexer.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "ascii.h"

namespace pgsluice::protocol {
namespace {

using ascii::is_digit;
using ascii::is_space;
using ascii::lower;

// Builtins that are called in application SQL all the time and keep no session state. Kept
// sorted (checked at compile time) for a binary search. Deliberately absent: set_config,
// pg_advisory_lock* / pg_try_advisory_lock* / pg_advisory_unlock* (session locks), setseed (the
// session's random seed), dblink* (session connections). The _xact_ advisory locks are here: they
// end with the transaction. nextval/currval/lastval are here although the backend remembers the
// last value per sequence (DISCARD SEQUENCES forgets it): only currval/lastval read that memory,
// and a pooled client that relies on it across transactions is already broken for other reasons.
// uuid_generate_v4 is uuid-ossp's, not a builtin, but so common in ORM SQL that a parse per query
// would be a waste. A user function that shadows one of these names through search_path is
// invisible here; session_state_verify exists for what the SQL text cannot show.
constexpr std::array<std::string_view, 287> kSafeBuiltins = {"abs",
                                                             "acos",
                                                             "age",
                                                             "array_agg",
                                                             "array_append",
                                                             "array_cat",
                                                             "array_fill",
                                                             "array_length",
                                                             "array_lower",
                                                             "array_position",
                                                             "array_positions",
                                                             "array_prepend",
                                                             "array_remove",
                                                             "array_replace",
                                                             "array_to_json",
                                                             "array_to_string",
                                                             "array_upper",
                                                             "ascii",
                                                             "asin",
                                                             "atan",
                                                             "atan2",
                                                             "avg",
                                                             "bit_and",
                                                             "bit_length",
                                                             "bit_or",
                                                             "bool",
                                                             "bool_and",
                                                             "bool_or",
                                                             "btrim",
                                                             "cardinality",
                                                             "cbrt",
                                                             "ceil",
                                                             "ceiling",
                                                             "char_length",
                                                             "character_length",
                                                             "chr",
                                                             "clock_timestamp",
                                                             "coalesce",
                                                             "col_description",
                                                             "concat",
                                                             "concat_ws",
                                                             "convert_from",
                                                             "convert_to",
                                                             "cos",
                                                             "count",
                                                             "cume_dist",
                                                             "current_database",
                                                             "current_schema",
                                                             "current_schemas",
                                                             "current_setting",
                                                             "date",
                                                             "date_bin",
                                                             "date_part",
                                                             "date_trunc",
                                                             "decode",
                                                             "degrees",
                                                             "dense_rank",
                                                             "div",
                                                             "encode",
                                                             "every",
                                                             "exp",
                                                             "extract",
                                                             "first_value",
                                                             "float4",
                                                             "float8",
                                                             "floor",
                                                             "format",
                                                             "format_type",
                                                             "gen_random_uuid",
                                                             "generate_series",
                                                             "generate_subscripts",
                                                             "get_byte",
                                                             "greatest",
                                                             "has_schema_privilege",
                                                             "has_table_privilege",
                                                             "hashtext",
                                                             "hashtextextended",
                                                             "initcap",
                                                             "int2",
                                                             "int4",
                                                             "int8",
                                                             "isfinite",
                                                             "json_agg",
                                                             "json_array_elements",
                                                             "json_array_elements_text",
                                                             "json_array_length",
                                                             "json_build_array",
                                                             "json_build_object",
                                                             "json_each",
                                                             "json_each_text",
                                                             "json_extract_path",
                                                             "json_extract_path_text",
                                                             "json_object",
                                                             "json_object_agg",
                                                             "json_object_keys",
                                                             "json_populate_record",
                                                             "json_populate_recordset",
                                                             "json_strip_nulls",
                                                             "json_to_record",
                                                             "json_to_recordset",
                                                             "json_typeof",
                                                             "jsonb_agg",
                                                             "jsonb_array_elements",
                                                             "jsonb_array_elements_text",
                                                             "jsonb_array_length",
                                                             "jsonb_build_array",
                                                             "jsonb_build_object",
                                                             "jsonb_each",
                                                             "jsonb_each_text",
                                                             "jsonb_extract_path",
                                                             "jsonb_extract_path_text",
                                                             "jsonb_insert",
                                                             "jsonb_object",
                                                             "jsonb_object_agg",
                                                             "jsonb_object_keys",
                                                             "jsonb_path_exists",
                                                             "jsonb_path_match",
                                                             "jsonb_path_query",
                                                             "jsonb_path_query_array",
                                                             "jsonb_path_query_first",
                                                             "jsonb_populate_record",
                                                             "jsonb_populate_recordset",
                                                             "jsonb_pretty",
                                                             "jsonb_set",
                                                             "jsonb_strip_nulls",
                                                             "jsonb_to_record",
                                                             "jsonb_to_recordset",
                                                             "jsonb_typeof",
                                                             "justify_days",
                                                             "justify_hours",
                                                             "justify_interval",
                                                             "lag",
                                                             "last_value",
                                                             "lead",
                                                             "least",
                                                             "left",
                                                             "length",
                                                             "ln",
                                                             "lo_close",
                                                             "lo_create",
                                                             "lo_from_bytea",
                                                             "lo_get",
                                                             "lo_open",
                                                             "lo_put",
                                                             "lo_unlink",
                                                             "log",
                                                             "log10",
                                                             "lower",
                                                             "lpad",
                                                             "ltrim",
                                                             "make_date",
                                                             "make_interval",
                                                             "make_time",
                                                             "make_timestamp",
                                                             "make_timestamptz",
                                                             "max",
                                                             "md5",
                                                             "min",
                                                             "mod",
                                                             "nextval",
                                                             "now",
                                                             "nth_value",
                                                             "ntile",
                                                             "nullif",
                                                             "num_nonnulls",
                                                             "num_nulls",
                                                             "numeric",
                                                             "obj_description",
                                                             "octet_length",
                                                             "overlay",
                                                             "percent_rank",
                                                             "percentile_cont",
                                                             "percentile_disc",
                                                             "pg_advisory_xact_lock",
                                                             "pg_advisory_xact_lock_shared",
                                                             "pg_backend_pid",
                                                             "pg_cancel_backend",
                                                             "pg_column_size",
                                                             "pg_current_wal_lsn",
                                                             "pg_database_size",
                                                             "pg_encoding_to_char",
                                                             "pg_get_constraintdef",
                                                             "pg_get_expr",
                                                             "pg_get_function_arguments",
                                                             "pg_get_function_result",
                                                             "pg_get_indexdef",
                                                             "pg_get_serial_sequence",
                                                             "pg_get_userbyid",
                                                             "pg_get_viewdef",
                                                             "pg_has_role",
                                                             "pg_indexes_size",
                                                             "pg_is_in_recovery",
                                                             "pg_last_xact_replay_timestamp",
                                                             "pg_listening_channels",
                                                             "pg_my_temp_schema",
                                                             "pg_notify",
                                                             "pg_postmaster_start_time",
                                                             "pg_relation_size",
                                                             "pg_size_pretty",
                                                             "pg_sleep",
                                                             "pg_table_is_visible",
                                                             "pg_table_size",
                                                             "pg_terminate_backend",
                                                             "pg_total_relation_size",
                                                             "pg_try_advisory_xact_lock",
                                                             "pg_try_advisory_xact_lock_shared",
                                                             "pg_typeof",
                                                             "pi",
                                                             "plainto_tsquery",
                                                             "position",
                                                             "power",
                                                             "quote_ident",
                                                             "quote_literal",
                                                             "quote_nullable",
                                                             "radians",
                                                             "random",
                                                             "rank",
                                                             "regexp_count",
                                                             "regexp_instr",
                                                             "regexp_like",
                                                             "regexp_match",
                                                             "regexp_matches",
                                                             "regexp_replace",
                                                             "regexp_split_to_array",
                                                             "regexp_split_to_table",
                                                             "regexp_substr",
                                                             "repeat",
                                                             "replace",
                                                             "reverse",
                                                             "right",
                                                             "round",
                                                             "row_number",
                                                             "row_to_json",
                                                             "rpad",
                                                             "rtrim",
                                                             "setval",
                                                             "sha224",
                                                             "sha256",
                                                             "sha384",
                                                             "sha512",
                                                             "sign",
                                                             "sin",
                                                             "split_part",
                                                             "sqrt",
                                                             "starts_with",
                                                             "statement_timestamp",
                                                             "stddev",
                                                             "stddev_pop",
                                                             "stddev_samp",
                                                             "string_agg",
                                                             "string_to_array",
                                                             "string_to_table",
                                                             "strpos",
                                                             "substr",
                                                             "substring",
                                                             "sum",
                                                             "tan",
                                                             "text",
                                                             "timeofday",
                                                             "to_char",
                                                             "to_date",
                                                             "to_hex",
                                                             "to_json",
                                                             "to_jsonb",
                                                             "to_number",
                                                             "to_regclass",
                                                             "to_timestamp",
                                                             "to_tsquery",
                                                             "to_tsvector",
                                                             "transaction_timestamp",
                                                             "translate",
                                                             "trim",
                                                             "trunc",
                                                             "ts_headline",
                                                             "ts_rank",
                                                             "ts_rank_cd",
                                                             "txid_current",
                                                             "unnest",
                                                             "upper",
                                                             "uuid_generate_v4",
                                                             "var_pop",
                                                             "var_samp",
                                                             "variance",
                                                             "version",
                                                             "websearch_to_tsquery",
                                                             "width_bucket",
                                                             "xmlagg"};
static_assert(std::ranges::is_sorted(kSafeBuiltins));

// Keywords and type names that a '(' may follow without a function being called: IN (…),
// VALUES (…), ON CONFLICT (…), OVER (…), varchar(255), CAST(… AS numeric(10,2)), …
constexpr std::array<std::string_view, 81> kParenKeywords = {
    "all",      "analyze",       "and",       "any",         "array",    "as",
    "between",  "bit",           "by",        "cast",        "char",     "character",
    "check",    "conflict",      "copy",      "cube",        "dec",      "decimal",
    "distinct", "else",          "except",    "exists",      "explain",  "filter",
    "float",    "from",          "group",     "grouping",    "having",   "ilike",
    "in",       "include",       "intersect", "interval",    "is",       "join",
    "key",      "lateral",       "like",      "limit",       "nchar",    "not",
    "numeric",  "offset",        "on",        "only",        "operator", "or",
    "over",     "overlaps",      "range",     "returning",   "rollup",   "row",
    "rows",     "select",        "set",       "sets",        "similar",  "some",
    "then",     "time",          "timestamp", "timestamptz", "timetz",   "treat",
    "union",    "unique",        "using",     "vacuum",      "values",   "varbit",
    "varchar",  "varying",       "when",      "where",       "window",   "with",
    "within",   "xmlattributes", "xmlelement"};
static_assert(std::ranges::is_sorted(kParenKeywords));

// Keywords after which `name (` is a name with a column list, not a call: INSERT INTO t (a, b),
// CREATE TABLE t (…), WITH [RECURSIVE] cte (a) AS, FROM t AS x (a, b), COPY t (a) FROM STDIN,
// REFERENCES t (id), CREATE VIEW v (a), CREATE FUNCTION f (…) (defining is not calling).
constexpr std::array<std::string_view, 12> kColumnListIntros = {
    "as",        "copy",      "exists",     "function", "into", "only",
    "procedure", "recursive", "references", "table",    "view", "with"};
static_assert(std::ranges::is_sorted(kColumnListIntros));

bool is_word_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool is_word_char(char c) {
  return is_word_start(c) || (c >= '0' && c <= '9') || c == '$';
}

// Lowercases `word` into `buf` when it fits; an empty view when it does not (no name we look up
// is that long).
std::string_view lowercase_into(std::string_view word, std::array<char, 64>& buf) {
  if (word.size() > buf.size()) return {};
  for (size_t i = 0; i < word.size(); ++i) buf[i] = lower(word[i]);
  return {buf.data(), word.size()};
}

template <size_t N>
bool contains(const std::array<std::string_view, N>& sorted, std::string_view lowercase_word) {
  return !lowercase_word.empty() && std::ranges::binary_search(sorted, lowercase_word);
}

}  // namespace

bool iequals_keyword(std::string_view word, std::string_view lowercase_keyword) {
  if (word.size() != lowercase_keyword.size()) return false;
  for (size_t i = 0; i < word.size(); ++i) {
    if (lower(word[i]) != lowercase_keyword[i]) return false;
  }
  return true;
}

bool is_known_safe_builtin(std::string_view lowercase_name) {
  return contains(kSafeBuiltins, lowercase_name);
}

bool is_paren_keyword(std::string_view lowercase_word) {
  return contains(kParenKeywords, lowercase_word);
}

bool is_column_list_intro(std::string_view lowercase_word) {
  return contains(kColumnListIntros, lowercase_word);
}

void SqlTokenizer::skip_space_and_comments() {
  const size_t n = sql_.size();
  while (pos_ < n) {
    const char c = sql_[pos_];
    if (is_space(c)) {
      ++pos_;
    } else if (c == '-' && pos_ + 1 < n && sql_[pos_ + 1] == '-') {
      const size_t eol = sql_.find('\n', pos_ + 2);
      pos_ = eol == std::string_view::npos ? n : eol + 1;
    } else if (c == '/' && pos_ + 1 < n && sql_[pos_ + 1] == '*') {
      // PostgreSQL nests block comments: /* a /* b */ still a comment */.
      int depth = 1;
      pos_ += 2;
      while (pos_ < n && depth > 0) {
        if (sql_[pos_] == '/' && pos_ + 1 < n && sql_[pos_ + 1] == '*') {
          ++depth;
          pos_ += 2;
        } else if (sql_[pos_] == '*' && pos_ + 1 < n && sql_[pos_ + 1] == '/') {
          --depth;
          pos_ += 2;
        } else {
          ++pos_;
        }
      }
    } else {
      return;
    }
  }
}

// The end (one past the closing quote) of a quoted token whose opening quote is at `from`. A
// doubled quote is an escaped quote; with `backslash_escapes` (E'…'), a backslash escapes the
// next byte as well.
size_t SqlTokenizer::scan_quoted(size_t from, char quote, bool backslash_escapes) const {
  const size_t n = sql_.size();
  size_t i = from + 1;
  if (!backslash_escapes) {
    // find() is memchr: a long literal or identifier costs next to nothing.
    while (true) {
      i = sql_.find(quote, i);
      if (i == std::string_view::npos) return n;
      if (i + 1 < n && sql_[i + 1] == quote) {
        i += 2;
      } else {
        return i + 1;
      }
    }
  }
  while (i < n) {
    const char c = sql_[i];
    if (c == '\\') {
      i += 2;
    } else if (c == quote) {
      if (i + 1 < n && sql_[i + 1] == quote) {
        i += 2;
      } else {
        return i + 1;
      }
    } else {
      ++i;
    }
  }
  return std::min(i, n);
}

bool SqlTokenizer::next(SqlToken& out) {
  skip_space_and_comments();
  const size_t n = sql_.size();
  if (pos_ >= n) return false;
  const size_t start = pos_;
  const char c = sql_[pos_];
  SqlTokenKind kind = SqlTokenKind::punct;
  size_t end = start + 1;

  if (is_word_start(c)) {
    end = start + 1;
    while (end < n && is_word_char(sql_[end])) ++end;
    const size_t len = end - start;
    // Prefixed literals: E'…' (backslash escapes), B'…', X'…', N'…', U&'…' and U&"…".
    if (len == 1 && end < n && sql_[end] == '\'') {
      kind = SqlTokenKind::string_literal;
      end = scan_quoted(end, '\'', lower(c) == 'e');
    } else if (len == 1 && lower(c) == 'u' && end + 1 < n && sql_[end] == '&' &&
               (sql_[end + 1] == '\'' || sql_[end + 1] == '"')) {
      const char quote = sql_[end + 1];
      kind = quote == '"' ? SqlTokenKind::quoted_identifier : SqlTokenKind::string_literal;
      end = scan_quoted(end + 1, quote, false);
    } else {
      kind = SqlTokenKind::word;
    }
  } else if (c == '\'') {
    kind = SqlTokenKind::string_literal;
    end = scan_quoted(start, '\'', false);
  } else if (c == '"') {
    kind = SqlTokenKind::quoted_identifier;
    end = scan_quoted(start, '"', false);
  } else if (c == '$') {
    if (start + 1 < n && is_digit(sql_[start + 1])) {
      kind = SqlTokenKind::parameter;
      end = start + 1;
      while (end < n && is_digit(sql_[end])) ++end;
    } else {
      // $tag$ opens a dollar quote when tag is empty or an identifier without '$'.
      size_t tag_end = start + 1;
      if (tag_end < n && is_word_start(sql_[tag_end])) {
        while (tag_end < n && is_word_char(sql_[tag_end]) && sql_[tag_end] != '$') ++tag_end;
      }
      if (tag_end < n && sql_[tag_end] == '$') {
        const std::string_view tag = sql_.substr(start, tag_end - start + 1);
        const size_t close = sql_.find(tag, tag_end + 1);
        kind = SqlTokenKind::dollar_string;
        end = close == std::string_view::npos ? n : close + tag.size();
      }
    }
  } else if (is_digit(c) || (c == '.' && start + 1 < n && is_digit(sql_[start + 1]))) {
    kind = SqlTokenKind::number;
    end = start + 1;
    while (end < n && (is_word_char(sql_[end]) || sql_[end] == '.')) {
      // 1e-5 / 1E+5: the sign belongs to the exponent.
      if ((sql_[end] == 'e' || sql_[end] == 'E') && end + 1 < n &&
          (sql_[end + 1] == '-' || sql_[end + 1] == '+')) {
        ++end;
      }
      ++end;
    }
  }

  out.kind = kind;
  out.text = sql_.substr(start, end - start);
  out.offset = start;
  pos_ = end;
  return true;
}

namespace {

// The statements that are about session state by their first word.
bool is_session_leading_word(std::string_view w) {
  switch (w.size()) {
    case 2:
      return iequals_keyword(w, "do");
    case 3:
      return iequals_keyword(w, "set");
    case 4:
      return iequals_keyword(w, "load");
    case 5:
      return iequals_keyword(w, "reset") || iequals_keyword(w, "close");
    case 6:
      return iequals_keyword(w, "listen");
    case 7:
      return iequals_keyword(w, "prepare") || iequals_keyword(w, "execute") ||
             iequals_keyword(w, "declare") || iequals_keyword(w, "discard");
    case 8:
      return iequals_keyword(w, "unlisten");
    case 10:
      return iequals_keyword(w, "deallocate");
    default:
      return false;
  }
}

// TEMP/TEMPORARY after one of these creates a temporary object: CREATE [GLOBAL|LOCAL] TEMP,
// CREATE OR REPLACE TEMP VIEW, SELECT … INTO TEMP.
bool is_temp_intro(std::string_view w) {
  return iequals_keyword(w, "create") || iequals_keyword(w, "global") ||
         iequals_keyword(w, "local") || iequals_keyword(w, "replace") || iequals_keyword(w, "into");
}

}  // namespace

bool may_change_session_state(std::string_view sql) {
  SqlTokenizer tokenizer(sql);
  SqlToken token;
  std::array<char, 64> buf{};

  bool statement_start = true;
  // The previous token, and the context of the (possibly dotted) name it ends: the word before
  // the name began (`INTO s.t (a)` is a column list just like `INTO t (a)`; looked up only when
  // a '(' follows), whether the name is qualified, and whether its qualifier is pg_catalog.
  SqlTokenKind prev_kind = SqlTokenKind::punct;
  std::string_view prev_text;
  std::string_view prev_name_intro;
  bool prev_qualified = false;
  bool prev_qualifier_is_catalog = false;

  while (tokenizer.next(token)) {
    std::string_view name_intro;
    bool qualified = false;
    bool qualifier_is_catalog = false;
    const bool after_dot = prev_kind == SqlTokenKind::punct && prev_text == ".";

    switch (token.kind) {
      case SqlTokenKind::word: {
        const std::string_view w = token.text;
        if (statement_start && is_session_leading_word(w)) return true;
        if (w.size() == 7 && iequals_keyword(w, "execute")) return true;
        // pg_temp and pg_temp_N name this session's temporary schema.
        if (w.size() >= 7 && (w[0] == 'p' || w[0] == 'P') &&
            iequals_keyword(w.substr(0, 7), "pg_temp")) {
          return true;
        }
        if ((w.size() == 4 || w.size() == 9) && prev_kind == SqlTokenKind::word &&
            (iequals_keyword(w, "temp") || iequals_keyword(w, "temporary")) &&
            is_temp_intro(prev_text)) {
          return true;
        }
        [[fallthrough]];
      }
      case SqlTokenKind::quoted_identifier:
        if (after_dot) {
          qualified = true;
          name_intro = prev_name_intro;
          qualifier_is_catalog = prev_qualifier_is_catalog;
        } else if (prev_kind == SqlTokenKind::word) {
          name_intro = prev_text;
        }
        break;
      case SqlTokenKind::punct:
        if (token.text == ";") {
          statement_start = true;
          prev_kind = SqlTokenKind::punct;
          prev_text = token.text;
          continue;
        }
        if (token.text == ".") {
          // Carry the name's context over the dot.
          name_intro = prev_name_intro;
          qualifier_is_catalog = prev_kind == SqlTokenKind::word && !prev_qualified &&
                                 iequals_keyword(prev_text, "pg_catalog");
        } else if (token.text == "(" && (prev_kind == SqlTokenKind::word ||
                                         prev_kind == SqlTokenKind::quoted_identifier)) {
          const bool column_list =
              !prev_name_intro.empty() &&
              contains(kColumnListIntros, lowercase_into(prev_name_intro, buf));
          if (!column_list) {
            if (prev_kind == SqlTokenKind::quoted_identifier) return true;  // "MyFunc"(…)
            const std::string_view w = lowercase_into(prev_text, buf);
            if (prev_qualified) {
              // Only pg_catalog.<safe builtin> is known; any other schema holds user code.
              if (!prev_qualifier_is_catalog || !is_known_safe_builtin(w)) return true;
            } else if (!contains(kParenKeywords, w) && !is_known_safe_builtin(w)) {
              return true;
            }
          }
        }
        break;
      case SqlTokenKind::string_literal:
      case SqlTokenKind::dollar_string:
      case SqlTokenKind::number:
      case SqlTokenKind::parameter:
        break;
    }
    statement_start = false;
    prev_kind = token.kind;
    prev_text = token.text;
    prev_name_intro = name_intro;
    prev_qualified = qualified;
    prev_qualifier_is_catalog = qualifier_is_catalog;
  }
  return false;
}

}  // namespace pgsluice::protocol
