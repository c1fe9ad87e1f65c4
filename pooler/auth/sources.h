// What authentication reads from files besides the configuration: the auth_file's secrets and,
// under auth_type = hba, the auth_hba_file's rules and the auth_ident_file's maps they name. Loaded
// together at startup and at every RELOAD/SIGHUP into one immutable snapshot that workers share.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pooler/auth/hba.h"
#include "pooler/auth/ident.h"
#include "pooler/config/config.h"

namespace pgsluice {

struct AuthSecrets {
  std::map<std::string, std::string> by_user;
  std::shared_ptr<const HbaRules> hba;     // null unless auth_type = hba
  std::shared_ptr<const IdentMaps> ident;  // auth_ident_file's maps, null when unset
};

struct AuthSourcesResult {
  std::shared_ptr<AuthSecrets> secrets;  // null when `errors` is not empty
  std::vector<std::string> errors;       // nothing can be used: startup stops, RELOAD keeps old
  std::vector<std::string> warnings;     // bad auth_file lines (the good ones are used), and
                                         // auth_hba_file lines PostgreSQL would refuse
};

AuthSourcesResult load_auth_sources(const Settings& settings);

}  // namespace pgsluice
