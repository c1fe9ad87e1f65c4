// DEALLOCATE and DISCARD ALL recognised; see deallocate.h.
#include "pgsluice/protocol/deallocate.h"

#include <vector>

namespace pgsluice::protocol {

namespace {
// ASCII only, as PostgreSQL's scanner: std::isspace/std::tolower are locale-aware calls into libc,
// and the prefilter below runs on every simple Query in transaction mode.
constexpr bool ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}
constexpr char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
constexpr bool ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Splits SQL into lower-cased words, stopping at the first ';' (a trailing one is allowed) and
// giving up on anything but simple words and quoted identifiers.
bool simple_words(std::string_view sql, std::vector<std::string>& words) {
  size_t i = 0;
  while (i < sql.size()) {
    char c = sql[i];
    if (ascii_space(c)) {
      ++i;
    } else if (c == ';') {
      for (++i; i < sql.size(); ++i) {
        if (!ascii_space(sql[i])) return false;
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
    } else if (ascii_alnum(c) || c == '_') {
      std::string word;
      while (i < sql.size() && (ascii_alnum(sql[i]) || sql[i] == '_' || sql[i] == '$')) {
        word.push_back(ascii_lower(sql[i]));
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

DeallocateCommand parse_deallocate_command(std::string_view sql) {
  DeallocateCommand out;
  // Every simple Query passes here in transaction mode: look at the first word without
  // allocating, and tokenize only a DEALLOCATE or a DISCARD.
  size_t start = 0;
  while (start < sql.size() && ascii_space(sql[start])) ++start;
  auto starts_with_word = [&](std::string_view word) {
    if (sql.size() - start < word.size()) return false;
    for (size_t i = 0; i < word.size(); ++i) {
      if (ascii_lower(sql[start + i]) != word[i]) return false;
    }
    return true;
  };
  if (!starts_with_word("deallocate") && !starts_with_word("discard")) return out;
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
