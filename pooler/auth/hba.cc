// The auth_hba_file parser and matcher; see auth_hba.h.
#include "pooler/auth/hba.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "pooler/auth/conf_fields.h"
#include "pooler/base/read_file.h"

namespace pgsluice {

namespace {

constexpr int kMaxIncludeDepth = 10;

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string resolve(const std::string& including_file, const std::string& name) {
  if (!name.empty() && name.front() == '/') return name;
  return directory_of(including_file) + "/" + name;
}

class Parser {
 public:
  Parser(std::string name, const HbaFileReader& reader) : name_(std::move(name)), reader_(reader) {
    if (!reader_) reader_ = read_whole_file;
  }

  HbaLoadResult run(const std::string& text) {
    for (ConfLine& l : conf_logical_lines(text)) {
      line_ = l.line;
      parse_line(l.text);
    }
    HbaLoadResult result;
    result.errors = std::move(errors_);
    result.warnings = std::move(warnings_);
    if (result.errors.empty()) result.rules = std::make_shared<const HbaRules>(std::move(rules_));
    return result;
  }

 private:
  void error(const std::string& message) {
    errors_.push_back(name_ + ":" + std::to_string(line_) + ": " + message);
  }
  void warning(const std::string& message) {
    warnings_.push_back(name_ + ":" + std::to_string(line_) + ": " + message);
  }

  static bool single_keyword(const ConfField& f, std::string& out) {
    if (f.size() != 1 || f[0].quoted) return false;
    out = f[0].text;
    return true;
  }

  void parse_line(std::string_view line) {
    std::vector<ConfField> fields;
    std::string err;
    if (!conf_split_fields(line, fields, err)) {
      error(err);
      return;
    }
    if (fields.empty()) return;
    HbaRule rule;
    rule.file = name_;
    rule.line = line_;

    std::string word;
    if (!single_keyword(fields[0], word)) {
      error("invalid connection type: expected local, host, hostssl or hostnossl");
      return;
    }
    if (word == "local") {
      rule.type = HbaConnType::local;
    } else if (word == "host") {
      rule.type = HbaConnType::host;
    } else if (word == "hostssl") {
      rule.type = HbaConnType::hostssl;
    } else if (word == "hostnossl") {
      rule.type = HbaConnType::hostnossl;
    } else if (word == "hostgssenc" || word == "hostnogssenc") {
      error("connection type \"" + word + "\" is not supported: pgsluice has no GSSAPI");
      return;
    } else if (word.starts_with("include")) {
      error("\"" + word + "\" is not supported (PostgreSQL 16's includes); use @file lists");
      return;
    } else {
      error("invalid connection type \"" + word + "\": expected local, host, hostssl or hostnossl");
      return;
    }

    const size_t needed = rule.type == HbaConnType::local ? 4 : 5;
    if (fields.size() < needed) {
      error(rule.type == HbaConnType::local
                ? "too few fields: expected local DATABASE USER METHOD"
                : "too few fields: expected " + word + " DATABASE USER ADDRESS METHOD");
      return;
    }
    if (!parse_names(fields[1], /*is_database=*/true, rule.databases, name_, 0)) return;
    if (!parse_names(fields[2], /*is_database=*/false, rule.users, name_, 0)) return;

    size_t next = 3;
    if (rule.type != HbaConnType::local) {
      if (!parse_address(fields, next, rule)) return;
    }
    if (next >= fields.size()) {
      error("missing authentication method");
      return;
    }
    if (!parse_method(fields[next], rule)) return;
    for (size_t i = next + 1; i < fields.size(); ++i) {
      if (!parse_option(fields[i], rule)) return;
    }
    rules_.push_back(std::move(rule));
  }

  // The names of a DATABASE or USER field, @file lists expanded in place.
  bool parse_names(const ConfField& field, bool is_database, HbaNames& out, const std::string& file,
                   int depth) {
    for (const ConfToken& t : field) {
      if (t.quoted) {
        out.names.insert(t.text);
        continue;
      }
      if (t.text == "all") {
        out.all = true;
      } else if (is_database && t.text == "sameuser") {
        out.sameuser = true;
      } else if (is_database && (t.text == "samerole" || t.text == "samegroup")) {
        error("\"" + t.text +
              "\" is not supported (as in PgBouncer: pgsluice does not know role membership)");
        return false;
      } else if (is_database && t.text == "replication") {
        out.replication = true;
      } else if (!is_database && t.text.front() == '+') {
        error("\"" + t.text +
              "\": +group is not supported (as in PgBouncer: pgsluice does not know role "
              "membership)");
        return false;
      } else if (t.text.front() == '@') {
        if (!include_names(t.text.substr(1), is_database, out, file, depth)) return false;
      } else {
        out.names.insert(t.text);
      }
    }
    return true;
  }

  bool include_names(const std::string& name, bool is_database, HbaNames& out,
                     const std::string& including, int depth) {
    if (name.empty()) {
      error("'@' without a file name");
      return false;
    }
    if (depth >= kMaxIncludeDepth) {
      error("@" + name + ": too many nested @file lists (at most " +
            std::to_string(kMaxIncludeDepth) + ")");
      return false;
    }
    const std::string path = resolve(including, name);
    std::string text, err;
    if (!reader_(path, text, err)) {
      error("@" + name + ": " + path + ": " + err);
      return false;
    }
    // Names separated by blanks, commas or newlines; `#` comments.
    size_t pos = 0;
    int lineno = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + pos, end - pos);
      pos = end + 1;
      ++lineno;
      std::vector<ConfField> fields;
      if (!conf_split_fields(line, fields, err)) {
        error("@" + name + ": " + path + ":" + std::to_string(lineno) + ": " + err);
        return false;
      }
      for (const ConfField& f : fields) {
        if (!parse_names(f, is_database, out, path, depth + 1)) return false;
      }
    }
    return true;
  }

  static bool parse_ip(const std::string& text, int& family, std::array<uint8_t, 16>& out) {
    out.fill(0);
    if (inet_pton(AF_INET, text.c_str(), out.data()) == 1) {
      family = AF_INET;
      return true;
    }
    if (inet_pton(AF_INET6, text.c_str(), out.data()) == 1) {
      family = AF_INET6;
      return true;
    }
    return false;
  }

  bool parse_address(const std::vector<ConfField>& fields, size_t& next, HbaRule& rule) {
    const ConfField& f = fields[next];
    if (f.size() != 1) {
      error("an address field cannot be a list");
      return false;
    }
    const ConfToken& t = f[0];
    ++next;
    if (!t.quoted && t.text == "all") {
      rule.any_address = true;
      return true;
    }
    if (!t.quoted && (t.text == "samehost" || t.text == "samenet")) {
      error("\"" + t.text + "\" is not supported (as in PgBouncer): use an IP address range");
      return false;
    }
    const size_t slash = t.text.find('/');
    const std::string addr = t.text.substr(0, slash);
    if (!parse_ip(addr, rule.family, rule.address)) {
      error("invalid IP address \"" + addr + "\" (host names are not supported, as in PgBouncer)");
      return false;
    }
    const int max_bits = rule.family == AF_INET ? 32 : 128;
    if (slash != std::string::npos) {
      const std::string bits_text = t.text.substr(slash + 1);
      int bits = -1;
      auto [ptr, ec] = std::from_chars(bits_text.data(), bits_text.data() + bits_text.size(), bits);
      if (bits_text.empty() || ec != std::errc{} || ptr != bits_text.data() + bits_text.size() ||
          bits < 0 || bits > max_bits) {
        error("invalid CIDR mask in address \"" + t.text + "\"");
        return false;
      }
      rule.mask.fill(0);
      for (int i = 0; i < bits; ++i) {
        rule.mask[static_cast<size_t>(i / 8)] |= static_cast<uint8_t>(0x80 >> (i % 8));
      }
      return true;
    }
    // An address without /bits: the mask is the next field.
    if (next >= fields.size() || fields[next].size() != 1) {
      error("address \"" + t.text + "\" needs /bits or a mask in the next field");
      return false;
    }
    int mask_family = AF_UNSPEC;
    const std::string& mask_text = fields[next][0].text;
    if (!parse_ip(mask_text, mask_family, rule.mask) || mask_family != rule.family) {
      error("invalid IP mask \"" + mask_text + "\" for address \"" + t.text + "\"");
      return false;
    }
    ++next;
    return true;
  }

  bool parse_method(const ConfField& f, HbaRule& rule) {
    std::string word;
    if (!single_keyword(f, word)) {
      error("invalid authentication method");
      return false;
    }
    if (word == "trust") {
      rule.method = HbaMethod::trust;
    } else if (word == "reject") {
      rule.method = HbaMethod::reject;
    } else if (word == "md5") {
      rule.method = HbaMethod::md5;
    } else if (word == "password") {
      rule.method = HbaMethod::password;
    } else if (word == "scram-sha-256") {
      rule.method = HbaMethod::scram_sha_256;
    } else if (word == "cert") {
      rule.method = HbaMethod::cert;
    } else if (word == "peer" || (word == "ident" && rule.type == HbaConnType::local)) {
      // PostgreSQL takes ident on a local line as peer.
      rule.method = HbaMethod::peer;
    } else if (word == "ident" || word == "gss" || word == "sspi" || word == "pam" ||
               word == "ldap" || word == "radius" || word == "bsd") {
      error("authentication method \"" + word + "\" is not supported by pgsluice");
      return false;
    } else {
      error("invalid authentication method \"" + word + "\"");
      return false;
    }
    // PostgreSQL refuses these two lines, PgBouncer takes them: the line matches, and a
    // connection that cannot use the method (no TLS, not the Unix socket) is refused
    // (Client::login_by_certificate, peer_matches). pgsluice reads them as PgBouncer does.
    if (rule.method == HbaMethod::cert && rule.type != HbaConnType::hostssl) {
      warning("cert on a " + word_of(rule.type) +
              " line (PostgreSQL allows it on hostssl only): a connection without TLS that "
              "matches it is refused, as in PgBouncer");
    }
    if (rule.method == HbaMethod::peer && rule.type != HbaConnType::local) {
      warning("peer on a " + word_of(rule.type) +
              " line (PostgreSQL allows it on local only): a TCP connection that matches it is "
              "refused, as in PgBouncer");
    }
    if (rule.method == HbaMethod::cert) rule.clientcert = HbaClientCert::verify_full;
    return true;
  }

  static std::string word_of(HbaConnType type) {
    switch (type) {
      case HbaConnType::local:
        return "local";
      case HbaConnType::host:
        return "host";
      case HbaConnType::hostssl:
        return "hostssl";
      case HbaConnType::hostnossl:
        return "hostnossl";
    }
    return "?";
  }

  bool parse_option(const ConfField& f, HbaRule& rule) {
    if (f.size() != 1) {
      error("an option cannot be a list");
      return false;
    }
    const std::string& text = f[0].text;
    const size_t eq = text.find('=');
    if (eq == std::string::npos) {
      error("authentication option not in name=value format: " + text);
      return false;
    }
    const std::string key = text.substr(0, eq);
    const std::string value = text.substr(eq + 1);
    if (key == "clientcert") {
      if (rule.type != HbaConnType::hostssl) {
        error("clientcert can only be configured for \"hostssl\" rows");
        return false;
      }
      if (value == "verify-full") {
        rule.clientcert = HbaClientCert::verify_full;
      } else if (value == "verify-ca") {
        if (rule.method == HbaMethod::cert) {
          error("clientcert only accepts \"verify-full\" when using \"cert\" authentication");
          return false;
        }
        rule.clientcert = HbaClientCert::verify_ca;
      } else {
        error("invalid value for clientcert: \"" + value +
              "\" (expected verify-ca or verify-full)");
        return false;
      }
      return true;
    }
    if (key == "map") {
      // The map names who may be whom for peer and cert. PostgreSQL refuses it with the other
      // methods; PgBouncer takes it (the map must exist) and has no use for it: so does pgsluice.
      if (value.empty()) {
        error("authentication option \"map\" needs a map name");
        return false;
      }
      if (rule.method != HbaMethod::peer && rule.method != HbaMethod::cert) {
        warning("map=" + value + " has no effect with " + std::string(to_string(rule.method)) +
                " (only with peer and cert), as in PgBouncer");
      }
      rule.map = value;
      return true;
    }
    error("unknown or unsupported authentication option \"" + key + "\"");
    return false;
  }

  std::string name_;
  HbaFileReader reader_;
  int line_ = 0;
  std::vector<HbaRule> rules_;
  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
};

bool names_match(const HbaNames& n, std::string_view name, std::string_view other) {
  if (n.all) return true;
  if (n.sameuser && name == other) return true;
  return n.names.find(std::string(name)) != n.names.end();
}

// The client's address bytes as the rule's family sees them: an IPv4-mapped IPv6 client (a
// listener on "::") matches IPv4 rules. An IPv4 client matches no IPv6 rule, as in PostgreSQL
// and PgBouncer: a file that says `::/0 md5` before `0.0.0.0/0 cert` means the IPv4 clients to
// reach the second line.
bool client_bytes(const sockaddr* sa, int rule_family, std::array<uint8_t, 16>& out) {
  out.fill(0);
  if (sa == nullptr) return false;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    if (rule_family != AF_INET) return false;
    std::memcpy(out.data(), &in->sin_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    const auto* b = reinterpret_cast<const uint8_t*>(&in6->sin6_addr);
    if (rule_family == AF_INET6) {
      std::memcpy(out.data(), b, 16);
      return true;
    }
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(b, kMapped, 12) != 0) return false;
    std::memcpy(out.data(), b + 12, 4);
    return true;
  }
  return false;
}

bool address_matches(const HbaRule& rule, const sockaddr* sa) {
  if (rule.any_address) return true;
  std::array<uint8_t, 16> client{};
  if (!client_bytes(sa, rule.family, client)) return false;
  const size_t len = rule.family == AF_INET ? 4 : 16;
  for (size_t i = 0; i < len; ++i) {
    if ((client[i] & rule.mask[i]) != (rule.address[i] & rule.mask[i])) return false;
  }
  return true;
}

}  // namespace

std::string_view to_string(HbaMethod method) {
  switch (method) {
    case HbaMethod::trust:
      return "trust";
    case HbaMethod::reject:
      return "reject";
    case HbaMethod::md5:
      return "md5";
    case HbaMethod::password:
      return "password";
    case HbaMethod::scram_sha_256:
      return "scram-sha-256";
    case HbaMethod::cert:
      return "cert";
    case HbaMethod::peer:
      return "peer";
  }
  return "?";
}

const HbaRule* HbaRules::match(const HbaConnection& conn) const {
  for (const HbaRule& rule : rules_) {
    if (conn.local) {
      if (rule.type != HbaConnType::local) continue;
    } else {
      if (rule.type == HbaConnType::local) continue;
      if (rule.type == HbaConnType::hostssl && !conn.tls) continue;
      if (rule.type == HbaConnType::hostnossl && conn.tls) continue;
      if (!address_matches(rule, conn.address)) continue;
    }
    if (conn.physical_replication) {
      // A physical walsender is attached to no database: PostgreSQL's check_db.
      if (!rule.databases.replication) continue;
    } else if (!names_match(rule.databases, conn.database, conn.user)) {
      continue;
    }
    if (!names_match(rule.users, conn.user, conn.database)) continue;
    return &rule;
  }
  return nullptr;
}

HbaLoadResult parse_hba_text(const std::string& text, const std::string& name,
                             const HbaFileReader& reader) {
  return Parser(name, reader).run(text);
}

HbaLoadResult load_hba_file(const std::string& path) {
  std::string text, err;
  if (!read_whole_file(path, text, err)) {
    HbaLoadResult result;
    result.errors.push_back(path + ": " + err);
    return result;
  }
  return parse_hba_text(text, path);
}

std::string hba_host_name(const sockaddr* address) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (address == nullptr) return "[local]";
  if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, buf, sizeof buf);
  } else if (address->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, buf,
              sizeof buf);
  } else {
    return "[local]";
  }
  return buf;
}

}  // namespace pgsluice
