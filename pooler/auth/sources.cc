// Loading the auth_file and the auth_hba_file; see auth_sources.h.
#include "pooler/auth/sources.h"

#include "pooler/auth/auth_file.h"

namespace pgsluice {

namespace {

// auth_ident_file, and every map= of the rules found in it: a rule naming a missing map could
// only refuse, and is a mistake (PgBouncer drops such a line; pgsluice refuses the file, as for
// any bad line).
void load_ident_maps(const Settings& settings, AuthSecrets& secrets, AuthSourcesResult& result) {
  if (!settings.auth_ident_file.empty()) {
    IdentLoadResult ident = load_ident_file(settings.auth_ident_file);
    if (!ident.errors.empty()) {
      for (auto& e : ident.errors) result.errors.push_back(std::move(e));
      result.errors.push_back("auth_ident_file " + settings.auth_ident_file + " could not be used");
      return;
    }
    secrets.ident = std::move(ident.maps);
  }
  if (!secrets.hba) return;
  for (const HbaRule& rule : secrets.hba->rules()) {
    if (rule.map.empty() || (secrets.ident && secrets.ident->has(rule.map))) continue;
    result.errors.push_back(rule.file + ":" + std::to_string(rule.line) + ": ident map \"" +
                            rule.map + "\" is not in auth_ident_file" +
                            (settings.auth_ident_file.empty() ? std::string(" (not set)")
                                                              : " " + settings.auth_ident_file));
  }
}

}  // namespace

AuthSourcesResult load_auth_sources(const Settings& settings) {
  AuthSourcesResult result;
  auto secrets = std::make_shared<AuthSecrets>();
  if (!settings.auth_file.empty()) {
    AuthFileResult auth = load_auth_file(settings.auth_file);
    if (!auth.errors.empty() && auth.secrets.empty()) {
      // As PgBouncer: an auth_file with good lines is used without its bad ones; one with none
      // at all is a mistake that would lock everybody out.
      for (auto& e : auth.errors) result.errors.push_back(std::move(e));
      result.errors.push_back("auth_file " + settings.auth_file + " could not be used");
    } else {
      result.warnings = std::move(auth.errors);
      secrets->by_user = std::move(auth.secrets);
    }
  }
  if (settings.auth_type == AuthType::hba) {
    // Unlike PgBouncer, which skips a bad line: a skipped reject line would let in whom it was
    // written to keep out. PostgreSQL refuses the whole file too. Every line PgBouncer takes
    // is taken (some with a warning), so a file PgBouncer reads whole loads here too.
    HbaLoadResult hba = load_hba_file(settings.auth_hba_file);
    for (auto& w : hba.warnings) result.warnings.push_back(std::move(w));
    if (!hba.errors.empty()) {
      for (auto& e : hba.errors) result.errors.push_back(std::move(e));
      result.errors.push_back("auth_hba_file " + settings.auth_hba_file + " could not be used");
    } else {
      secrets->hba = std::move(hba.rules);
    }
    load_ident_maps(settings, *secrets, result);
  } else if (!settings.auth_hba_file.empty()) {
    result.warnings.push_back("auth_hba_file is set but auth_type is " +
                              std::string(to_string(settings.auth_type)) +
                              ", not hba: the file is not read");
  }
  if (result.errors.empty()) result.secrets = std::move(secrets);
  return result;
}

}  // namespace pgsluice
