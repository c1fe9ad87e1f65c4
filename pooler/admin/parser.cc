// The admin console's command grammar; see admin_parser.h.
#include "pooler/admin/parser.h"

#include <cctype>

namespace pgsluice {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }
  [[nodiscard]] bool at_end() {
    skip_space();
    return pos_ >= s_.size();
  }
  // The optional trailing ';' and nothing after it.
  [[nodiscard]] bool at_statement_end() {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == ';') {
      ++pos_;
      skip_space();
    }
    return pos_ >= s_.size();
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool take(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  // A bare word (kept as written) or a "quoted" one ("" inside is one quote); quoted tells which.
  std::optional<std::string> word(bool* quoted = nullptr) {
    skip_space();
    if (quoted != nullptr) *quoted = false;
    if (pos_ < s_.size() && s_[pos_] == '"') {
      if (quoted != nullptr) *quoted = true;
      return delimited('"');
    }
    size_t start = pos_;
    while (pos_ < s_.size() && is_word_char(s_[pos_])) ++pos_;
    if (pos_ == start) return std::nullopt;
    return std::string(s_.substr(start, pos_ - start));
  }
  // A SET value: a 'string', a "name", or a run of characters up to space or ';'.
  std::optional<std::string> value() {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '\'') return delimited('\'');
    if (pos_ < s_.size() && s_[pos_] == '"') return delimited('"');
    size_t start = pos_;
    while (pos_ < s_.size() && !is_space(s_[pos_]) && s_[pos_] != ';') ++pos_;
    if (pos_ == start) return std::nullopt;
    return std::string(s_.substr(start, pos_ - start));
  }

 private:
  std::optional<std::string> delimited(char q) {
    std::string out;
    ++pos_;
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == q) {
        if (pos_ < s_.size() && s_[pos_] == q) {
          out += q;
          ++pos_;
          continue;
        }
        return out;
      }
      out += c;
    }
    return std::nullopt;  // unterminated
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

AdminParseResult parse_admin_command(std::string_view sql) {
  AdminParseResult result;
  Lexer lx(sql);
  if (lx.at_statement_end()) {
    result.empty = true;
    return result;
  }
  Lexer body(sql);
  bool quoted = false;
  std::optional<std::string> verb = body.word(&quoted);
  if (!verb || quoted) return result;
  AdminCommand cmd;
  cmd.verb = upper(*verb);
  if (cmd.verb == "SET") {
    std::optional<std::string> key = body.word();
    if (!key) return result;
    if (!body.take('=')) {
      std::optional<std::string> to = body.word();
      if (!to || upper(*to) != "TO") return result;
    }
    std::optional<std::string> value = body.value();
    if (!value || !body.at_statement_end()) return result;
    cmd.set_key = lower(*key);
    cmd.set_value = *value;
    result.command = std::move(cmd);
    return result;
  }
  if (!body.at_end() && !body.peek(';')) {
    std::optional<std::string> arg = body.word(&quoted);
    if (!arg) return result;
    // SHOW's subject and SHUTDOWN's mode are keywords; a database name keeps its case.
    cmd.arg = quoted ? *arg : (cmd.verb == "SHOW" || cmd.verb == "SHUTDOWN" ? upper(*arg) : *arg);
    cmd.has_arg = true;
  }
  if (!body.at_statement_end()) return result;
  result.command = std::move(cmd);
  return result;
}

}  // namespace pgsluice
