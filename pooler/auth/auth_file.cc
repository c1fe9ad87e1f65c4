// The auth_file parser: PgBouncer's userlist.txt, one `"user" "secret"` per line. Every bad line
// is reported with its line number; the good lines are still returned.
#include "pooler/auth/auth_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "pooler/base/read_file.h"

namespace pgsluice {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

// Reads a double-quoted string starting at line[i] == '"', where "" stands for one quote.
// Advances i past the closing quote; false when it is missing.
bool read_quoted(std::string_view line, size_t& i, std::string& out) {
  out.clear();
  ++i;
  while (i < line.size()) {
    if (line[i] == '"') {
      if (i + 1 < line.size() && line[i + 1] == '"') {
        out += '"';
        i += 2;
        continue;
      }
      ++i;
      return true;
    }
    out += line[i++];
  }
  return false;
}

// A secret that announces a SCRAM verifier must be one: "SCRAM-SHA-256$<iterations>:<salt>$
// <stored key>:<server key>". PostgreSQL would take a malformed one as a plain password, which
// is never what the author of the line meant. (A local check: the protocol library's
// is_scram_verifier is not needed to parse the file.)
bool looks_like_scram_verifier(std::string_view secret) {
  constexpr std::string_view kPrefix = "SCRAM-SHA-256$";
  secret.remove_prefix(kPrefix.size());
  const size_t colon1 = secret.find(':');
  const size_t dollar = secret.find('$');
  if (colon1 == std::string_view::npos || dollar == std::string_view::npos || colon1 == 0 ||
      dollar < colon1 + 2) {
    return false;
  }
  for (size_t i = 0; i < colon1; ++i) {
    if (secret[i] < '0' || secret[i] > '9') return false;
  }
  const std::string_view keys = secret.substr(dollar + 1);
  const size_t colon2 = keys.find(':');
  return colon2 != std::string_view::npos && colon2 > 0 && colon2 + 1 < keys.size();
}

}  // namespace

AuthFileResult parse_auth_file_text(const std::string& text, const std::string& name) {
  AuthFileResult result;
  int lineno = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++lineno;
    auto fail = [&](const std::string& message) {
      result.errors.push_back(name + ":" + std::to_string(lineno) + ": " + message);
    };

    size_t i = 0;
    while (i < line.size() && is_space(line[i])) ++i;
    // PgBouncer itself only knows ';' comments; '#' is accepted as in the config file.
    if (i == line.size() || line[i] == ';' || line[i] == '#') continue;
    if (line[i] != '"') {
      fail("expected a double-quoted user name");
      continue;
    }
    std::string user, secret;
    if (!read_quoted(line, i, user)) {
      fail("unterminated quoted user name");
      continue;
    }
    const size_t after_user = i;
    while (i < line.size() && is_space(line[i])) ++i;
    if (i == line.size() || line[i] != '"' || i == after_user) {
      fail("expected whitespace and a double-quoted secret after the user name");
      continue;
    }
    if (!read_quoted(line, i, secret)) {
      fail("unterminated quoted secret");
      continue;
    }
    // More double-quoted fields are ignored, as PgBouncer does (PostgreSQL's old pg_auth file
    // had a third one); anything else is a mistake worth reporting.
    bool trailing_ok = true;
    while (trailing_ok) {
      const size_t before = i;
      while (i < line.size() && is_space(line[i])) ++i;
      if (i == line.size()) break;
      std::string ignored;
      trailing_ok = i > before && line[i] == '"' && read_quoted(line, i, ignored);
    }
    if (!trailing_ok) {
      fail("unexpected text after the secret of user '" + user + "'");
      continue;
    }
    if (user.empty()) {
      fail("empty user name");
      continue;
    }
    if (secret.starts_with("SCRAM-SHA-256$") && !looks_like_scram_verifier(secret)) {
      fail("the secret of user '" + user + "' is not a valid SCRAM-SHA-256 verifier");
      continue;
    }
    result.secrets[user] = std::move(secret);  // a user listed twice: the later line wins
  }
  return result;
}

AuthFileResult load_auth_file(const std::string& path) {
  std::string text, error;
  if (!read_whole_file(path, text, error)) {
    AuthFileResult result;
    result.errors.push_back(path + ": " + error);
    return result;
  }
  return parse_auth_file_text(text, path);
}

}  // namespace pgsluice
