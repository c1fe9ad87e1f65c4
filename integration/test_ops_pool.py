"""Pool limits and server lifecycle against real PostgreSQL (docs/operations.md): min_pool_size,
the reserve pool, max_db_connections and max_user_connections, server_lifetime under load,
server_idle_timeout, server_check_query, server_reset_query_always, server_fast_close, and a
reload that removes a database or resizes a pool under load."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time

import psycopg
import pytest

import harness

DB_LINE = "host=127.0.0.1 port={pg_port} dbname=app"


def poll(fn, timeout: float = 15, interval: float = 0.1):
    return harness.wait_until(fn, timeout, interval)


def backend_pids(pg, user: str = "app") -> set[int]:
    return {pid for pid, _, _ in pg.server_backends(user=user)}


def db_backend_count(pg, db: str = "app") -> int:
    return int(pg.psql("SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' "
                       "AND backend_type = 'client backend'" % db))


def terminate(pg, pids) -> None:
    pg.psql("SELECT pg_terminate_backend(pid) FROM unnest(ARRAY[%s]::int[]) AS pid"
            % ",".join(str(p) for p in pids))


def rewrite_config(pooler, old: str, new: str) -> None:
    with open(pooler.config_path) as f:
        text = f.read()
    assert old in text, (old, text)
    with open(pooler.config_path, "w") as f:
        f.write(text.replace(old, new))


def reload(pooler) -> None:
    marker = len(pooler.log())
    os.kill(pooler.proc.pid, signal.SIGHUP)
    assert poll(lambda: "SIGHUP: configuration reloaded" in pooler.log()[marker:], 10), \
        pooler.log()[-3000:]


def pgbench_proc(pooler, args, user="app", password="app", db="app"):
    cmd = ["pgbench", "-h", harness.HOST, "-p", str(pooler.port), "-U", user] + args + [db]
    return subprocess.Popen(cmd, env=pooler.client_env(password), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def processed(out: str) -> int:
    for line in out.splitlines():
        if "number of transactions actually processed" in line:
            return int(line.split(":")[1].split("/")[0].strip())
    return -1


# --- min_pool_size -----------------------------------------------------------------------------

def test_min_pool_size_refills_after_backends_are_terminated(pg, make_pooler):
    assert not backend_pids(pg), "backends of app left over by an earlier test"
    pooler = make_pooler(default_pool_size=5, min_pool_size=3)
    # Enforced for a pool with a client (PgBouncer's rule): one connected, idle client.
    keeper = pooler.connect(autocommit=True)
    keeper.execute("SELECT 1")
    first = poll(lambda: (lambda p: p if len(p) >= 3 else None)(backend_pids(pg)))
    assert first and len(first) == 3, backend_pids(pg)
    terminate(pg, first)
    refilled = poll(lambda: (lambda p: p if len(p) >= 3 and not (p & first) else None)(
        backend_pids(pg)))
    assert refilled and len(refilled) == 3 and not (refilled & first), (first, refilled)
    # Not above it, and the client is still served.
    time.sleep(0.5)
    assert len(backend_pids(pg)) == 3
    assert keeper.execute("SELECT 7").fetchone()[0] == 7
    keeper.close()


def test_per_database_min_pool_size_with_a_forced_user(pg, make_pooler):
    # A forced user (user= on the line): enforced with no client connected at all.
    pooler = make_pooler(databases={
        "app": DB_LINE + " user=app min_pool_size=2 pool_size=4"}, min_pool_size=0)
    with pooler.connect(autocommit=True) as c:
        c.execute("SELECT 1")
    first = poll(lambda: (lambda p: p if len(p) >= 2 else None)(backend_pids(pg)))
    assert first and len(first) == 2, backend_pids(pg)
    terminate(pg, first)
    refilled = poll(lambda: (lambda p: p if len(p) >= 2 and not (p & first) else None)(
        backend_pids(pg)))
    assert refilled and len(refilled) == 2, (first, backend_pids(pg))


def test_a_forced_user_pool_is_filled_before_any_client(pg, make_pooler):
    # PgBouncer's janitor opens min_pool_size for a forced-user line from the start: the pool
    # exists before its first client.
    assert not backend_pids(pg), "backends of app left over by an earlier test"
    make_pooler(databases={"app": DB_LINE + " user=app min_pool_size=2 pool_size=4"},
                min_pool_size=0)
    opened = poll(lambda: (lambda p: p if len(p) >= 2 else None)(backend_pids(pg)))
    assert opened and len(opened) == 2, backend_pids(pg)


# --- reserve pool -----------------------------------------------------------------------------

def test_reserve_pool_serves_a_client_after_reserve_pool_timeout(pg, make_pooler):
    pooler = make_pooler(default_pool_size=1, reserve_pool_size=1, reserve_pool_timeout=1)
    holder = pooler.connect()
    holder_pid = holder.execute("SELECT pg_backend_pid()").fetchone()[0]  # in a transaction
    result = {}

    def second():
        started = time.monotonic()
        with pooler.connect(autocommit=True) as c:
            result["pid"] = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        result["elapsed"] = time.monotonic() - started

    t = threading.Thread(target=second)
    t.start()
    t.join(20)
    assert not t.is_alive()
    holder.rollback()
    holder.close()
    assert result.get("pid") not in (None, holder_pid), result
    # Served by the reserve only after the client waited reserve_pool_timeout.
    assert result["elapsed"] >= 0.9, result
    # PgBouncer's words, on the client that waited.
    assert re.search(r"C-\d+ app@app \S+ taking connection from reserve_pool", pooler.log()), \
        pooler.log()


def test_no_reserve_without_reserve_pool_size(pg, make_pooler):
    pooler = make_pooler(default_pool_size=1, reserve_pool_size=0, reserve_pool_timeout=0.2,
                         query_wait_timeout=2)
    holder = pooler.connect()
    holder.execute("SELECT 1")
    with pytest.raises(psycopg.Error, match="query_wait_timeout"):
        with pooler.connect(autocommit=True) as c:
            c.execute("SELECT 1")
    holder.rollback()
    holder.close()


# --- max_db_connections / max_user_connections --------------------------------------------------

@pytest.mark.parametrize("where", ["main", "database"])
def test_max_db_connections_holds_across_two_users(pg, make_pooler, tmp_path, where):
    if where == "main":
        pooler = make_pooler(default_pool_size=2, max_db_connections=2)
    else:
        pooler = make_pooler(databases={"app": DB_LINE + " max_db_connections=2"},
                             default_pool_size=2)
    script = tmp_path / "sleep.sql"
    script.write_text("SELECT pg_sleep(0.01);\n")
    args = ["-n", "-f", str(script), "-c", "3", "-T", "3"]
    procs = [pgbench_proc(pooler, args),
             pgbench_proc(pooler, args, user="scramuser", password="scrampass")]
    peak = 0
    while any(p.poll() is None for p in procs):
        peak = max(peak, db_backend_count(pg))
        time.sleep(0.02)
    outs = [p.communicate() for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, (out, err)
        assert processed(out) > 0, out
    # Both users were served (processed > 0 above): the limit was shared, not taken by one pool.
    assert 0 < peak <= 2, peak


def test_max_db_connections_evicts_an_idle_server_of_another_pool(pg, make_pooler):
    pooler = make_pooler(default_pool_size=2, max_db_connections=1)
    with pooler.connect(autocommit=True) as a:
        a_pid = a.execute("SELECT pg_backend_pid()").fetchone()[0]  # then idle in app's pool
        started = time.monotonic()
        with pooler.connect(user="scramuser", password="scrampass", autocommit=True) as b:
            b_pid = b.execute("SELECT pg_backend_pid()").fetchone()[0]
        elapsed = time.monotonic() - started
    assert b_pid != a_pid
    assert a_pid not in backend_pids(pg)  # app's idle server made room
    assert elapsed < 5, elapsed  # not a query_wait_timeout's worth of waiting
    assert "evicted: max_db_connections reached" in pooler.log()
    assert db_backend_count(pg) <= 1


def test_max_user_connections_across_two_databases(pg, make_pooler):
    config_dbs = {"app": DB_LINE, "app2": DB_LINE}
    pooler = make_pooler(databases=config_dbs, default_pool_size=3)
    with open(pooler.config_path, "a") as f:
        f.write("[users]\napp = max_user_connections=1\n")
    reload(pooler)
    holder = pooler.connect()
    holder_pid = holder.execute("SELECT pg_backend_pid()").fetchone()[0]
    result = {}

    def other_database():
        with pooler.connect(db="app2", autocommit=True) as c:
            result["pid"] = c.execute("SELECT pg_backend_pid()").fetchone()[0]

    t = threading.Thread(target=other_database)
    t.start()
    time.sleep(1.0)
    # Held: app's only allowed server is in a transaction.
    assert "pid" not in result
    assert len(backend_pids(pg)) == 1
    holder.commit()  # its server goes idle: handed over to app2's waiting client
    t.join(15)
    assert not t.is_alive()
    assert result["pid"] != holder_pid
    assert len(backend_pids(pg)) <= 1
    # And back: app's pool gets a server again once app2's is idle.
    assert holder.execute("SELECT 5").fetchone()[0] == 5
    holder.close()



def test_a_users_pool_size_wins_over_the_default(pg, make_pooler):
    # PgBouncer 1.25: [users] pool_size is the pool's size for that server user (before, it was
    # accepted with a warning and the pool kept default_pool_size).
    pooler = make_pooler(databases={"app": DB_LINE}, default_pool_size=1, admin_users="app",
                         query_wait_timeout=5)
    with open(pooler.config_path, "a") as f:
        f.write("[users]\napp = pool_size=2 reserve_pool_size=0\n")
    reload(pooler)
    first, second = pooler.connect(), pooler.connect()
    try:
        pids = {first.execute("SELECT pg_backend_pid()").fetchone()[0],
                second.execute("SELECT pg_backend_pid()").fetchone()[0]}
        assert len(pids) == 2, "the second transaction did not get a second server"
        rc, out, err = pooler.psql("SHOW USERS", db="pgsluice")
        assert rc == 0, err
        row = [line.split("|") for line in out.splitlines() if line.startswith("app|")][0]
        assert row[1:3] == ["2", "0"], row
    finally:
        first.close()
        second.close()


# --- server lifetime, idle timeout, checks -----------------------------------------------------

def test_server_lifetime_replaces_servers_under_pgbench_without_a_failure(pgbench_data,
                                                                          make_pooler):
    pg = pgbench_data
    pooler = make_pooler(default_pool_size=3, server_lifetime=1)
    proc = pgbench_proc(pooler, ["-n", "-S", "-c", "3", "-T", "5"])
    pids_seen = set()
    while proc.poll() is None:
        pids_seen |= backend_pids(pg)
        time.sleep(0.1)
    out, err = proc.communicate()
    assert proc.returncode == 0, (out, err)
    assert processed(out) > 0, out
    assert "failed" not in out or "number of failed transactions: 0" in out, out
    # 3 servers for 5 s with a lifetime of 1-1.25 s: replaced several times over.
    assert len(pids_seen) > 3, pids_seen
    assert "closing because: server_lifetime" in pooler.log()


def test_server_idle_timeout_closes_idle_servers(pg, make_pooler):
    pooler = make_pooler(default_pool_size=3, server_idle_timeout=1)
    with pooler.connect(autocommit=True) as c:
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        assert poll(lambda: not backend_pids(pg), 10), backend_pids(pg)
        # A new server, no error.
        assert c.execute("SELECT pg_backend_pid()").fetchone()[0] != pid
    assert "closing because: server_idle_timeout" in pooler.log()


def test_server_check_query_replaces_a_failing_server(pg, make_pooler):
    pg.psql("CREATE TABLE IF NOT EXISTS pgsluice_bad_backends (pid int); "
            "GRANT SELECT ON pgsluice_bad_backends TO PUBLIC; "
            "TRUNCATE pgsluice_bad_backends", db="app")
    check = ("SELECT 1 / (1 - (SELECT count(*)::int FROM pgsluice_bad_backends "
             "WHERE pid = pg_backend_pid()))")
    pooler = make_pooler(default_pool_size=1, server_check_delay=0,
                         server_check_query=check)
    with pooler.connect(autocommit=True) as c:
        first = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        assert c.execute("SELECT pg_backend_pid()").fetchone()[0] == first  # check passed
        pg.psql(f"INSERT INTO pgsluice_bad_backends VALUES ({first})", db="app")
        # The check fails on that server: closed, and the query runs on a new one.
        second = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        assert second != first
    assert "closing because: server_check_query failed" in pooler.log()
    assert first not in backend_pids(pg)


def test_default_server_check_query_is_an_empty_query(pg, make_pooler):
    # PgBouncer 1.25's default (`<empty>`): an idle server is checked with an empty query, which
    # PostgreSQL logs (log_statement = all) as "statement: " with nothing after it.
    pg.psql("ALTER ROLE app SET log_statement = 'all'")
    try:
        pooler = make_pooler(default_pool_size=1, server_check_delay=0)
        with pooler.connect(autocommit=True) as c:
            first = c.execute("SELECT pg_backend_pid()").fetchone()[0]
            with open(pg.logfile) as f:
                f.seek(0, 2)
                second = c.execute("SELECT pg_backend_pid()").fetchone()[0]
                logged = f.read()
        assert second == first  # the check passed: the same server
        assert len(re.findall(r" LOG:  statement: \n", logged)) == 1, logged
    finally:
        pg.psql("ALTER ROLE app RESET log_statement")


def test_server_reset_query_always_resets_in_transaction_mode(pg, make_pooler):
    def leaked(**settings) -> str:
        # warn: under the default (keep) the setting would not reach b in either case.
        pooler = make_pooler(default_pool_size=1, session_state_action="warn", **settings)
        with pooler.connect(autocommit=True) as a:
            a.execute("SET statement_timeout = '12345ms'")
        with pooler.connect(autocommit=True) as b:
            value = b.execute("SHOW statement_timeout").fetchone()[0]
        pooler.stop()
        return value

    assert leaked(server_reset_query_always=0) == "12345ms"  # the leak the key is for
    assert leaked(server_reset_query_always=1) == "0"


def test_server_fast_close_ends_a_session_after_reconnect(pg, make_pooler):
    pooler = make_pooler(pool_mode="session", server_fast_close=1, admin_users="app")
    client = pooler.connect()
    pid = client.execute("SELECT pg_backend_pid()").fetchone()[0]  # in a transaction
    with psycopg.connect(pooler.dsn(db="pgbouncer"), autocommit=True) as admin:
        admin.execute("RECONNECT")
    time.sleep(0.5)
    # Never inside a transaction: it finishes first.
    assert client.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
    client.commit()
    assert poll(lambda: pid not in backend_pids(pg), 10)
    with pytest.raises(psycopg.OperationalError):
        client.execute("SELECT 1")
    client.close()
    # PgBouncer's reason first (its log readers grep it), then pgsluice's setting.
    assert re.search(r"S-\d+ .* closing because: database configuration changed "
                     r"\(server_fast_close: ", pooler.log()), pooler.log()


def test_without_server_fast_close_a_session_keeps_its_server(pg, make_pooler):
    pooler = make_pooler(pool_mode="session", admin_users="app")
    with pooler.connect(autocommit=True) as client:
        pid = client.execute("SELECT pg_backend_pid()").fetchone()[0]
        with psycopg.connect(pooler.dsn(db="pgbouncer"), autocommit=True) as admin:
            admin.execute("RECONNECT")
        time.sleep(0.6)
        assert client.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
    assert poll(lambda: pid not in backend_pids(pg), 10)  # closed when the session ended


# --- reload ------------------------------------------------------------------------------------

def test_removed_database_drains(pg, make_pooler):
    pooler = make_pooler(databases={"app": DB_LINE, "gone": DB_LINE}, default_pool_size=2)
    old = pooler.connect(db="gone", autocommit=True)
    in_tx = pooler.connect(db="gone")
    tx_pid = in_tx.execute("SELECT pg_backend_pid()").fetchone()[0]
    old.execute("SELECT 1")
    rewrite_config(pooler, "gone = " + DB_LINE.replace("{pg_port}", str(pg.port)) + "\n", "")
    reload(pooler)
    # New clients of the removed database are refused.
    with pytest.raises(psycopg.Error):
        pooler.connect(db="gone", autocommit=True).close()
    # The open transaction finishes on its server; existing clients go on being served.
    assert in_tx.execute("SELECT pg_backend_pid()").fetchone()[0] == tx_pid
    in_tx.commit()
    for i in range(3):
        assert old.execute("SELECT %s::int", (i,)).fetchone()[0] == i
    old.close()
    in_tx.close()
    # Nobody left: its servers close.
    assert poll(lambda: not backend_pids(pg), 10), backend_pids(pg)
    assert "database removed from the configuration" in pooler.log()
    with pooler.connect(autocommit=True) as c:  # the other database is untouched
        assert c.execute("SELECT 1").fetchone()[0] == 1


def test_sighup_grows_a_pool_under_load(pgbench_data, make_pooler):
    pg = pgbench_data
    pooler = make_pooler(default_pool_size=2)
    script = os.path.join(pooler.dir, "sleep.sql")
    with open(script, "w") as f:
        f.write("SELECT pg_sleep(0.02);\n")
    proc = pgbench_proc(pooler, ["-n", "-f", script, "-c", "6", "-T", "4"])
    # Pools grow lazily, one login at a time: wait for the second server (seconds on a loaded
    # machine) rather than sleeping a fixed second.
    before = poll(lambda: (lambda n: n if n >= 2 else None)(len(backend_pids(pg))), 10)
    rewrite_config(pooler, "default_pool_size = 2", "default_pool_size = 5")
    reload(pooler)
    peak = poll(lambda: (lambda n: n if n == 5 else None)(len(backend_pids(pg))), 5)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, (out, err)
    assert processed(out) > 0
    assert before == 2
    assert peak == 5, backend_pids(pg)


# --- the console -------------------------------------------------------------------------------

def test_show_config_databases_and_users_show_the_limits(pg, make_pooler):
    pooler = make_pooler(databases={"app": DB_LINE + " min_pool_size=1 reserve_pool=2 "
                                    "max_db_connections=7 server_lifetime=90"},
                         admin_users="app", server_idle_timeout=33, server_check_delay=4,
                         server_fast_close=1, max_user_connections=6)
    with psycopg.connect(pooler.dsn(db="pgbouncer"), autocommit=True) as admin:
        cur = admin.execute("SHOW CONFIG")
        config = {row[0]: row[1] for row in cur.fetchall()}
        cur = admin.execute("SHOW DATABASES")
        cols = [d.name for d in cur.description]
        dbs = {row[0]: dict(zip(cols, row)) for row in cur.fetchall()}
        admin.execute("SET server_lifetime = 120")
        lifetime = {r[0]: r[1] for r in admin.execute("SHOW CONFIG").fetchall()}
    assert config["server_idle_timeout"] == "33"
    assert config["server_check_delay"] == "4"
    assert config["server_fast_close"] == "1"
    assert config["max_user_connections"] == "6"
    for key in ("min_pool_size", "reserve_pool_size", "reserve_pool_timeout",
                "max_db_connections", "server_lifetime", "server_check_query",
                "server_reset_query_always"):
        assert key in config, key
    app = dbs["app"]
    assert (app["min_pool_size"], app["reserve_pool_size"], app["max_connections"],
            app["server_lifetime"]) == (1, 2, 7, 90), app
    assert lifetime["server_lifetime"] == "120"
