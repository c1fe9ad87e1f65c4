// Loading a configuration text that must load, for the configuration tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "pooler/config/config.h"

namespace pgsluice {

// Loads `text`; each error is a test failure, printed with its line.
inline std::shared_ptr<const Config> load_ok(const std::string& text) {
  ConfigLoadResult r = load_config_string(text, "test.ini");
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  EXPECT_NE(r.config, nullptr);
  return r.config;
}

}  // namespace pgsluice
