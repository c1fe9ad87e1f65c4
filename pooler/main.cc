// pgsluice: a PostgreSQL connection pooler. main() parses the command line, loads the
// configuration and the auth_file, and runs the worker.
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "pooler/auth_file.h"
#include "pooler/config.h"
#include "pooler/logging.h"
#include "pooler/tls_context.h"
#include "pooler/worker.h"

namespace {

constexpr const char* kUsage =
    "pgsluice - a PostgreSQL connection pooler\n"
    "\n"
    "Usage: pgsluice [OPTIONS] CONFIG_FILE\n"
    "\n"
    "CONFIG_FILE is a pgbouncer.ini-style file: [databases], [users] and the main section\n"
    "[pgsluice] (or [pgbouncer]).\n"
    "\n"
    "Options:\n"
    "  -v, --verbose   more logging (repeat for trace)\n"
    "  -q, --quiet     only warnings and errors\n"
    "  -V, --version   print the version and exit\n"
    "  -h, --help      print this help and exit\n";

// Many clients need many descriptors: take the hard limit, as a pooler's service file would.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int verbosity = 0;
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-V" || arg == "--version") {
      std::printf("pgsluice %s\n", PGSLUICE_VERSION);
      return 0;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "-v" || arg == "--verbose") {
      ++verbosity;
    } else if (arg == "-vv") {
      verbosity += 2;
    } else if (arg == "-q" || arg == "--quiet") {
      verbosity = -1;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "pgsluice: unknown option %s\n%s", arg.c_str(), kUsage);
      return 2;
    } else if (config_path.empty()) {
      config_path = arg;
    } else {
      std::fprintf(stderr, "pgsluice: more than one config file given\n");
      return 2;
    }
  }
  if (config_path.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }

  pgsluice::ConfigLoadResult loaded = pgsluice::load_config_file(config_path);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    std::fprintf(stderr, "pgsluice: configuration has errors, not starting\n");
    return 1;
  }
  const pgsluice::Config& config = *loaded.config;
  std::string log_error;
  if (!pgsluice::init_logging(config.settings, verbosity, log_error)) {
    std::fprintf(stderr, "pgsluice: cannot open logfile: %s\n", log_error.c_str());
    return 1;
  }
  for (const auto& w : config.warnings) spdlog::warn("{}", w);

  auto secrets = std::make_shared<pgsluice::AuthSecrets>();
  if (!config.settings.auth_file.empty()) {
    pgsluice::AuthFileResult auth = pgsluice::load_auth_file(config.settings.auth_file);
    if (!auth.errors.empty()) {
      for (const auto& e : auth.errors) spdlog::error("{}", e);
      if (auth.secrets.empty()) {
        spdlog::error("auth_file {} could not be used, not starting", config.settings.auth_file);
        return 1;
      }
    }
    secrets->by_user = std::move(auth.secrets);
  }
  if (config.settings.workers > 1) {
    spdlog::warn(
        "workers = {}: this build runs one worker thread; more come with the "
        "performance work",
        config.settings.workers);
  }

  // Certificate and key files are read now: a bad one stops pgsluice before it listens.
  pgsluice::TlsContexts tls;
  std::string tls_error;
  if (!pgsluice::TlsContexts::build(config.settings, tls, tls_error)) {
    if (!config.settings.logfile.empty()) spdlog::error("{}", tls_error);
    std::fprintf(stderr, "pgsluice: %s\n", tls_error.c_str());
    return 1;
  }

  raise_fd_limit();
  std::signal(SIGPIPE, SIG_IGN);
  pgsluice::Worker worker(loaded.config, secrets);
  worker.set_tls(std::move(tls));
  if (!worker.listen()) return 1;
  spdlog::info("pgsluice {} started", PGSLUICE_VERSION);
  worker.run();
  spdlog::info("pgsluice stopped");
  return 0;
}
