// Switching to the `user` account; see switch_user.h.
#include "pooler/ops/switch_user.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace pgsluice {

std::optional<UserAccount> find_user_account(const std::string& name, std::string& error) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16 * 1024);
  const int rc = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (found == nullptr) {
    error = "could not find user '" + name + "' to switch to";
    if (rc != 0) error += std::string(": ") + std::strerror(rc);
    return std::nullopt;
  }
  return UserAccount{.name = name, .uid = pw.pw_uid, .gid = pw.pw_gid};
}

std::string switch_to_user(const UserAccount& account) {
  // PgBouncer keeps the primary group alone (setgroups); the account's own supplementary groups
  // are taken here, so that files readable through them (a TLS key in group ssl-cert) can be
  // read again at RELOAD.
  if (getuid() == 0 && initgroups(account.name.c_str(), account.gid) != 0) {
    return std::string("failed to reset groups: ") + std::strerror(errno);
  }
  if (setgid(account.gid) != 0 || setuid(account.uid) != 0) {
    return "failed to assume identity of user '" + account.name + "': " + std::strerror(errno);
  }
  if (getuid() != account.uid || geteuid() != account.uid) return "setuid() failed to work";
  return {};
}

}  // namespace pgsluice
