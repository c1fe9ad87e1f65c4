// pgsluice: a PostgreSQL connection pooler. main() parses the command line, loads the
// configuration and the auth_file, and runs the workers.
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pgsluice/protocol/pg_query_library.h"
#include "pooler/auth/sources.h"
#include "pooler/config/config.h"
#include "pooler/core/takeover.h"
#include "pooler/core/worker.h"
#include "pooler/core/worker_group.h"
#include "pooler/features.h"
#include "pooler/net/tls_context.h"
#include "pooler/ops/daemonize.h"
#include "pooler/ops/logging.h"
#include "pooler/ops/pidfile.h"
#include "pooler/ops/switch_user.h"
#include "pooler/session_state/leak_report.h"

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
    "  -d, --daemon    run in the background (needs logfile and pidfile)\n"
    "  -v, --verbose   more logging (repeat for trace)\n"
    "  -q, --quiet     do not log to stderr (the logfile, when set, gets every line)\n"
    "  -V, --version   print the version and exit\n"
    "  -h, --help      print this help and exit\n"
    "  -R, --reboot    online restart: take over the listening sockets and the idle clients\n"
    "                  of the pgsluice running on this configuration's Unix socket, which then\n"
    "                  exits once its other clients have left (docs/operations.md)\n"
    "\n"
    "Signals: SIGINT stops when running transactions end (shutdown_timeout), SIGTERM when\n"
    "clients leave, SIGQUIT (or a second signal) at once; SIGHUP reloads the configuration;\n"
    "SIGUSR1 pauses every database (the console's PAUSE), SIGUSR2 resumes (RESUME).\n";

// Many clients need many descriptors: take the hard limit, as a pooler's service file would.
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// What the command line asks for; `exit_code` set: exit with it (after --help, --version or a
// usage error).
struct Options {
  int verbosity = 0;
  bool quiet = false;
  bool daemon = false;
  bool reboot = false;
  std::string config_path;
  std::optional<int> exit_code;
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-V" || arg == "--version") {
      std::printf("pgsluice %s\n", PGSLUICE_VERSION);
      o.exit_code = 0;
      return o;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      o.exit_code = 0;
      return o;
    }
    if (arg == "-d" || arg == "--daemon") {
      o.daemon = true;
    } else if (arg == "-v" || arg == "--verbose") {
      ++o.verbosity;
    } else if (arg == "-vv") {
      o.verbosity += 2;
    } else if (arg == "-R" || arg == "--reboot") {
      o.reboot = true;
    } else if (arg == "-q" || arg == "--quiet") {
      o.quiet = true;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "pgsluice: unknown option %s\n%s", arg.c_str(), kUsage);
      o.exit_code = 2;
      return o;
    } else if (o.config_path.empty()) {
      o.config_path = arg;
    } else {
      std::fprintf(stderr, "pgsluice: more than one config file given\n");
      o.exit_code = 2;
      return o;
    }
  }
  if (o.config_path.empty()) {
    std::fputs(kUsage, stderr);
    o.exit_code = 2;
  }
  return o;
}

// The configuration file, loaded and checked against what the command line asks (-d); null once
// what is wrong has been said on stderr.
auto load_configuration(const Options& options) -> decltype(pgsluice::ConfigLoadResult::config) {
  pgsluice::ConfigLoadResult loaded = pgsluice::load_config_file(options.config_path);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    std::fprintf(stderr, "pgsluice: configuration has errors, not starting\n");
    return nullptr;
  }
  // As PgBouncer: a daemon needs somewhere to log and a pidfile to be found by.
  const pgsluice::Settings& s = loaded.config->settings;
  if (options.daemon && (s.logfile.empty() || s.pidfile.empty())) {
    std::fprintf(stderr, "pgsluice: -d needs logfile and pidfile set in %s\n",
                 options.config_path.c_str());
    return nullptr;
  }
  return std::move(loaded.config);
}

// PgBouncer's `user`: the account, looked up before anything is opened; false when there is
// none (said on stderr, as PgBouncer's FATAL).
bool find_account(const pgsluice::Settings& settings,
                  std::optional<pgsluice::UserAccount>& account) {
  if (settings.user.empty()) return true;
  std::string error;
  account = pgsluice::find_user_account(settings.user, error);
  if (!account) std::fprintf(stderr, "pgsluice: FATAL %s\n", error.c_str());
  return account.has_value();
}

// libpg_query is loaded when a statement first needs the parser, not linked: this stops pgsluice
// at startup when it is missing, as the dynamic linker did when it was linked.
bool parser_loadable() {
  std::string error;
  if (pgsluice::protocol::pg_query_library_loadable(error)) return true;
  std::fprintf(stderr, "pgsluice: FATAL cannot load libpg_query: %s\n", error.c_str());
  return false;
}

// -R: the sockets of the pgsluice running on this configuration's Unix socket (core/takeover.h);
// nobody there, a normal start, as PgBouncer's. Returns the failure, empty on success.
std::string take_over_running(const pgsluice::Settings& s, pgsluice::Worker& primary) {
  if (s.unix_socket_dir.empty())
    return "-R/--reboot needs unix_socket_dir (the old process's console)";
  const std::string path = s.unix_socket_dir + "/.s.PGSQL." + std::to_string(s.listen_port);
  std::vector<pgsluice::TakeoverSocket> sockets;
  std::string error;
  if (!pgsluice::take_over(path, sockets, error)) {
    if (!error.empty()) return "online restart failed: " + error;
    spdlog::info("online restart: no process on {}, starting normally", path);
    return {};
  }
  spdlog::info("online restart: took {} sockets from the process on {}", sockets.size(), path);
  primary.set_taken_over(std::move(sockets));
  return {};
}

// The listeners: the running process's with -R, else bound here. Returns the failure.
std::string start_listening(const pgsluice::Settings& s, pgsluice::WorkerGroup& workers,
                            bool reboot) {
  if (reboot) {
    if (std::string error = take_over_running(s, workers.primary()); !error.empty()) return error;
  }
  return workers.listen();
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  if (options.exit_code) return *options.exit_code;
  if (!parser_loadable()) return 1;
  const int verbosity = options.verbosity;
  const bool daemon = options.daemon;
  const auto loaded_config = load_configuration(options);
  if (!loaded_config) return 1;
  const pgsluice::Config& config = *loaded_config;
  std::optional<pgsluice::UserAccount> account;
  if (!find_account(config.settings, account)) return 1;
  std::string pid_error;
  // -R: the pidfile names the process being replaced.
  if (!options.reboot && !config.settings.pidfile.empty() &&
      !pgsluice::PidFile::check(config.settings.pidfile, pid_error)) {
    std::fprintf(stderr, "pgsluice: %s\n", pid_error.c_str());
    return 1;
  }
  pgsluice::Daemon daemonizer;
  if (daemon && !daemonizer.start(pid_error)) {
    std::fprintf(stderr, "pgsluice: cannot daemonize: %s\n", pid_error.c_str());
    return 1;
  }
  std::string log_error;
  if (!pgsluice::init_logging(config.settings,
                              {.verbosity = verbosity, .quiet = options.quiet, .daemon = daemon},
                              log_error)) {
    std::fprintf(stderr, "pgsluice: cannot open logfile: %s\n", log_error.c_str());
    return 1;
  }
  // A startup failure from here on is logged (to stderr too in the foreground, unless -q); a
  // daemon that is not ready yet also says it on stderr, which its parent still shows.
  auto startup_error = [daemon](const std::string& message) {
    spdlog::error("{}", message);
    if (daemon) std::fprintf(stderr, "pgsluice: %s\n", message.c_str());
  };
  // What stops pgsluice once it has started to listen (PgBouncer's FATAL: a port in use, a
  // listen_addr name that does not resolve): logged at the highest level and on stderr, which a
  // daemon's parent still shows and then exits 1 for.
  auto fatal = [daemon](const std::string& message) {
    spdlog::critical("FATAL {}", message);
    if (daemon) std::fprintf(stderr, "pgsluice: FATAL %s\n", message.c_str());
  };
  for (const auto& w : config.warnings) spdlog::warn("{}", w);

  // The auth_file and, under auth_type = hba, the auth_hba_file.
  pgsluice::AuthSourcesResult auth = pgsluice::load_auth_sources(config.settings);
  for (const auto& w : auth.warnings) spdlog::warn("{}", w);
  if (!auth.errors.empty()) {
    for (const auto& e : auth.errors) startup_error(e);
    spdlog::error("authentication files have errors, not starting");
    return 1;
  }
  std::shared_ptr<pgsluice::AuthSecrets> secrets = std::move(auth.secrets);

  // Certificate and key files are read now: a bad one stops pgsluice before it listens.
  pgsluice::TlsContexts tls;
  std::string tls_error;
  if (!pgsluice::TlsContexts::build(config.settings, tls, tls_error)) {
    startup_error(tls_error);
    return 1;
  }

  raise_fd_limit();
  std::signal(SIGPIPE, SIG_IGN);
  pgsluice::PidFile pidfile;  // removed when main returns
  if (!config.settings.pidfile.empty() && !pidfile.write(config.settings.pidfile, pid_error)) {
    startup_error(pid_error);
    return 1;
  }
  // The operations and the admin console, as the core calls them (core/extensions.h). Declared
  // before the workers so that it outlives them: closing clients still reach it.
  std::unique_ptr<pgsluice::Features> features;
  pgsluice::WorkerGroup workers(loaded_config, secrets, config.settings.workers);
  workers.set_tls(tls);
  features = std::make_unique<pgsluice::Features>(workers.primary());
  workers.set_extensions(*features);
  if (std::string error = start_listening(config.settings, workers, options.reboot);
      !error.empty()) {
    fatal(error);
    return 1;
  }
  // Listening (a port below 1024 too), the pidfile and the logfile open: root is no longer needed.
  if (std::string error = account ? pgsluice::switch_to_user(*account) : ""; !error.empty()) {
    fatal(error);
    return 1;
  }
  spdlog::info("pgsluice {} started ({} workers)", PGSLUICE_VERSION, workers.size());
  if (daemon) daemonizer.ready();
  workers.run();
  // The staging run's leak report (leak_report_file), with everything the run found.
  if (std::string err =
          pgsluice::write_leak_report(workers.findings(), workers.primary().settings());
      !err.empty()) {
    spdlog::error("leak_report_file: {}", err);
  }
  spdlog::info("pgsluice stopped");
  return 0;
}
