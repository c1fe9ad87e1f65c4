// PgBouncer's `user`: started as root, pgsluice becomes that user once it has opened what needs
// root (the listening sockets, so that a port below 1024 works; the pidfile and the logfile;
// the TLS key files, read at startup). The account is looked up first, before anything is
// opened, so that a name that does not exist stops pgsluice at once.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace pgsluice {

struct UserAccount {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The account called `name`; nullopt with `error` ("could not find user 'x' to switch to",
// PgBouncer's words) when there is none.
std::optional<UserAccount> find_user_account(const std::string& name, std::string& error);

// Becomes `account` for good: its groups, its gid, its uid (real, effective and saved, so that
// root cannot come back). Not started as root, only the identity it has already succeeds, as in
// PgBouncer. Returns an error message, empty on success.
std::string switch_to_user(const UserAccount& account);

}  // namespace pgsluice
