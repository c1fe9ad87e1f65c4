// Parameter sets, startup `options` parsing and the query that syncs a server to a client.
#include "pooler/session_state/params.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace pgsluice {

namespace {
constexpr std::array<std::string_view, 6> kTracked = {
    "client_encoding", "DateStyle", "IntervalStyle", "TimeZone", "standard_conforming_strings",
    "application_name"};

// ASCII case-insensitive "a < b", the order ParameterSet keeps its items in.
bool iless(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    char x = ascii_lower(a[i]);
    char y = ascii_lower(b[i]);
    if (x != y) return x < y;
  }
  return a.size() < b.size();
}

// Where `name` is or would go in the sorted items.
template <class Items>
auto lower_bound_of(Items& items, std::string_view name) {
  return std::lower_bound(
      items.begin(), items.end(), name,
      [](const auto& item, std::string_view n) { return iless(item.first, n); });
}

}  // namespace

void ParameterSet::set(std::string_view name, std::string_view value) {
  // A NUL would make two different sets pack alike; the protocol cannot carry one anyway.
  name = name.substr(0, name.find('\0'));
  value = value.substr(0, value.find('\0'));
  auto it = lower_bound_of(items_, name);
  if (it != items_.end() && iequals(it->first, name)) {
    if (it->second == value) return;
    it->second.assign(value);
  } else {
    items_.emplace(it, std::string(name), std::string(value));
  }
  packed_stale_ = true;
}

void ParameterSet::add_missing(const ParameterSet& other) {
  std::vector<std::pair<std::string, std::string>> merged;
  merged.reserve(items_.size() + other.items_.size());
  auto mine = items_.begin();
  auto theirs = other.items_.begin();
  while (mine != items_.end() || theirs != other.items_.end()) {
    if (theirs == other.items_.end() ||
        (mine != items_.end() && iless(mine->first, theirs->first))) {
      merged.push_back(std::move(*mine++));
    } else if (mine == items_.end() || iless(theirs->first, mine->first)) {
      merged.push_back(*theirs++);
    } else {  // the same name: this set's value stays
      merged.push_back(std::move(*mine++));
      ++theirs;
    }
  }
  if (merged.size() != items_.size()) packed_stale_ = true;
  items_ = std::move(merged);
}

void ParameterSet::repack() const {
  packed_stale_ = false;
  packed_.reset();
  if (items_.empty()) return;
  // Sized once: every client keeps one of these until it shares another's, and growing it by
  // doubling left the smaller strings freed between long-lived objects (heap that an idle pooler
  // cannot give back).
  size_t size = 0;
  for (const auto& [name, value] : items_) size += name.size() + value.size() + 2;
  auto packed = std::make_shared<std::string>();
  packed->reserve(size);
  for (const auto& [name, value] : items_) {
    packed->append(name).push_back('\0');
    packed->append(value).push_back('\0');
  }
  packed_ = std::move(packed);
}

bool ParameterSet::equal_contents_then_share(const ParameterSet& other) const {
  if (packed_ == nullptr || other.packed_ == nullptr || *packed_ != *other.packed_) return false;
  // Both keep the string at the lower address: whichever pairs meet, the sets of a pool whose
  // settings agree converge on one string (each adoption moves a set to a lower one), and the
  // other strings are freed as their last set leaves them.
  if (packed_.get() < other.packed_.get()) {
    other.packed_ = packed_;
  } else {
    packed_ = other.packed_;
  }
  return true;
}

const std::string* ParameterSet::get(std::string_view name) const {
  auto it = lower_bound_of(items_, name);
  return it != items_.end() && iequals(it->first, name) ? &it->second : nullptr;
}

void ParameterSet::erase(std::string_view name) {
  auto it = lower_bound_of(items_, name);
  if (it != items_.end() && iequals(it->first, name)) {
    items_.erase(it);
    packed_stale_ = true;
  }
}

std::string_view tracked_parameter_name(std::string_view name) {
  for (std::string_view t : kTracked) {
    if (iequals(t, name)) return t;
  }
  return {};
}

std::string quote_literal(std::string_view value) {
  std::string out;
  bool backslash = value.find('\\') != std::string_view::npos;
  out.reserve(value.size() + 3);
  if (backslash) out.push_back('E');
  out.push_back('\'');
  for (char c : value) {
    if (c == '\'') out.push_back('\'');
    if (c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

std::string quote_identifier(std::string_view name) {
  bool plain =
      !name.empty() && (std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.')) {
      plain = false;
    }
  }
  if (plain) return std::string(name);
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

bool is_role_setting(std::string_view name) {
  return iequals(name, kRole) || iequals(name, kSessionAuthorization);
}

std::string build_parameter_sync_query(const ParameterSet& client_tracked,
                                       const ParameterSet& server_tracked,
                                       const ParameterSet& client_extras,
                                       ParameterSet& server_extras) {
  // The usual case at every link: the server already has the client's values. Both sets are
  // sorted and packed, so equal contents are one memcmp; anything else takes the walk below.
  if (client_extras == server_extras && client_tracked == server_tracked) return {};
  std::string sets;
  auto add_set = [&sets](std::string_view name, std::string_view value) {
    sets += sets.empty() ? "SELECT " : ", ";
    sets += "pg_catalog.set_config(";
    sets += quote_literal(name);
    sets += ", ";
    sets += quote_literal(value);
    sets += ", false)";
  };
  // The parameters PgBouncer tracks too are set as PgBouncer sets them (`SET DateStyle='ISO';`,
  // the same as set_config(…, false) for these, none of which is a quoted list), so that the
  // varcache_apply line (Server::sync_parameters) reads as PgBouncer's.
  std::string tracked_sets;
  for (const auto& [name, value] : client_tracked.items()) {
    // Reported parameters a client cannot set (server_version, is_superuser, …) are not synced.
    const std::string_view canonical = tracked_parameter_name(name);
    if (canonical.empty()) continue;
    const std::string* current = server_tracked.get(name);
    if (current != nullptr && *current == value) continue;
    tracked_sets += "SET ";
    tracked_sets += canonical;
    tracked_sets += '=';
    tracked_sets += quote_literal(value);
    tracked_sets += ';';
  }
  // Who the session is goes around the settings, so that the replay has the privileges the
  // client had: a superuser-only setting the client made before it became a less privileged
  // role needs the login role. So a server that runs as another identity goes back to the login
  // role first (RESET ROLE, RESET SESSION AUTHORIZATION: always allowed), the settings are
  // applied as the login role (which could make each of them: the pool logs in as the client's
  // user), then the client's session authorization (which resets the role) and its role last.
  auto differ = [](const std::string* a, const std::string* b) {
    return a == nullptr || b == nullptr ? a != b : *a != *b;
  };
  const std::string* authorization = client_extras.get(kSessionAuthorization);
  const std::string* role = client_extras.get(kRole);
  const std::string* server_authorization = server_extras.get(kSessionAuthorization);
  const std::string* server_role = server_extras.get(kRole);
  for (const auto& [name, value] : client_extras.items()) {
    if (is_role_setting(name)) continue;
    const std::string* current = server_extras.get(name);
    if (current == nullptr || *current != value) add_set(name, value);
  }
  std::string resets;
  for (const auto& [name, value] : server_extras.items()) {
    if (is_role_setting(name) || client_extras.get(name) != nullptr) continue;
    resets += "RESET ";
    resets += quote_identifier(name);
    resets += ";";
  }
  const bool settings_change = !tracked_sets.empty() || !sets.empty() || !resets.empty();
  const bool identity_changes =
      differ(authorization, server_authorization) || differ(role, server_role);
  const bool server_has_identity = server_authorization != nullptr || server_role != nullptr;
  std::string first;
  std::string last;
  if (server_has_identity && (settings_change || identity_changes)) {
    first = "RESET role;RESET session_authorization;";
  }
  if (!first.empty() || identity_changes) {
    // From the login identity (reset above, or never left): the client's, in its order.
    if (authorization != nullptr) {
      last = "SELECT pg_catalog.set_config('session_authorization', " +
             quote_literal(*authorization) + ", false);";
    }
    if (role != nullptr) {
      last += "SELECT pg_catalog.set_config('role', " + quote_literal(*role) + ", false);";
    }
  }
  server_extras = client_extras;
  if (!sets.empty()) sets += ";";
  return first + tracked_sets + sets + resets + last;
}

}  // namespace pgsluice
