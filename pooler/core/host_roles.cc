// target_session_attrs against a server's reported role; see host_roles.h.
#include "pooler/core/host_roles.h"

#include "pooler/base/text.h"
#include "pooler/session_state/params.h"

namespace pgsluice {

namespace {
bool is_on(const ParameterSet& reported, std::string_view name) {
  const std::string* value = reported.get(name);
  return value != nullptr && iequals(*value, "on");
}
}  // namespace

bool reports_role(const ParameterSet& reported) {
  return reported.get("in_hot_standby") != nullptr;
}

ServerRole role_of(const ParameterSet& reported) {
  ServerRole role;
  role.hot_standby = is_on(reported, "in_hot_standby");
  role.read_only = role.hot_standby || is_on(reported, "default_transaction_read_only");
  return role;
}

std::string_view role_mismatch(TargetSessionAttrs attrs, const ServerRole& role,
                               bool standby_may_exist) {
  switch (attrs) {
    case TargetSessionAttrs::any:
      return {};
    case TargetSessionAttrs::read_write:
      return role.read_only ? "session is read-only" : std::string_view();
    case TargetSessionAttrs::read_only:
      return role.read_only ? std::string_view() : "session is not read-only";
    case TargetSessionAttrs::primary:
      return role.hot_standby ? "server is in hot standby mode" : std::string_view();
    case TargetSessionAttrs::standby:
      return role.hot_standby ? std::string_view() : "server is not in hot standby mode";
    case TargetSessionAttrs::prefer_standby:
      return role.hot_standby || !standby_may_exist ? std::string_view()
                                                    : "server is not in hot standby mode";
  }
  return {};
}

std::optional<bool> role_worth_a_login(TargetSessionAttrs attrs, bool primary) {
  switch (attrs) {
    case TargetSessionAttrs::any:
      return std::nullopt;
    case TargetSessionAttrs::read_write:
    case TargetSessionAttrs::primary:
      return primary;
    case TargetSessionAttrs::standby:
      return !primary;
    case TargetSessionAttrs::read_only:
    case TargetSessionAttrs::prefer_standby:
      if (!primary) return true;
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace pgsluice
