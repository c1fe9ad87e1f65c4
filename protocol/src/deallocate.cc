// DEALLOCATE and DISCARD ALL recognised; see deallocate.h.
#include "pgsluice/protocol/deallocate.h"

#include <vector>

#include "ascii.h"
#include "pgsluice/protocol/sql_lexer.h"

namespace pgsluice::protocol {

namespace {
using ascii::is_alnum;
using ascii::is_space;
using ascii::lower;

// Splits SQL into lower-cased words, stopping at the first ';' (a trailing one is allowed) and
// giving up on anything but simple words and quoted identifiers.
bool simple_words(std::string_view sql, std::vector<std::string>& words) {
  size_t i = 0;
  while (i < sql.size()) {
    char c = sql[i];
    if (is_space(c)) {
      ++i;
    } else if (c == ';') {
      for (++i; i < sql.size(); ++i) {
        if (!is_space(sql[i])) return false;
      }
    } else if (c == '"') {
      std::string word;
      for (++i; i < sql.size(); ++i) {
        if (sql[i] == '"') {
          if (i + 1 < sql.size() && sql[i + 1] == '"') {
            word.push_back('"');
            ++i;
          } else {
            break;
          }
        } else {
          word.push_back(sql[i]);
        }
      }
      if (i >= sql.size()) return false;
      ++i;
      words.push_back("\"" + word);  // marks a quoted (case-kept) name
    } else if (is_alnum(c) || c == '_') {
      std::string word;
      while (i < sql.size() && (is_alnum(sql[i]) || sql[i] == '_' || sql[i] == '$')) {
        word.push_back(lower(sql[i]));
        ++i;
      }
      words.push_back(std::move(word));
    } else {
      return false;
    }
  }
  return true;
}
}  // namespace

bool starts_like_deallocate_command(std::string_view sql) {
  size_t start = 0;
  while (start < sql.size() && is_space(sql[start])) ++start;
  // Every simple Query of a transaction-mode client comes here: one byte says no for nearly all.
  if (start >= sql.size() || lower(sql[start]) != 'd') return false;
  auto starts_with_word = [&](std::string_view word) {
    const size_t end = start + word.size();
    return iequals_keyword(sql.substr(start, word.size()), word) &&
           (end >= sql.size() || !(is_alnum(sql[end]) || sql[end] == '_' || sql[end] == '$'));
  };
  return starts_with_word("deallocate") || starts_with_word("discard");
}

DeallocateCommand parse_deallocate_command(std::string_view sql) {
  DeallocateCommand out;
  // Every simple Query passes here in transaction mode: look at the first word without
  // allocating, and tokenize only a DEALLOCATE or a DISCARD.
  if (!starts_like_deallocate_command(sql)) return out;
  std::vector<std::string> words;
  if (!simple_words(sql, words) || words.empty()) return out;
  if (words.size() == 2 && words[0] == "discard" && words[1] == "all") {
    out.kind = DeallocateCommand::Kind::discard_all;
    return out;
  }
  if (words[0] != "deallocate") return out;
  size_t n = 1;
  if (n < words.size() && words[n] == "prepare") ++n;
  if (n + 1 != words.size()) return out;
  if (words[n] == "all") {
    out.kind = DeallocateCommand::Kind::deallocate_all;
  } else {
    out.kind = DeallocateCommand::Kind::deallocate_name;
    out.name = words[n][0] == '"' ? words[n].substr(1) : words[n];
  }
  return out;
}

}  // namespace pgsluice::protocol
