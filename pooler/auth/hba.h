// auth_hba_file (auth_type = hba): PostgreSQL's pg_hba.conf format with PgBouncer's subset of it.
// Each line is `local DATABASE USER METHOD [OPTIONS]` or `host|hostssl|hostnossl DATABASE USER
// ADDRESS METHOD [OPTIONS]`; the first line that matches a connection decides its method, and a
// connection no line matches is refused.
//
//   DATABASE  all, sameuser, replication, names, @file; comma-separated. Not
//             samerole/samegroup. As in PostgreSQL (and PgBouncer), a physical replication
//             connection (replication=true) matches only `replication`, never `all` or a name;
//             a logical one (replication=database) matches as a normal connection to its
//             database, and `replication` matches no normal or logical connection.
//   USER      all, names, @file; comma-separated. Not +group (PgBouncer has no roles either).
//   ADDRESS   all, an IPv4 or IPv6 address with /bits, or an address and a mask in the next
//             field. Not host names, samehost or samenet (as PgBouncer).
//   METHOD    trust, reject, md5, password, scram-sha-256, cert, peer. PostgreSQL takes cert on
//             hostssl lines only and peer on local ones only; PgBouncer takes both on any line,
//             and so does pgsluice (with a warning): a connection that cannot use the method
//             (no TLS for cert, not the Unix socket for peer) is refused.
//   OPTIONS   clientcert=verify-ca|verify-full (hostssl only), as PostgreSQL; map=NAME: for peer
//             and cert, who may log in as whom comes from auth_ident_file's map NAME (ident.h)
//             instead of the OS user or certificate CN being the user; with another method it
//             has no effect (a warning; PgBouncer takes it too, PostgreSQL refuses it).
//
// As in PostgreSQL: fields are separated by blanks, `#` starts a comment, a double-quoted name
// keeps blanks, commas and `#` and loses any keyword meaning ("all" is a user named all), a
// trailing backslash continues the line, @file names a file (relative to the including file's
// directory) of more names. Keywords are lower case. As in PgBouncer, blanks around a list's
// commas do not end the list (`a , b` is one field). So every line PgBouncer takes is taken,
// with PgBouncer's meaning, but `ldap` (pgsluice has no LDAP: PgBouncer built with it would
// log such users in). Any error makes the whole file invalid (PostgreSQL keeps its old rules
// then, PgBouncer skips the line): an access-control file half applied could let in what a
// skipped line was written to keep out.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace pgsluice {

enum class HbaConnType { local, host, hostssl, hostnossl };
enum class HbaMethod { trust, reject, md5, password, scram_sha_256, cert, peer };
enum class HbaClientCert { none, verify_ca, verify_full };

std::string_view to_string(HbaMethod method);

struct HbaNames {
  bool all = false;
  bool sameuser = false;     // database field only: the database named as the user
  bool replication = false;  // database field only: physical replication connections
  std::set<std::string> names;
};

struct HbaRule {
  std::string file;
  int line = 0;
  HbaConnType type = HbaConnType::host;
  HbaNames databases;
  HbaNames users;
  bool any_address = false;  // `all`
  int family = AF_UNSPEC;    // AF_INET or AF_INET6 (host lines without `all`)
  std::array<uint8_t, 16> address{};
  std::array<uint8_t, 16> mask{};
  HbaMethod method = HbaMethod::reject;
  HbaClientCert clientcert = HbaClientCert::none;
  std::string map;  // map=: the auth_ident_file map (peer, cert); empty: the user's own name
};

// Who is connecting, as the rules see it.
struct HbaConnection {
  bool local = false;                 // over the Unix socket
  bool tls = false;                   // TLS is in use
  const sockaddr* address = nullptr;  // the peer (TCP), AF_INET or AF_INET6
  std::string_view database;
  std::string_view user;
  bool physical_replication = false;  // replication=true: only the `replication` keyword
};

class HbaRules {
 public:
  explicit HbaRules(std::vector<HbaRule> rules) : rules_(std::move(rules)) {}
  // The first rule that matches, or nullptr (then PostgreSQL's "no pg_hba.conf entry").
  [[nodiscard]] const HbaRule* match(const HbaConnection& conn) const;
  [[nodiscard]] const std::vector<HbaRule>& rules() const { return rules_; }

 private:
  std::vector<HbaRule> rules_;
};

struct HbaLoadResult {
  std::shared_ptr<const HbaRules> rules;  // null when errors is not empty
  std::vector<std::string> errors;        // "file:line: message"
  std::vector<std::string> warnings;      // lines taken as PgBouncer takes them, not PostgreSQL
};

// Reads a whole file (for @file includes); false with `error` set when it cannot.
using HbaFileReader =
    std::function<bool(const std::string& path, std::string& text, std::string& error)>;

// Parses `text` as the file `name`; @file names are resolved against the directory of `name`
// and read with `reader` (the file system when empty).
HbaLoadResult parse_hba_text(const std::string& text, const std::string& name,
                             const HbaFileReader& reader = {});
HbaLoadResult load_hba_file(const std::string& path);

// The client's address as PostgreSQL prints it in its hba messages ("127.0.0.1", "::1").
std::string hba_host_name(const sockaddr* address);

}  // namespace pgsluice
