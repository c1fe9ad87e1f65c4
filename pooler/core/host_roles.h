// A server's role as PostgreSQL 14+ reports it at login and whenever it changes (ParameterStatus
// in_hot_standby and default_transaction_read_only), checked against a [databases] entry's
// target_session_attrs the way libpq 14+ checks it: at every server login, and again whenever
// the server goes back to its pool (a promoted standby or a primary made read-only is then
// closed instead of reused).
#pragma once

#include <optional>
#include <string_view>

#include "pooler/config/config.h"

namespace pgsluice {

class ParameterSet;

struct ServerRole {
  bool hot_standby = false;  // in_hot_standby = on: a standby in recovery
  bool read_only = false;    // either a standby or default_transaction_read_only = on
};

// Whether the server reports its role (PostgreSQL 14+ sends in_hot_standby at login and after
// every change). An older server reports nothing: it is asked (role_check.h) before it serves.
bool reports_role(const ParameterSet& reported);

// The role a server reported (see reports_role).
ServerRole role_of(const ParameterSet& reported);

// Empty when `role` fits `attrs`; otherwise why not, in libpq's words ("server is in hot standby
// mode"). prefer-standby takes a primary only when `standby_may_exist` is false: no other host
// of the entry is left that might be a standby (libpq's second pass).
std::string_view role_mismatch(TargetSessionAttrs attrs, const ServerRole& role,
                               bool standby_may_exist);

// What a host's role, as another pool learned it (HostRoleBoard: a primary or a standby,
// nothing of default_transaction_read_only), says to an entry: true when a login to it may
// serve (its skip for a wrong role ends), false when it certainly would not (the host is
// skipped without a login), nothing when the role alone does not tell (read-only and
// prefer-standby against a primary, which may be read-only or the only host left; `any`).
std::optional<bool> role_worth_a_login(TargetSessionAttrs attrs, bool primary);

}  // namespace pgsluice
