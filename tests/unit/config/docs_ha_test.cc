// docs/ha.md's example configurations (every ```ini block) load as written: no error, no
// warning, and each multi-host entry carries the target_session_attrs the text says it does.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pooler/config/config.h"
#include "pooler/config/server_address.h"

namespace pgsluice {
namespace {

std::vector<std::string> ini_blocks(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<std::string> blocks;
  std::string line;
  std::ostringstream block;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line == "```ini") {
      inside = true;
      block.str("");
    } else if (inside && line == "```") {
      inside = false;
      blocks.push_back(block.str());
    } else if (inside) {
      block << line << '\n';
    }
  }
  EXPECT_FALSE(inside) << "an ```ini block is not closed";
  return blocks;
}

TEST(DocsHa, EveryExampleConfigurationLoads) {
  const std::vector<std::string> blocks = ini_blocks(PGSLUICE_SOURCE_DIR "/docs/ha.md");
  // Patroni, a cloud primary endpoint, several processes behind a load balancer.
  ASSERT_EQ(blocks.size(), 3u);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string name = "docs/ha.md block " + std::to_string(i + 1);
    ConfigLoadResult r = load_config_string(blocks[i], name);
    for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
    ASSERT_NE(r.config, nullptr) << name;
    for (const auto& w : r.config->warnings) ADD_FAILURE() << name << ": " << w;
    ASSERT_FALSE(r.config->databases.empty()) << name;
    for (const auto& [db_name, db] : r.config->databases) {
      EXPECT_NE(db.target_session_attrs, TargetSessionAttrs::any) << name << ": " << db_name;
    }
  }
  const ConfigLoadResult patroni_result = load_config_string(blocks[0], "patroni");
  const Config& patroni = *patroni_result.config;
  const DatabaseEntry& app = patroni.databases.at("app");
  EXPECT_EQ(ServerAddress::all_from(app).size(), 3u);
  EXPECT_EQ(app.target_session_attrs, TargetSessionAttrs::read_write);
  // The entries integration/test_patroni.py runs: reads never on the leader.
  EXPECT_EQ(patroni.databases.at("app_ro").target_session_attrs, TargetSessionAttrs::standby);
  EXPECT_EQ(patroni.databases.at("app_ro").load_balance_hosts, LoadBalanceHosts::random);
  EXPECT_EQ(patroni.settings.server_role_check_interval, std::chrono::seconds(2));
  const ConfigLoadResult peers_result = load_config_string(blocks[2], "peers");
  const Config& peers = *peers_result.config;
  EXPECT_EQ(peers.peers.size(), 4u);
}

}  // namespace
}  // namespace pgsluice
