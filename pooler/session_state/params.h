// The session parameters a pooled client carries from server to server. Two kinds:
// - tracked: the parameters PostgreSQL reports with ParameterStatus (client_encoding, DateStyle,
//   IntervalStyle, TimeZone, standard_conforming_strings, application_name), whose current value
//   on a server is always known;
// - startup extras: any other setting a client gave at startup (extra_float_digits, search_path,
//   `options=-c name=value`), which the server does not report, so the pooler remembers what it
//   applied itself on each server.
// When a client gets a server whose values differ, one query brings the server in line.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pooler/base/text.h"  // iequals: names compare as GUC names do

namespace pgsluice {

// A small map of name → value; names compare case-insensitively, as GUC names do. Items are kept
// sorted by their ASCII-folded name, so two sets with the same contents have equal items whatever
// order they were filled in, and the items are also kept packed into one string: the check "does
// this server already match this client", made at every link, compares the packed strings. Sets
// change rarely (a ParameterStatus, a SET), links constantly; the packing is redone at the first
// comparison after a change, so that a server reporting many parameters in a row costs a binary
// search per report, not a repacking.
//
// Two sets found equal then share one packed string (immutable, reference-counted), so that the
// next comparison of either with the other, or with any set that shares it, compares two
// pointers: in a pool whose clients and servers have the same settings every set ends up sharing
// one string, and a link reads no parameter bytes at all. (Comparing the strings themselves read
// some 300 bytes of each of four sets per link: at 20 clients, the most cache misses of any step
// of a transaction.)
class ParameterSet {
 public:
  void set(std::string_view name, std::string_view value);
  // Adds every item of `other` whose name this set does not have; the names this set has keep
  // their values. One merge of the two sorted lists into an array sized once, where a set() per
  // item moved the array's tail for each (a login adds the server's 14 parameters this way).
  void add_missing(const ParameterSet& other);
  [[nodiscard]] const std::string* get(std::string_view name) const;
  void erase(std::string_view name);
  void clear() {
    items_.clear();
    packed_.reset();
    packed_stale_ = false;
  }
  // Room for n items: a set filled at once (a client's parameters at login) then allocates once
  // and leaves no smaller freed arrays behind it in the heap.
  void reserve(size_t n) { items_.reserve(n); }
  [[nodiscard]] bool empty() const { return items_.empty(); }
  [[nodiscard]] size_t size() const { return items_.size(); }
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& items() const {
    return items_;
  }
  // Same names (as spelled) with the same values. Not thread-safe for one set compared from two
  // threads at once (it may adopt the other's packed string); sets belong to one client or
  // server, used by one worker at a time.
  bool operator==(const ParameterSet& other) const {
    if (packed_stale_) repack();
    if (other.packed_stale_) other.repack();
    if (packed_ == other.packed_) return true;  // shared, or both empty
    return equal_contents_then_share(other);
  }
  // Whether the two share their packed string (for tests: what makes the next comparison cheap).
  [[nodiscard]] bool shares_packing_with(const ParameterSet& other) const {
    return packed_ != nullptr && packed_ == other.packed_;
  }

 private:
  void repack() const;
  bool equal_contents_then_share(const ParameterSet& other) const;

  std::vector<std::pair<std::string, std::string>> items_;
  // name NUL value NUL …, in the items' order: equal exactly when the items are, since no name
  // or value holds a NUL (the protocol's strings end at one; set() cuts a value at one). Null
  // when the set is empty; never modified once made (a change makes a new one at repack), so
  // that sets may share it.
  mutable std::shared_ptr<const std::string> packed_;
  mutable bool packed_stale_ = false;
};

// The two settings of who the session is. Special in three ways: RESET ALL leaves them
// (GUC_NO_RESET_ALL), setting or resetting the session authorization resets the role, and neither
// is in pg_settings.
inline constexpr std::string_view kRole = "role";
inline constexpr std::string_view kSessionAuthorization = "session_authorization";
bool is_role_setting(std::string_view name);

// The tracked parameter's canonical spelling ("datestyle" → "DateStyle"), or empty when `name`
// is not tracked.
std::string_view tracked_parameter_name(std::string_view name);

// One simple query that makes a server's parameters equal to what the client wants: tracked
// values that differ are set with SET (PgBouncer's form), extras that differ with
// set_config(…, false), extras the server has but the client does not are reset. Empty when nothing
// differs. `server_extras` is updated to the client's extras (the caller applies the query).
std::string build_parameter_sync_query(const ParameterSet& client_tracked,
                                       const ParameterSet& server_tracked,
                                       const ParameterSet& client_extras,
                                       ParameterSet& server_extras);

// Quotes a value as an SQL string literal ('…' with quotes doubled; E'…' when it has a backslash).
std::string quote_literal(std::string_view value);
// Quotes an identifier when it is not a plain lower-case name.
std::string quote_identifier(std::string_view name);

}  // namespace pgsluice
