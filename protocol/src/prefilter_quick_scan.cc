// The session-state prefilter's quick pass (sql_lexer.h): one look at each byte, stopping only at
// the few bytes that can start what the token pass flags. Why: the token pass built a token per
// word and cost 1,365 instructions for pgbench's SELECT, a quarter of pgsluice's own work per
// `pgbench -S` transaction (docs/profile.md §0e); most application statements hold no '(' that
// calls an unknown function, no second statement, no TEMP and no EXECUTE, and this pass clears
// them in a few instructions per byte.
//
// The rule that keeps it safe: it answers "cannot change" only where the token pass would too.
// Every condition the token pass flags needs one of the bytes stopped at here — a leading word
// (checked on the first token; a later statement needs a ';'), EXECUTE ('x'), TEMP, TEMPORARY and
// pg_temp* ('m' of "temp"), a call ('(') — and at each stop this pass either proves the
// condition absent from the bytes alone or hands the statement to the token pass. Comments and
// quotes are not followed: a comment ("--", "/*") hands over, a stop inside a quoted string at
// worst hands over a statement the token pass then clears. The fuzz target checks the rule.
#include <array>
#include <cstdint>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ascii.h"
#include "pgsluice/protocol/sql_lexer.h"

namespace pgsluice::protocol {
namespace {

using ascii::is_space;
using ascii::is_word_char;
using ascii::is_word_start;
using ascii::lower;

enum Stop : uint8_t { kNone = 0, kParen, kSemicolon, kLetterM, kLetterX, kDash, kSlash };

constexpr std::array<uint8_t, 256> kStops = [] {
  std::array<uint8_t, 256> t{};
  t['('] = kParen;
  t[';'] = kSemicolon;
  t['m'] = t['M'] = kLetterM;
  t['x'] = t['X'] = kLetterX;
  t['-'] = kDash;
  t['/'] = kSlash;
  return t;
}();

Stop stop_at(std::string_view sql, size_t i) {
  return static_cast<Stop>(kStops[static_cast<unsigned char>(sql[i])]);
}

// The position of the first stop at or after `i`, or sql.size(). Sixteen bytes at a time with
// SSE2 (every x86-64 has it): each byte with the ASCII case bit set is compared with the six
// stops, and a match is checked against the table, since setting that bit also turns a few
// control bytes into stops ('\r' into '-'). Callgrind put the scan at 375 instructions per
// statement of tpcb with the eight-byte table loop below, which remains for the tail and for
// other processors.
size_t next_stop(std::string_view sql, size_t i) {
  const size_t n = sql.size();
#if defined(__SSE2__)
  const __m128i case_bit = _mm_set1_epi8(0x20);
  const __m128i paren = _mm_set1_epi8('(');
  const __m128i semicolon = _mm_set1_epi8(';');
  const __m128i letter_m = _mm_set1_epi8('m');
  const __m128i letter_x = _mm_set1_epi8('x');
  const __m128i dash = _mm_set1_epi8('-');
  const __m128i slash = _mm_set1_epi8('/');
  while (i + 16 <= n) {
    const __m128i bytes =
        _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sql.data() + i)), case_bit);
    const __m128i hits = _mm_or_si128(
        _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(bytes, paren), _mm_cmpeq_epi8(bytes, semicolon)),
            _mm_or_si128(_mm_cmpeq_epi8(bytes, letter_m), _mm_cmpeq_epi8(bytes, letter_x))),
        _mm_or_si128(_mm_cmpeq_epi8(bytes, dash), _mm_cmpeq_epi8(bytes, slash)));
    for (auto mask = static_cast<unsigned>(_mm_movemask_epi8(hits)); mask != 0; mask &= mask - 1) {
      const size_t at = i + static_cast<size_t>(__builtin_ctz(mask));
      if (stop_at(sql, at) != kNone) return at;
    }
    i += 16;
  }
#endif
  // Eight bytes at a time while none of them is a stop: one OR of eight table loads and one
  // branch, where a byte at a time took a load, a compare and two branches per byte.
  while (i + 8 <= n && (stop_at(sql, i) | stop_at(sql, i + 1) | stop_at(sql, i + 2) |
                        stop_at(sql, i + 3) | stop_at(sql, i + 4) | stop_at(sql, i + 5) |
                        stop_at(sql, i + 6) | stop_at(sql, i + 7)) == 0) {
    i += 8;
  }
  while (i < n && stop_at(sql, i) == kNone) ++i;  // to the stop in these eight, or to the end
  return i;
}

// Whether the bytes around position `at` (which holds an 'm'/'M' or 'x'/'X') spell `word`,
// ASCII case-insensitively, with the stop letter at `word[letter]`.
bool spells_around(std::string_view sql, size_t at, std::string_view word, size_t letter) {
  if (at < letter || at - letter + word.size() > sql.size()) return false;
  const std::string_view here = sql.substr(at - letter, word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    if (lower(here[i]) != word[i]) return false;
  }
  return true;
}

// The word that ends at `end` (past any space before it), lowercased into `buf`: empty when the
// bytes there are not a plain word token this pass can judge — a run that does not start like a
// word, or holds '$', may be a word glued to a parameter or a dollar quote. `start` is set to
// where the run begins.
std::string_view word_before(std::string_view sql, size_t from, size_t end, size_t& start,
                             std::array<char, 64>& buf) {
  while (end > from && is_space(sql[end - 1])) --end;
  start = end;
  while (start > from && is_word_char(sql[start - 1])) {
    if (sql[start - 1] == '$') return {};
    --start;
  }
  const size_t size = end - start;
  if (size == 0 || size > buf.size() || !is_word_start(sql[start])) return {};
  for (size_t i = 0; i < size; ++i) buf[i] = lower(sql[start + i]);
  return {buf.data(), size};
}

constexpr size_t kNoName = std::string_view::npos;

bool is_number_tail_glue(char c) {
  return c == '.' || c == '+' || c == '-';
}

// Where the quoted identifier whose closing '"' is at `end - 1` opens; kNoName when its text
// holds a doubled quote ("a""b"), which this pass does not follow backwards. Why it is safe to
// read backwards: a '"' ends no token but a quoted identifier, and nothing but a doubled quote
// puts a '"' inside one.
size_t quoted_identifier_start(std::string_view sql, size_t from, size_t end) {
  size_t open = end - 1;
  while (open > from && sql[open - 1] != '"') --open;
  if (open == from) return kNoName;  // no opening quote after `from`
  --open;
  if (open > from && sql[open - 1] == '"') return kNoName;
  return open;
}

// Where the name (a word or a quoted identifier) that ends at `end`, past any space, starts;
// kNoName when the bytes there are neither.
size_t name_start_before(std::string_view sql, size_t from, size_t end) {
  while (end > from && is_space(sql[end - 1])) --end;
  if (end == from) return kNoName;
  if (sql[end - 1] == '"') return quoted_identifier_start(sql, from, end);
  std::array<char, 64> buf;  // NOLINT(cppcoreguidelines-pro-type-member-init): written first
  size_t start = 0;
  return word_before(sql, from, end, start, buf).empty() ? kNoName : start;
}

// Whether the name that starts at `name_start` follows a keyword that makes `name (` a column
// list (INSERT INTO t (a, b), INSERT INTO "s"."t" (a), CREATE TABLE t (…)): the token pass's
// name_intro rule, for a name with at most one qualifier. Why: pgbench's and most applications'
// INSERTs name their columns (ORMs quote them), and the token pass cost 5,000 instructions for
// tpcb's INSERT (callgrind, docs/profile.md §0f).
bool follows_column_list_intro(std::string_view sql, size_t from, size_t name_start) {
  std::array<char, 64> buf;  // NOLINT(cppcoreguidelines-pro-type-member-init): written first
  size_t before = name_start;
  while (before > from && is_space(sql[before - 1])) --before;
  if (before > from && sql[before - 1] == '.') {
    const size_t qualifier_start = name_start_before(sql, from, before - 1);
    if (qualifier_start == kNoName) return false;
    before = qualifier_start;
  }
  size_t intro_start = 0;
  const std::string_view intro = word_before(sql, from, before, intro_start, buf);
  if (intro.empty() || !is_column_list_intro(intro)) return false;
  // The keyword must be a token of its own: behind a '.', '+' or '-' the word may be the tail of
  // a number (the token pass reads 5.INTO and 5e+INTO as one number), so hand those over.
  return intro_start == from || !is_number_tail_glue(sql[intro_start - 1]);
}

// Whether the '(' at `paren` opens no call the token pass would flag, judged from the bytes just
// before it (`from` is where the first token starts: nothing before it but space and comments).
// Without comments (they hand over before any '(' after them is reached) the byte before the '('
// past any space is the previous token's last: a word's, a quoted identifier's, or another kind's.
bool paren_opens_no_unknown_call(std::string_view sql, size_t from, size_t paren) {
  size_t end = paren;
  while (end > from && is_space(sql[end - 1])) --end;
  if (end == from) return true;  // the first token: nothing is called
  if (sql[end - 1] == '"') {
    // "t" (a) after INTO is a column list; "MyFunc"(…) is a call.
    const size_t start = quoted_identifier_start(sql, from, end);
    return start != kNoName && follows_column_list_intro(sql, from, start);
  }
  if (!is_word_char(sql[end - 1])) return true;
  std::array<char, 64> lowered;  // NOLINT(cppcoreguidelines-pro-type-member-init): written first
  size_t start = 0;
  const std::string_view name = word_before(sql, from, end, start, lowered);
  if (name.empty()) return false;
  // The cheap answers first: VALUES (, IN (, now( are the usual '('; a column list is rarer.
  size_t before = start;
  while (before > from && is_space(sql[before - 1])) --before;
  const bool qualified = before > from && sql[before - 1] == '.';
  if (!qualified && (is_paren_keyword(name) || is_known_safe_builtin(name))) return true;
  // schema.f( is the token pass's to judge, unless s.t ( follows INTO, TABLE, …
  return follows_column_list_intro(sql, from, start);
}

}  // namespace

bool quick_pass_clears(std::string_view sql) {
  const size_t n = sql.size();
  if (n == 0) return true;
  size_t from = 0;
  if (is_word_start(sql[0])) {
    // The usual start, a keyword at the first byte: its run of word bytes is the first token
    // (a one-letter run may be a prefixed literal such as E'…', but no leading word is that short).
    size_t end = 1;
    while (end < n && is_word_char(sql[end])) ++end;
    if (is_session_leading_word(sql.substr(0, end))) return false;
  } else {
    SqlTokenizer tokenizer(sql);
    SqlToken first;
    if (!tokenizer.next(first)) return true;  // only space and comments
    if (first.kind == SqlTokenKind::word && is_session_leading_word(first.text)) return false;
    from = first.offset;
  }
  const auto stop_at = [&sql](size_t i) { return kStops[static_cast<unsigned char>(sql[i])]; };
  size_t i = from;
  while (true) {
    i = next_stop(sql, i);
    if (i >= n) return true;
    switch (stop_at(i)) {
      case kParen:
        if (!paren_opens_no_unknown_call(sql, from, i)) return false;
        break;
      case kSemicolon:
        // A statement's closing ';' with nothing after it; anything after may be a statement.
        for (size_t j = i + 1; j < n; ++j) {
          if (!is_space(sql[j])) return false;
        }
        return true;
      case kLetterM:
        if (spells_around(sql, i, "temp", 2)) return false;
        break;
      case kLetterX:
        if (spells_around(sql, i, "execute", 1)) return false;
        break;
      case kDash:
        if (i + 1 < n && sql[i + 1] == '-') return false;
        break;
      case kSlash:
        if (i + 1 < n && sql[i + 1] == '*') return false;
        break;
      default:
        break;
    }
    ++i;
  }
}

bool may_change_session_state(std::string_view sql) {
  return !quick_pass_clears(sql) && may_change_session_state_by_tokens(sql);
}

}  // namespace pgsluice::protocol
