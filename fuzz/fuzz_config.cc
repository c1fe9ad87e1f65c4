// Fuzz target: the configuration parser (load_config_string: inih plus pgsluice's validation of
// every key, [databases] connection strings, [users] and session_state_action). Either a config
// or errors, never both; what loaded answers the lookups the pooler makes.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "pooler/config/config.h"

using namespace pgsluice;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const ConfigLoadResult r = load_config_string(text, "fuzz.ini");
  FUZZ_CHECK((r.config == nullptr) == !r.errors.empty());
  for (const auto& e : r.errors) FUZZ_CHECK(!e.to_string().empty());
  if (!r.config) return 0;
  const Config& c = *r.config;
  std::vector<std::string> names;
  for (const auto& [name, db] : c.databases) names.push_back(name);
  names.push_back("app");
  names.push_back("no_such_database");
  for (const auto& name : names) {
    const auto db = c.find_database(name);
    if (!db) continue;
    for (const std::string user : {"app", "postgres", ""}) {
      const PoolMode mode = c.pool_mode_for(*db, user);
      (void)c.session_policy_for(*db, user, mode);
    }
    FUZZ_CHECK(c.pool_size_for(*db) >= 0);
  }
  return 0;
}
