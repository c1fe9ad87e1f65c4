"""Session-state checks through pgsluice in transaction mode: what a client leaves on a shared
server (a plain SET, an advisory lock, a LISTEN, a temp table, …) is found, logged and acted on
by session_state_action: warn (the breakage happens, and is recorded), reject (0A000 with a
hint), reset (the server is cleaned before anyone else gets it) and pin (the client keeps its
server)."""

from __future__ import annotations

import time

import psycopg
import psycopg.errors
import pytest


def backend_pid(conn) -> int:
    return conn.execute("SELECT pg_backend_pid()").fetchone()[0]


def test_warn_is_the_default_and_the_leak_happens(make_pooler):
    # Seed 002's experiment 3: one client's SET reaches the next client of the same server.
    pooler = make_pooler(default_pool_size=1)
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        a.execute("SET statement_timeout = '12345ms'")
        assert b.execute("SHOW statement_timeout").fetchone()[0] == "12345ms"
    m = pooler.wait_for_log(r"session state: set statement_timeout \(definite\), action warn")
    assert m, pooler.log()


def test_warn_logs_each_finding_once(make_pooler):
    pooler = make_pooler(default_pool_size=1)
    with pooler.connect(autocommit=True) as a:
        for n in range(5):
            a.execute(f"SET work_mem = '{64 + n}MB'")
        a.execute("SELECT pg_advisory_lock(7)")
        a.execute("SELECT pg_advisory_unlock(7)")
    assert pooler.wait_for_log(r"advisory_lock pg_advisory_lock"), pooler.log()
    # Constants differ, the fingerprint does not: one log line for the five SETs.
    assert pooler.log().count("session state: set work_mem") == 1, pooler.log()


def test_do_block_body_is_checked(make_pooler):
    pooler = make_pooler(default_pool_size=1)
    with pooler.connect(autocommit=True) as a:
        a.execute("DO $$ BEGIN PERFORM pg_advisory_lock(11); END $$")
        a.execute("SELECT pg_advisory_unlock_all()")
    assert pooler.wait_for_log(r"session state: advisory_lock pg_advisory_lock"), pooler.log()


def test_reject_refuses_with_sqlstate_and_hint(make_pooler):
    pooler = make_pooler(default_pool_size=1, session_state_action="reject")
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            a.execute("SET statement_timeout = '777ms'")
        assert "SET LOCAL" in (e.value.diag.message_hint or "")
        assert "pgsluice refused" in str(e.value)
        # Nothing reached the server: the next client sees the default.
        assert b.execute("SHOW statement_timeout").fetchone()[0] == "0"
        # The safe forms pass.
        a.execute("BEGIN")
        a.execute("SET LOCAL statement_timeout = '5s'")
        assert a.execute("SHOW statement_timeout").fetchone()[0] == "5s"
        a.execute("SELECT pg_advisory_xact_lock(3)")
        a.execute("COMMIT")
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            a.execute("SELECT pg_advisory_lock(3)")
        assert "pg_advisory_xact_lock" in (e.value.diag.message_hint or "")
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            a.execute("LISTEN jobs")
        assert a.execute("SELECT 1").fetchone()[0] == 1


def test_reject_inside_a_transaction_fails_the_transaction(make_pooler):
    # As if PostgreSQL had refused it: the transaction block is failed, ROLLBACK recovers.
    pooler = make_pooler(default_pool_size=1, session_state_action="reject")
    with pooler.connect() as a:
        a.execute("SELECT 1")
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            a.execute("SET search_path = elsewhere")
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            a.execute("SELECT 1")
        a.rollback()
        assert a.execute("SELECT 2").fetchone()[0] == 2
        a.commit()


def test_reject_warns_on_possible_verdicts(make_pooler):
    pooler = make_pooler(default_pool_size=1, session_state_action="reject")
    with pooler.connect(autocommit=True) as a:
        # A non-constant third argument: maybe session-wide, maybe not. Forwarded, recorded.
        a.execute("SELECT set_config('application_name', 'x', %s)", (True,))
    assert pooler.wait_for_log(r"set_config .*\(possible\), action warn"), pooler.log()


def test_reset_cleans_each_kind_before_reuse(pg, make_pooler):
    pooler = make_pooler(default_pool_size=1, session_state_action="reset")
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        pid = backend_pid(a)
        a.execute("SET statement_timeout = '4321ms'")
        a.execute("SELECT pg_advisory_lock(42)")
        a.execute("LISTEN leaky_channel")
        a.execute("CREATE TEMP TABLE scratch (x int)")
        a.execute("PREPARE p AS SELECT 1")
        a.execute("BEGIN")
        a.execute("DECLARE c CURSOR WITH HOLD FOR SELECT 1")
        a.execute("COMMIT")
        assert backend_pid(b) == pid  # the same server, so the test is meaningful
        assert b.execute("SHOW statement_timeout").fetchone()[0] == "0"
        assert b.execute("SELECT count(*) FROM pg_listening_channels()").fetchone()[0] == 0
        assert b.execute("SELECT to_regclass('pg_temp.scratch')").fetchone()[0] is None
        assert b.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0
        assert b.execute("SELECT count(*) FROM pg_cursors").fetchone()[0] == 0
    # The lock is gone as soon as the server was released, not when the next client came.
    locks = pg.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
    assert locks.strip() == "0"


def test_reset_releases_a_lock_held_by_an_idle_client(pg, make_pooler):
    pooler = make_pooler(default_pool_size=2, session_state_action="reset")
    with pooler.connect(autocommit=True) as a:
        a.execute("SELECT pg_advisory_lock(99)")
        # a stays connected and idle: its server went back to the pool, cleaned.
        deadline = time.time() + 5
        while time.time() < deadline:
            if pg.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").strip() == "0":
                break
            time.sleep(0.1)
        assert pg.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").strip() == "0"


def test_reset_reapplies_startup_settings(make_pooler):
    # A client's startup search_path survives another client's RESET-based cleanup.
    pooler = make_pooler(default_pool_size=1, session_state_action="reset")
    with pooler.connect(autocommit=True, options="-c search_path=pg_catalog") as a, \
            pooler.connect(autocommit=True) as b:
        assert a.execute("SHOW search_path").fetchone()[0] == "pg_catalog"
        b.execute("SET search_path = public")
        assert a.execute("SHOW search_path").fetchone()[0] == "pg_catalog"
        assert b.execute("SHOW search_path").fetchone()[0] == '"$user", public'


def test_pin_keeps_listen_working(pg, make_pooler):
    pooler = make_pooler(default_pool_size=2, session_state_action="warn,listen:pin")
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        a.execute("LISTEN pinned_channel")
        pid = backend_pid(a)
        for _ in range(5):
            b.execute("SELECT 1")
            assert backend_pid(a) == pid
        assert backend_pid(b) != pid
        got: list[str] = []
        a.add_notify_handler(lambda n: got.append(n.payload))
        pg.psql("NOTIFY pinned_channel, 'hello'", db="app")
        deadline = time.time() + 5
        while not got and time.time() < deadline:
            a.execute("SELECT 1")  # the notification comes with a reply
            time.sleep(0.05)
        assert got == ["hello"]
    # When the client leaves, its server is cleaned and returned.
    with pooler.connect(autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM pg_listening_channels()").fetchone()[0] == 0


def test_per_kind_override_and_user_entry(make_pooler):
    config = """
[databases]
app = host=127.0.0.1 port={pg_port} dbname=app
[users]
scramuser = session_state_action=reject
[pgsluice]
listen_addr = 127.0.0.1
listen_port = {port}
auth_type = scram-sha-256
auth_file = {auth_file}
pool_mode = transaction
default_pool_size = 2
session_state_action = reset,advisory_lock:reject
"""
    pooler = make_pooler(config)
    with pooler.connect(autocommit=True) as a:
        a.execute("SET work_mem = '8MB'")  # reset: allowed
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            a.execute("SELECT pg_try_advisory_lock(1)")
    with pooler.connect(user="scramuser", password="scrampass", db="app",
                        autocommit=True) as s:
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            s.execute("SET work_mem = '8MB'")


def test_orphan_notification_is_evidence(pg, make_pooler):
    pooler = make_pooler(default_pool_size=1)
    with pooler.connect(autocommit=True) as a:
        a.execute("LISTEN orphan_channel")
    # The client is gone; its server is idle in the pool, still listening.
    pg.psql("NOTIFY orphan_channel", db="app")
    m = pooler.wait_for_log(r'notification on channel "orphan_channel" reached an idle', 10)
    assert m, pooler.log()


def test_session_mode_is_not_checked_by_default(make_pooler):
    pooler = make_pooler(pool_mode="session", default_pool_size=1)
    with pooler.connect(autocommit=True) as a:
        a.execute("SET statement_timeout = '1s'")
    time.sleep(0.2)
    assert "session state:" not in pooler.log()


def test_bad_policy_is_a_config_error(make_pooler):
    pooler = make_pooler(session_state_action="reset,listen:teleport", start=False)
    from harness import run
    rc, out, err = run([pooler.binary, pooler.config_path], timeout=10)
    assert rc == 1
    assert "session_state_action" in err and "teleport" in err


def test_show_leaks_names_who_did_what(make_pooler):
    pooler = make_pooler(default_pool_size=1, admin_users="app")
    with pooler.connect(autocommit=True, application_name="billing") as a:
        a.execute("SET search_path = public")
        a.execute("SET search_path = pg_catalog")
        a.execute("SELECT pg_advisory_lock(5)")
        a.execute("SELECT pg_advisory_unlock(5)")
    rc, out, err = pooler.psql("SHOW LEAKS", db="pgsluice")
    assert rc == 0, err
    rows = [line.split("|") for line in out.strip().splitlines()]
    by_kind = {(r[0], r[1]): r for r in rows}
    row = by_kind[("set", "search_path")]
    # kind|detail|certainty|action|database|user|application_name|client_addr|source|count|…
    assert row[2:7] == ["definite", "warn", "app", "app", "billing"], row
    assert row[8] == "query" and row[9] == "2", row
    assert "search_path" in row[13] and "$1" in row[13], row
    assert ("advisory_lock", "pg_advisory_lock") in by_kind, rows
