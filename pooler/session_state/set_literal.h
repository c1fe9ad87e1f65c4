// What a plain `SET name = constant` leaves, without asking the server each time (the `keep`
// action for settings, kept_settings.h). Reading a SET back costs a query per SET: a client that
// runs `SET work_mem = '64MB'` in every transaction lost 29 % of its throughput to it. Most such
// SETs are the same few statements again and again, and for most settings what PostgreSQL shows
// after `SET name = x` depends on x alone. So the pooler reads the value back the first time it
// sees (name, x) on a pool and remembers what the server showed; the next time, once the SET
// has committed, it takes the remembered value instead of asking.
//
// Only where that is exact:
//   - the statement is `SET [SESSION] name {= | TO} value` with one value: a string literal
//     without backslashes or prefix, an unsigned integer, or an unquoted ASCII word (PostgreSQL
//     lowercases it): what the GUC is given is then known from the text alone;
//   - `name` is one of PostgreSQL's boolean, integer, real or enum settings a user or superuser
//     may SET (kDeterministicSettings in set_literal.cc). Their value is parsed into a number or
//     an enum and shown from it: nothing of the session (search_path for
//     default_text_search_config, the socket for tcp_keepalives_*) enters what SHOW answers.
//     Strings, lists (search_path's quoting of a literal is its own), extensions' settings and
//     the per-transaction ones (transaction_isolation) are always read back;
//   - the caller knows the SET committed (session_checks.cc: a one-statement Query sent on an
//     idle server that owed nothing, no error since, nothing else flagged before the boundary).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgsluice {

// The value PostgreSQL's grammar hands to the setting for `statement`, when it is the plain form
// above for the setting `name` (compared case-insensitively); nullopt for anything else.
std::optional<std::string> simple_set_literal(std::string_view statement, std::string_view name);

// Whether what SHOW answers after `SET lowercase_name = x` depends on x alone (see above).
bool is_deterministic_setting(std::string_view lowercase_name);

// The values servers showed after a SET, by the server's version, the setting and the literal.
// One per pool; a few entries (applications SET a handful of values), bounded.
class SetValueCache {
 public:
  static constexpr size_t kMaxEntries = 256;

  [[nodiscard]] const std::string* find(std::string_view version, std::string_view name,
                                        std::string_view literal) const;
  // Remembers `value` (a read-back's answer); beyond kMaxEntries nothing new is remembered.
  void learn(std::string_view version, std::string_view name, std::string_view literal,
             std::string_view value);
  [[nodiscard]] size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string version;
    std::string name;
    std::string literal;
    std::string value;
  };
  std::vector<Entry> entries_;
};

}  // namespace pgsluice
