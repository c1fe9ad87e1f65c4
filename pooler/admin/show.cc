// SHOW commands; see admin_show.h. Column lists follow PgBouncer 1.25.2 exactly
// (integration/data/pgbouncer-1.25-show-columns.txt); counts come from admin_views.h, so
// SHOW and /metrics agree.
#include "pooler/admin/show.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "pgsluice/protocol/startup.h"
#include "pooler/admin/control.h"
#include "pooler/admin/show_own.h"
#include "pooler/admin/show_peers.h"
#include "pooler/admin/show_sockets.h"
#include "pooler/admin/views.h"
#include "pooler/config/console_database.h"
#include "pooler/config/settings_table.h"
#include "pooler/core/client.h"
#include "pooler/core/pool.h"
#include "pooler/core/pool_counters.h"
#include "pooler/core/server.h"
#include "pooler/core/worker.h"
#include "pooler/net/tls_session.h"

namespace pgsluice {

namespace {

AdminResult show_pools(Worker& worker) {
  AdminResult r;
  r.text("database").text("user");
  for (const char* c : {"cl_active", "cl_waiting", "cl_active_cancel_req", "cl_waiting_cancel_req",
                        "sv_active", "sv_active_cancel", "sv_being_canceled", "sv_idle", "sv_used",
                        "sv_tested", "sv_login", "maxwait", "maxwait_us"}) {
    r.int4(c);
  }
  r.text("pool_mode").text("load_balance_hosts");
  r.int4("sv_pinned").int4("sv_dirty").int4("pool_size").int4("paused");  // pgsluice's own
  // pgsluice's own, for primaries and standbys (#20): servers by the role they told, and the
  // entry's hosts that are not skipped now (a failed login, a wrong role).
  r.text("target_session_attrs").int4("sv_primary").int4("sv_standby").int4("hosts");
  r.int4("usable_hosts");
  std::vector<PoolRow> rows = collect_pool_rows(worker);
  for (PoolRow& console : console_pool_rows(collect_console_databases(worker))) {
    rows.push_back(std::move(console));
  }
  // In PgBouncer's order: its pool list is kept sorted by database, then user.
  std::sort(rows.begin(), rows.end(), [](const PoolRow& a, const PoolRow& b) {
    return std::tie(a.database, a.user) < std::tie(b.database, b.user);
  });
  for (const PoolRow& p : rows) {
    r.row()
        .add(p.database)
        .add(p.user)
        .add(p.cl_active)
        .add(p.cl_waiting)
        .add(0)
        .add(0)
        .add(p.sv_active)
        .add(0)
        .add(p.sv_being_canceled)
        .add(p.sv_idle)
        .add(p.sv_used)
        .add(0)
        .add(p.sv_login)
        .add(p.maxwait_us / 1'000'000)
        .add(p.maxwait_us % 1'000'000)
        .add(std::string(to_string(p.mode)))
        .add_null()
        .add(p.sv_pinned)
        .add(p.sv_dirty)
        .add(p.pool_size)
        .add(p.paused)
        .add(std::string(to_string(p.target_session_attrs)))
        .add(p.sv_primary)
        .add(p.sv_standby)
        .add(p.hosts)
        .add(p.usable_hosts);
  }
  r.set_tag("SHOW");
  return r;
}

// One SHOW command's counter columns, by the name kPoolCounters gives them in that command; its
// values in the same walk of the table, so that they line up with the columns.
void add_counter_columns(AdminResult& r, PoolCounterName name) {
  for_each_pool_counter_named(name, [&](const PoolCounterInfo& c) { r.numeric(c.*name); });
}

void add_counter_values(AdminResult& r, PoolCounterName name, const PoolCounters& values) {
  for_each_pool_counter_named(name, [&](const PoolCounterInfo& c) { r.add(values.*c.field); });
}

// SHOW STATS's row for the console's commands: PgBouncer's name (pgsluice's alias).
constexpr const char* kConsoleStatsName = "pgbouncer";

uint64_t stats_duration_us(const AdminControl& control) {
  const uint64_t old = control.stats_old_stamp_us();
  const uint64_t now = now_us();
  return now > old ? now - old : 0;
}

AdminResult show_stats(Worker& worker, const AdminControl& control, bool totals, bool averages) {
  AdminResult r;
  r.text("database");
  // PgBouncer names the columns differently in each command: SHOW STATS has both kinds
  // (total_received, avg_recv), STATS_TOTALS and STATS_AVERAGES one kind each (bytes_received).
  const bool both = totals && averages;
  const PoolCounterName total_name =
      both ? &PoolCounterInfo::stats_total : &PoolCounterInfo::stats_totals;
  const PoolCounterName average_name =
      both ? &PoolCounterInfo::stats_average : &PoolCounterInfo::stats_averages;
  if (totals) add_counter_columns(r, total_name);
  if (averages) add_counter_columns(r, average_name);
  const uint64_t duration = stats_duration_us(control);
  std::vector<DatabaseStats> dbs = collect_database_stats(worker);
  // The console's row, as PgBouncer's admin database has one, in the order of the names.
  DatabaseStats console{kConsoleStatsName, control.console_totals(), control.console_older()};
  dbs.insert(std::find_if(dbs.begin(), dbs.end(),
                          [](const DatabaseStats& d) { return d.database > kConsoleStatsName; }),
             std::move(console));
  for (const DatabaseStats& d : dbs) {
    r.row().add(d.database);
    if (totals) add_counter_values(r, total_name, d.totals);
    if (averages) {
      add_counter_values(r, average_name, compute_averages(d.totals, d.older, duration));
    }
  }
  r.set_tag("SHOW");
  return r;
}

AdminResult show_totals(Worker& worker, const AdminControl& control) {
  PoolCounters total = control.console_totals(), older = control.console_older();
  worker.for_each_pool([&](Pool& p) {
    total += p.stats().totals;
    older += p.stats().older;
  });
  const PoolAverages avg = compute_averages(total, older, stats_duration_us(control));
  AdminResult r;
  r.text("name").numeric("value");
  for_each_pool_counter_named(&PoolCounterInfo::totals_total, [&](const PoolCounterInfo& c) {
    r.row().add(c.totals_total).add(total.*c.field);
  });
  for_each_pool_counter_named(&PoolCounterInfo::totals_average, [&](const PoolCounterInfo& c) {
    r.row().add(c.totals_average).add(avg.*c.field);
  });
  r.set_tag("SHOW");
  return r;
}

// A console database's row, with PgBouncer's values for its admin database (admin_setup():
// user pgbouncer forced, pool_size 2, statement mode, no host, the listening port; the other
// limits the global ones): no servers, the client limit in force and the sessions counted
// against it.
void add_console_database_row(AdminResult& r, const Config& config, const std::string& name,
                              uint64_t clients) {
  const DatabaseEntry defaults;
  r.row().add(name).add_null().add(config.settings.listen_port).add(name).add(name);
  r.add(kConsolePoolSize)
      .add(config.min_pool_size_for(defaults))
      .add(config.reserve_pool_for(defaults))
      .add(static_cast<int>(config.server_lifetime_for(defaults).count() / 1000))
      .add(std::string(to_string(kConsolePoolMode)))
      .add_null()
      .add(config.max_db_connections_for(defaults))
      .add(0);
  r.add(config.max_db_client_connections_for(name)).add(clients).add(0).add(0);
  r.add(std::string()).add_null();
}

// A [databases] entry's row (or one the "*" entry made on first use).
void add_database_row(AdminResult& r, const Config& config, const AdminControl& control,
                      const std::string& name, const DatabaseEntry& db, uint64_t servers,
                      uint64_t clients) {
  r.row().add(name).add(db.host).add(db.port).add(db.dbname.empty() ? name : db.dbname);
  if (db.user.empty()) {
    r.add_null();
  } else {
    r.add(db.user);
  }
  r.add(config.pool_size_for(db)).add(config.min_pool_size_for(db));
  r.add(config.reserve_pool_for(db));
  r.add(static_cast<int>(config.server_lifetime_for(db).count() / 1000));
  if (db.pool_mode) {
    r.add(std::string(to_string(*db.pool_mode)));
  } else {
    r.add_null();
  }
  // PgBouncer shows the mode for an entry of several hosts only.
  if (db.host.find(',') != std::string::npos) {
    r.add(std::string(to_string(db.load_balance_hosts)));
  } else {
    r.add_null();
  }
  r.add(config.max_db_connections_for(db))
      .add(servers)
      .add(config.max_db_client_connections_for(name))
      .add(clients);
  r.add(control.db_paused(name)).add(control.db_disabled(name));
  std::string hosts;
  for (const ServerAddress& a : ServerAddress::all_from(db)) {
    if (!hosts.empty()) hosts += ',';
    hosts += a.to_string();
  }
  r.add(hosts).add(std::string(to_string(db.target_session_attrs)));
}

AdminResult show_databases(Worker& worker, const AdminControl& control) {
  AdminResult r;
  r.text("name").text("host").int4("port").text("database").text("force_user").int4("pool_size");
  r.int4("min_pool_size").int4("reserve_pool_size").int4("server_lifetime").text("pool_mode");
  r.text("load_balance_hosts").int4("max_connections").int4("current_connections");
  r.int4("max_client_connections").int4("current_client_connections").int4("paused");
  r.int4("disabled");
  r.text("hosts").text("target_session_attrs");  // pgsluice's own (#20): every host of the entry
  const Config& config = worker.config();
  // The configured databases, and those the "*" entry made on first use.
  std::map<std::string, DatabaseEntry> dbs(config.databases.begin(), config.databases.end());
  std::map<std::string, uint64_t> servers, clients;
  worker.for_each_pool([&](Pool& p) {
    dbs.emplace(p.database().name, p.database());
    servers[p.database().name] += p.server_count();
  });
  worker.for_each_client([&](Client& c) {
    if (c.state() != Client::State::closing) ++clients[c.database()];
  });
  // By name, as PgBouncer keeps its database list, the console's among the others.
  std::set<std::string> consoles;
  for (const ConsoleDatabase& console : collect_console_databases(worker)) {
    if (!dbs.contains(console.name)) consoles.insert(console.name);
  }
  std::set<std::string> names(consoles);
  for (const auto& [name, db] : dbs) names.insert(name);
  for (const std::string& name : names) {
    if (consoles.contains(name)) {
      add_console_database_row(r, config, name, clients[name]);
    } else {
      add_database_row(r, config, control, name, dbs.at(name), servers[name], clients[name]);
    }
  }
  r.set_tag("SHOW");
  return r;
}

AdminResult show_users(Worker& worker) {
  AdminResult r;
  r.text("name").text("pool_size").text("reserve_pool_size").text("pool_mode");
  r.int4("max_user_connections").int4("current_connections");
  r.int4("max_user_client_connections").int4("current_client_connections");
  std::set<std::string> names;
  for (const auto& [name, secret] : worker.secrets().by_user) names.insert(name);
  for (const auto& [name, u] : worker.config().users) names.insert(name);
  // The console databases' forced users, as PgBouncer lists its pgbouncer user.
  for (const ConsoleDatabase& console : collect_console_databases(worker)) {
    names.insert(console.name);
  }
  std::map<std::string, uint64_t> servers, clients;
  worker.for_each_pool([&](Pool& p) {
    names.insert(p.credentials().user);
    servers[p.credentials().user] += p.server_count();
  });
  worker.for_each_client([&](Client& c) {
    if (c.state() == Client::State::closing || c.user().empty()) return;
    names.insert(c.user());
    ++clients[c.user()];
  });
  for (const std::string& name : names) {
    auto it = worker.config().users.find(name);
    const UserEntry* entry = it != worker.config().users.end() ? &it->second : nullptr;
    // Empty unless the [users] line sets them (PgBouncer's text columns).
    auto own = [](const std::optional<int>& v) { return v ? std::to_string(*v) : std::string(); };
    r.row()
        .add(name)
        .add(entry != nullptr ? own(entry->pool_size) : std::string())
        .add(entry != nullptr ? own(entry->reserve_pool_size) : std::string());
    if (it != worker.config().users.end() && it->second.pool_mode) {
      r.add(std::string(to_string(*it->second.pool_mode)));
    } else {
      r.add_null();
    }
    r.add(worker.config().max_user_connections_for(name))
        .add(servers[name])
        .add(worker.config().max_user_client_connections_for(name))
        .add(clients[name]);
  }
  r.set_tag("SHOW");
  return r;
}

AdminResult show_config(Worker& worker) {
  AdminResult r;
  r.text("key").text("value").text("default").text("changeable");
  for (const SettingRow& s : describe_settings(worker.config())) {
    r.row().add(s.key).add(s.value).add(s.default_value).add(s.changeable ? "yes" : "no");
  }
  r.set_tag("SHOW");
  return r;
}

AdminResult show_lists(Worker& worker) {
  uint64_t pools = 0, used_clients = 0, login_clients = 0, used_servers = 0;
  std::set<std::string> users;
  for (const auto& [name, secret] : worker.secrets().by_user) users.insert(name);
  std::set<std::pair<std::string, std::string>> pool_keys;  // a pool's shares count once
  worker.for_each_pool([&](Pool& p) {
    pool_keys.emplace(p.database().name, p.credentials().user);
    used_servers += p.server_count();
    users.insert(p.credentials().user);
  });
  worker.for_each_client([&](Client& c) {
    ++used_clients;
    if (c.state() == Client::State::startup || c.state() == Client::State::auth) ++login_clients;
  });
  std::set<std::string> dbs;
  for (const auto& [name, db] : worker.config().databases) dbs.insert(name);
  worker.for_each_pool([&](Pool& p) { dbs.insert(p.database().name); });
  // The console's databases count as PgBouncer's admin database does: a database, its pool, and
  // its forced user (PgBouncer adds a user pgbouncer when the auth file has none).
  for (const ConsoleDatabase& console : collect_console_databases(worker)) {
    dbs.insert(console.name);
    pool_keys.emplace(console.name, console.name);
    users.insert(console.name);
  }
  pools = pool_keys.size();
  AdminResult r;
  r.text("list").int4("items");
  const std::pair<const char*, uint64_t> rows[] = {
      {"databases", dbs.size()},
      {"users", users.size()},
      {"peers", worker.config().peers.size()},
      {"pools", pools},
      {"peer_pools", peer_pool_count(worker)},
      {"free_clients", 0},
      {"used_clients", used_clients},
      {"login_clients", login_clients},
      {"free_servers", 0},
      {"used_servers", used_servers},
      {"dns_names", 0},
      {"dns_zones", 0},
      {"dns_queries", 0},
      {"dns_pending", 0},
  };
  for (const auto& [name, n] : rows) r.row().add(name).add(n);
  r.set_tag("SHOW");
  return r;
}

struct ObjectCounts {
  uint64_t clients = 0;
  uint64_t servers = 0;
  uint64_t pools = 0;
};

ObjectCounts count_objects(Worker& worker) {
  ObjectCounts n;
  worker.for_each_client([&](Client&) { ++n.clients; });
  std::set<std::pair<std::string, std::string>> pool_keys;  // a pool's shares count once
  worker.for_each_pool([&](Pool& p) {
    pool_keys.emplace(p.database().name, p.credentials().user);
    n.servers += p.server_count();
  });
  n.pools = pool_keys.size();
  return n;
}

AdminResult show_mem(Worker& worker) {
  // pgsluice has no slab caches: the rows are its object kinds, their sizes and counts
  // (connection buffers are not included).
  const auto [clients, servers, pools] = count_objects(worker);
  AdminResult r;
  r.text("name").int4("size").int4("used").int4("free").int4("memtotal");
  const std::tuple<const char*, uint64_t, uint64_t> rows[] = {
      {"client_cache", sizeof(Client), clients},
      {"server_cache", sizeof(Server), servers},
      {"pool_cache", sizeof(Pool), pools},
  };
  for (const auto& [name, size, used] : rows) {
    r.row().add(name).add(size).add(used).add(0).add(size * used);
  }
  r.set_tag("SHOW");
  return r;
}

AdminResult show_state(const AdminControl& control) {
  const AdminControl::Mode mode = control.mode();
  AdminResult r;
  r.text("key").text("value");
  r.row().add("active").add(mode == AdminControl::Mode::active ? "yes" : "no");
  r.row().add("paused").add(mode == AdminControl::Mode::paused ? "yes" : "no");
  r.row().add("suspended").add(mode == AdminControl::Mode::suspended ? "yes" : "no");
  r.set_tag("SHOW");
  return r;
}

AdminResult show_version() {
  AdminResult r;
  r.text("version");
  // The first line of `pgsluice --version`, as PgBouncer's SHOW VERSION is its --version.
  r.row().add("pgsluice " PGSLUICE_VERSION);
  r.set_tag("SHOW");
  return r;
}

AdminResult show_workers(Worker& worker) {
  AdminResult r;
  r.int4("id")
      .int4("clients")
      .int4("servers")
      .int4("pools")
      .int8("uptime")
      .int8("servers_in")
      .int8("servers_out");
  worker.group().for_each_worker([&](Worker& w) {
    size_t servers = 0;
    w.for_each_own_pool([&](Pool& p) { servers += p.server_count(); });
    r.row()
        .add(w.index())
        .add(w.client_count())
        .add(servers)
        .add(w.pool_count())
        .add((w.now_ms() - w.started_ms()) / 1000)
        .add(w.servers_moved_in())
        .add(w.servers_moved_out());
  });
  r.set_tag("SHOW");
  return r;
}

AdminResult show_help() {
  AdminResult r;
  r.notice("Console usage",
           "\n\tSHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|USERS|VERSION|STATE"
           "\n\tSHOW LISTS|MEM|WORKERS|LEAKS|LEAK_REPORT|PREPARED|PREPARED_STATEMENTS"
           "\n\tSHOW PEERS|PEER_POOLS"
           "\n\tSHOW SOCKETS|ACTIVE_SOCKETS|DNS_HOSTS|DNS_ZONES"
           "\n\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS"
           "\n\tSET key = arg"
           "\n\tRELOAD"
           "\n\tPAUSE [<db>]"
           "\n\tRESUME [<db>]"
           "\n\tDISABLE <db>"
           "\n\tENABLE <db>"
           "\n\tRECONNECT [<db>]"
           "\n\tKILL <db>"
           "\n\tKILL_CLIENT <id>"
           "\n\tSUSPEND"
           "\n\tSHUTDOWN"
           "\n\tSHUTDOWN WAIT_FOR_CLIENTS"
           "\n\tWAIT_CLOSE [<db>]");
  r.set_tag("SHOW");
  return r;
}

// PgBouncer answers SHOW of a few server settings that drivers ask for.
std::optional<AdminResult> fake_show(const std::string& subject) {
  static const std::pair<const char*, const char*> fakes[] = {
      {"CLIENT_ENCODING", "UTF8"},
      {"DEFAULT_TRANSACTION_ISOLATION", "read committed"},
      {"STANDARD_CONFORMING_STRINGS", "on"},
      {"DATESTYLE", "ISO"},
      {"TIMEZONE", "GMT"},
  };
  for (const auto& [name, value] : fakes) {
    if (subject != name) continue;
    std::string lower(name);
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    AdminResult r;
    r.text(lower);
    r.row().add(value);
    r.set_tag("SHOW");
    return r;
  }
  return std::nullopt;
}

}  // namespace

std::optional<AdminResult> admin_show(Worker& worker, const AdminControl& control,
                                      const std::string& subject) {
  if (subject == "POOLS") return show_pools(worker);
  if (subject == "STATS") return show_stats(worker, control, true, true);
  if (subject == "STATS_TOTALS") return show_stats(worker, control, true, false);
  if (subject == "STATS_AVERAGES") return show_stats(worker, control, false, true);
  if (subject == "TOTALS") return show_totals(worker, control);
  if (subject == "CLIENTS") return show_clients(worker);
  if (subject == "SERVERS") return show_servers(worker);
  if (subject == "DATABASES") return show_databases(worker, control);
  if (subject == "USERS") return show_users(worker);
  if (subject == "CONFIG") return show_config(worker);
  if (subject == "LISTS") return show_lists(worker);
  if (subject == "MEM") return show_mem(worker);
  if (subject == "PEERS") return show_peers(worker);
  if (subject == "PEER_POOLS") return show_peer_pools(worker);
  if (subject == "STATE") return show_state(control);
  if (subject == "VERSION") return show_version();
  if (subject == "WORKERS") return show_workers(worker);
  if (subject == "LEAKS") return show_leaks(worker);
  if (subject == "LEAK_REPORT") return show_leak_report(worker);
  if (subject == "PREPARED") return show_prepared(worker);
  if (subject == "PREPARED_STATEMENTS") return show_prepared_statements(worker);
  if (subject == "SOCKETS") return show_sockets(worker, /*active_only=*/false);
  if (subject == "ACTIVE_SOCKETS") return show_sockets(worker, /*active_only=*/true);
  if (subject == "DNS_HOSTS") return show_dns_hosts();
  if (subject == "DNS_ZONES") return show_dns_zones();
  if (subject == "HELP") return show_help();
  return fake_show(subject);
}

}  // namespace pgsluice
