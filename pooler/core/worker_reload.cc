// The worker's side of the admin console: RELOAD, SET, stopping and restarting the listeners.
// Kept apart from worker.cc, the event loop.
#include <spdlog/spdlog.h>

#include <optional>

#include "pooler/base/log_level.h"
#include "pooler/base/syslog_sink.h"
#include "pooler/config/settings_table.h"
#include "pooler/core/auth_query.h"
#include "pooler/core/peer_forwarder.h"
#include "pooler/core/worker.h"

namespace pgsluice {

void Worker::close_tcp_listeners() {
  std::erase_if(listeners_, [](const auto& listener) { return listener->type == UV_TCP; });
}

void Worker::apply_config(std::shared_ptr<const Config> config) {
  previous_config_ = std::move(config_);
  config_ = std::move(config);
  const Config& c = *config_;
  if (c.settings.verbose_level != previous_config_->settings.verbose_level ||
      c.settings.verbose != previous_config_->settings.verbose) {
    set_log_level(configured_log_level(c.settings.verbose_level, c.settings.verbose));
  }
  const Settings& was = previous_config_->settings;
  if (c.settings.syslog != was.syslog || c.settings.syslog_ident != was.syslog_ident ||
      c.settings.syslog_facility != was.syslog_facility) {
    process_syslog_sink()->configure(c.settings.syslog, c.settings.syslog_ident,
                                     c.settings.syslog_facility);
  }
  if (c.settings.tcp_defer_accept != previous_config_->settings.tcp_defer_accept) {
    set_listeners_defer_accept();  // only the primary has listeners
  }
  const bool tls_changed = server_tls_changed(was, c.settings);
  for (auto& [key, pool] : pools_) {
    if (tls_changed) pool->on_server_tls_changed();
    // A database removed from the file drains (Pool::mark_removed): its clients finish, new
    // ones are refused; a changed line applies to new work, and to servers at their next release.
    std::optional<DatabaseEntry> db = c.find_database(pool->database().name);
    if (!db) {
      pool->mark_removed();
      continue;
    }
    const std::string& user = pool->credentials().user;
    if (db->password.empty()) {
      if (auto secret = secret_for(user)) pool->credentials().password = *secret;
    }
    pool->apply_config(*db, c.pool_mode_for(*db, user), c.pool_size_for(*db, user));
  }
  // Cached auth_query results may be stale under new settings or passwords.
  if (auth_query_) auth_query_->on_config_changed();
  if (peer_forwarder_) peer_forwarder_->forget_unlisted(c.peers);
}

std::string Worker::reload() {
  ConfigLoadResult loaded = load_config_file(config_->path);
  if (!loaded.errors.empty()) {
    std::string text;
    for (const auto& e : loaded.errors) text += (text.empty() ? "" : "; ") + e.to_string();
    spdlog::error("RELOAD failed, the old configuration stays: {}", text);
    return text;
  }
  for (const auto& w : loaded.config->warnings) spdlog::warn("{}", w);
  const Settings& s = loaded.config->settings;
  // The settings used once at startup (SettingApply::restart) keep their running effect.
  if (std::string changed = restart_settings_warning(settings(), s); !changed.empty()) {
    spdlog::warn("RELOAD: {}", changed);
  }
  // The auth_file and the auth_hba_file: a broken one keeps the old configuration whole.
  AuthSourcesResult auth = load_auth_sources(s);
  if (!auth.errors.empty()) {
    std::string text;
    for (size_t i = 0; i < auth.errors.size(); ++i) text += (i ? "; " : "") + auth.errors[i];
    spdlog::error("RELOAD failed, the old configuration stays: {}", text);
    return text;
  }
  for (const auto& w : auth.warnings) spdlog::warn("{}", w);
  // Certificate and key files are read again (a renewed certificate under the same name): new
  // connections use the new contexts, open ones keep theirs. A bad file keeps the contexts in
  // use rather than stop TLS, as PgBouncer does.
  TlsContexts tls;
  std::string tls_error;
  const bool tls_built = TlsContexts::build(s, tls, tls_error);
  if (!tls_built) {
    spdlog::error("RELOAD: {}; TLS keeps the certificates and settings it had", tls_error);
  }
  // Every worker, while they are parked (the caller stopped the world).
  std::shared_ptr<const AuthSecrets> secrets = std::move(auth.secrets);
  std::shared_ptr<const Config> config = std::move(loaded.config);
  group_.for_each_worker([&](Worker& w) {
    if (tls_built) w.tls_ = tls;
    w.secrets_ = secrets;
    w.apply_config(config);
  });
  spdlog::info("RELOAD: configuration {} applied", config_->path);
  return {};
}

std::string Worker::set_setting(std::string_view key, std::string_view value, std::string& notice) {
  if (!is_changeable_setting(key)) {
    return fmt::format("SET {}: not a setting that can be changed online", key);
  }
  auto next = std::make_shared<Config>(*config_);
  if (std::string err = apply_setting(next->settings, key, value); !err.empty()) {
    return fmt::format("SET {}: {}", key, err);
  }
  spdlog::info("SET {} = {}", key, value);
  // As RELOAD, and as PgBouncer's SET: the TLS contexts are built from the new values; when they
  // cannot be (a key set before its certificate, a file missing), the value is kept for the
  // next SET or RELOAD and TLS goes on with the contexts in use.
  std::optional<TlsContexts> tls;
  if (is_tls_setting(key)) {
    std::string tls_error;
    if (TlsContexts built; TlsContexts::build(next->settings, built, tls_error)) {
      tls = std::move(built);
    } else {
      spdlog::warn("SET {}: {}; TLS keeps the certificates and settings it had", key, tls_error);
      notice = "TLS settings could not be applied, still using old configuration: " + tls_error;
    }
  }
  std::shared_ptr<const Config> config = std::move(next);
  group_.for_each_worker([&](Worker& w) {
    if (tls) w.tls_ = *tls;
    w.apply_config(config);
  });
  return {};
}

}  // namespace pgsluice
