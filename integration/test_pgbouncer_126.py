"""PgBouncer 1.26 items of issue 44, as PgBouncer defines them: login_notify_message (#1488), the
client_login_count statistic (#1457), query_wait_timeout per database and per user (#1449),
pool_idle_timeout (#1491), passwords up to 65,530 bytes (#1310, #1520), late COPY messages
(#1471), query_timeout on a connection running no query (#1395) and search_path and
default_transaction_read_only kept per client (#1573, #1580)."""

from __future__ import annotations

import os
import threading
import time

import psycopg
import pytest
from psycopg import pq

import harness
from test_pgbouncer_keys import admin, reload_with

# --- login_notify_message --------------------------------------------------------------------

WELCOME = "Connected through pgsluice; PostgreSQL itself is on port 5432"


class GreetingRecorder(harness.RawClient):
    """A RawClient that keeps the kind of every message it read, in order."""

    def __init__(self, *args, **kwargs):
        self.kinds: list[bytes] = []
        super().__init__(*args, **kwargs)

    def read_message(self) -> tuple[bytes, bytes]:
        kind, body = super().read_message()
        self.kinds.append(kind)
        return kind, body


def greeting(pooler, db: str = "app") -> tuple[list[bytes], list[tuple[str, str, str]]]:
    """What a login ends with, from BackendKeyData on, and its notices as (S, C, M)."""
    with GreetingRecorder(harness.HOST, pooler.port, "app", db, "app") as c:
        tail = c.kinds[c.kinds.index(b"K"):]
        return tail, [(n["S"], n["C"], n["M"]) for n in c.notices]


def test_login_notify_message(make_pooler):
    p = make_pooler(login_notify_message=WELCOME, admin_users="app")
    # PgBouncer's welcome_client: the NOTICE after BackendKeyData, before ReadyForQuery.
    assert greeting(p) == ([b"K", b"N", b"Z"], [("NOTICE", "00000", WELCOME)])
    # psql prints it as it prints a server's NOTICE.
    rc, out, err = p.psql("SELECT 1")
    assert rc == 0 and out.strip() == "1", err
    assert f"NOTICE:  {WELCOME}" in err, err
    # The admin console's greeting has it too, as PgBouncer's.
    assert greeting(p, db="pgsluice") == ([b"K", b"N", b"Z"], [("NOTICE", "00000", WELCOME)])
    assert f"login_notify_message|{WELCOME}||yes" in admin(p, "SHOW CONFIG").splitlines()
    # Reloadable: the next logins get the new text.
    reload_with(p, login_notify_message="Pooled")
    assert greeting(p)[1] == [("NOTICE", "00000", "Pooled")]


def test_no_login_notice_by_default(make_pooler):
    p = make_pooler()
    assert greeting(p) == ([b"K", b"Z"], [])
    rc, _, err = p.psql("SELECT 1")
    assert rc == 0 and "NOTICE" not in err, err


# --- client_login_count ----------------------------------------------------------------------


def stats_column(pooler, command: str, column: str) -> dict[str, int]:
    """One column of SHOW STATS / STATS_TOTALS, by database (over a console login of its own)."""
    with psycopg.connect(pooler.dsn(db="pgsluice"), autocommit=True) as conn:
        cur = conn.execute(command)
        names = [d.name for d in cur.description]
        return {row[0]: int(row[names.index(column)]) for row in cur.fetchall()}


def test_client_login_count(make_pooler):
    p = make_pooler(admin_users="app")
    for _ in range(3):
        with p.connect(autocommit=True) as c:
            c.execute("SELECT 1")
    with p.raw() as c:  # a login that runs nothing counts as well
        pass
    with pytest.raises(psycopg.OperationalError):  # a refused login does not count
        p.connect(password="wrong")
    with pytest.raises(psycopg.OperationalError):  # nor one to an unknown database
        p.connect(db="nosuchdb")
    # The console's logins count in its own row: this one is its first.
    counts = stats_column(p, "SHOW STATS", "total_client_login_count")
    assert (counts["app"], counts["pgbouncer"]) == (4, 1), counts
    counts = stats_column(p, "SHOW STATS_TOTALS", "client_login_count")
    assert (counts["app"], counts["pgbouncer"]) == (4, 2), counts
    totals = dict(line.split("|") for line in admin(p, "SHOW TOTALS").splitlines())
    assert int(totals["total_client_login_count"]) == 4 + 3, totals


# --- query_wait_timeout per database and per user --------------------------------------------

PER_POOL_TIMEOUTS = f"""
[databases]
quick = host={harness.HOST} port={{pg_port}} dbname=app query_wait_timeout=1
plain = host={harness.HOST} port={{pg_port}} dbname=app

[users]
scramuser = query_wait_timeout=3

[pgsluice]
listen_addr = {harness.HOST}
listen_port = {{port}}
auth_type = scram-sha-256
auth_file = {{auth_file}}
pool_mode = transaction
default_pool_size = 1
query_wait_timeout = 60
"""

CREDENTIALS = {"app": "app", "scramuser": "scrampass"}


def wait_behind_holder(pooler, user: str, db: str) -> tuple[float, harness.PgError]:
    """A client of user@db queued behind another holding the pool's one server in an open
    transaction, until it fails: how long it waited, and its error (read off the wire: libpq
    reports an error followed by the close without its SQLSTATE)."""
    holder = pooler.connect(user=user, password=CREDENTIALS[user], db=db)
    holder.execute("SELECT 1")
    try:
        with pooler.raw(user=user, password=CREDENTIALS[user], db=db) as waiter:
            started = time.monotonic()
            waiter.send_query("SELECT 2")
            kind, body = waiter.read_message()  # then the close, without a ReadyForQuery
            waited = time.monotonic() - started
            assert kind == b"E", (kind, body)
            return waited, harness.PgError(waiter._fields(body))
    finally:
        holder.rollback()
        holder.close()


def test_query_wait_timeout_of_database_and_user(make_pooler):
    p = make_pooler(PER_POOL_TIMEOUTS)
    # The database's 1 s, well under the main section's 60 s; the error the global one gives.
    waited, error = wait_behind_holder(p, "app", "quick")
    assert 0.9 <= waited < 2.5, waited
    assert (error.sqlstate, error.message) == ("57014", "query_wait_timeout"), error
    # The user's 3 s wins over the database's 1 s (PgBouncer's janitor.c: user, database, main).
    waited, error = wait_behind_holder(p, "scramuser", "quick")
    assert 2.9 <= waited < 5, waited
    assert error.sqlstate == "57014", error
    # The user's wherever it connects.
    waited, _ = wait_behind_holder(p, "scramuser", "plain")
    assert 2.9 <= waited < 5, waited


def test_query_wait_timeout_of_main_section_where_neither_sets_one(make_pooler):
    p = make_pooler(PER_POOL_TIMEOUTS)
    holder = p.connect(db="plain")
    holder.execute("SELECT 1")
    result = {}

    def wait() -> None:
        with p.connect(db="plain", autocommit=True) as c:
            result["row"] = c.execute("SELECT 2").fetchone()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(4)  # longer than the database's and the user's elsewhere: still waiting
    assert waiter.is_alive() and not result
    holder.rollback()
    waiter.join(10)
    assert result.get("row") == (2,), result
    holder.close()


# --- pool_idle_timeout -----------------------------------------------------------------------


def console_rows(pooler, command: str) -> list[dict]:
    """The rows of a console command as dicts by column (over a console login of its own)."""
    with psycopg.connect(pooler.dsn(db="pgsluice"), autocommit=True) as conn:
        cur = conn.execute(command)
        names = [d.name for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]


def pool_keys(pooler) -> list[tuple[str, str]]:
    return [(r["database"], r["user"]) for r in console_rows(pooler, "SHOW POOLS")]


def test_pool_idle_timeout(make_pooler, pg):
    # PgBouncer's test_pool_idle_timeout (test/test_timeouts.py, #1491), with SET as there.
    p = make_pooler(admin_users="app")
    admin(p, "SET pool_idle_timeout = 1")
    admin(p, "SET server_idle_timeout = 1")
    with p.connect(autocommit=True) as c:
        c.execute("SELECT 1")
    assert ("app", "app") in pool_keys(p)
    assert harness.wait_until(lambda: len(pg.server_backends()) == 1, 5), pg.server_backends()
    assert p.wait_for_log(r"cleaning up idle pool for user app on db app because: "
                          r"pool idle timeout", timeout=6), p.log()
    # Gone from SHOW POOLS entirely, not only its servers; so is its backend.
    assert harness.wait_until(lambda: ("app", "app") not in pool_keys(p), 3), pool_keys(p)
    assert harness.wait_until(lambda: pg.server_backends() == [], 5), pg.server_backends()
    # The next client makes it again, its statistics starting over (as PgBouncer's).
    with p.connect(autocommit=True) as c:
        assert c.execute("SELECT 2").fetchone() == (2,)
    assert ("app", "app") in pool_keys(p)
    assert harness.wait_until(
        lambda: stats_column(p, "SHOW STATS", "total_xact_count").get("app") == 1, 5)


def test_pool_idle_timeout_off_by_default(make_pooler):
    p = make_pooler(admin_users="app", server_idle_timeout=1)
    assert "pool_idle_timeout|0|0|yes" in admin(p, "SHOW CONFIG").splitlines()
    with p.connect(autocommit=True) as c:
        c.execute("SELECT 1")
    time.sleep(3)
    assert ("app", "app") in pool_keys(p)
    assert "cleaning up idle pool" not in p.log()


def test_pool_idle_timeout_keeps_a_pool_another_worker_uses(make_pooler):
    # pgsluice's own case: a pool is one pool for every worker, each holding a share of it. A
    # client idle on one worker (its server closed by server_idle_timeout) keeps the share of
    # another worker too, with that share's statistics.
    p = make_pooler(admin_users="app", workers=2, pool_idle_timeout=1, server_idle_timeout=1)
    stays = p.connect(autocommit=True)
    stays.execute("SELECT 1")
    with p.connect(autocommit=True) as leaves:  # the other worker: it has the fewest clients
        for _ in range(4):
            leaves.execute("SELECT 1")
    time.sleep(3)
    assert "cleaning up idle pool" not in p.log()
    assert harness.wait_until(
        lambda: stats_column(p, "SHOW STATS", "total_xact_count").get("app") == 5, 5)
    stays.close()
    # Then both workers' shares go (placement is by the fewest clients: one on each).
    for worker in (0, 1):
        assert p.wait_for_log(rf"cleaning up idle pool for user app on db app because: pool idle "
                              rf"timeout \(age=\d+s, worker {worker}\)", timeout=6), p.log()
    assert harness.wait_until(lambda: ("app", "app") not in pool_keys(p), 3), pool_keys(p)


def test_pool_idle_timeout_spares_forced_user_with_min_pool_size(make_pooler):
    # PgBouncer's test_pool_idle_timeout_ignores_min_pool_size: the janitor makes such a pool
    # itself (min_pool_size opens servers before any client), here with a backend that is not
    # there, so that it never has a server; freeing it would only make it again every round.
    p = make_pooler(databases={
        "app": "host=127.0.0.1 port={pg_port} dbname=app",
        "dead": f"host=127.0.0.1 port={harness.free_port()} dbname=app user=app password=app "
                "min_pool_size=3",
    }, admin_users="app", pool_idle_timeout=1, server_login_retry=1)
    time.sleep(3)
    assert ("dead", "app") in pool_keys(p)
    assert "cleaning up idle pool" not in p.log()


# --- passwords up to 65,530 bytes ------------------------------------------------------------

# PgBouncer's LONG_PASSWORD (test/utils.py): MAX_PASSWORD - 1 with MAX_PASSWORD = 65531 since
# #1310, the longest a PasswordMessage carries under PostgreSQL's 65535-byte cap on an
# authentication message (length word and NUL included).
LONG_PASSWORD = "a" * 65530


@pytest.fixture(scope="module")
def longpass(pg):
    pg.psql("DROP ROLE IF EXISTS longpass")
    pg.psql(f"CREATE ROLE longpass LOGIN PASSWORD '{LONG_PASSWORD}'")
    return "longpass"


def long_password_pooler(make_pooler, auth_type: str, **settings):
    users = {"app": "app", "longpass": LONG_PASSWORD}
    return make_pooler(users=users, auth_type=auth_type, admin_users="app", **settings)


@pytest.mark.parametrize("auth_type", ["plain", "scram-sha-256"])
def test_long_password_in_auth_file(make_pooler, longpass, auth_type):
    # plain: the client's PasswordMessage is 65,535 bytes (#1520); scram-sha-256: the client
    # proves it knows the password. Either way pgsluice logs in to PostgreSQL with it.
    p = long_password_pooler(make_pooler, auth_type)
    with p.connect(user=longpass, password=LONG_PASSWORD, autocommit=True) as c:
        assert c.execute("SELECT current_user").fetchone() == ("longpass",)
    with pytest.raises(psycopg.OperationalError):
        p.connect(user=longpass, password=LONG_PASSWORD[:-1])
    # One byte more than a PasswordMessage may carry: refused (PgBouncer says "password
    # authentication failed"; pgsluice refuses the message as PostgreSQL would, 08P01).
    with pytest.raises(psycopg.OperationalError, match="authentication"):
        p.connect(user=longpass, password="X" + LONG_PASSWORD)


@pytest.fixture(scope="module")
def longtrust(pg):
    """A role with the long password that PostgreSQL lets in without one from 127.0.0.1, as
    PgBouncer's tests let every role in (trust): under auth_type plain an auth_query user's
    secret is a SCRAM verifier, from which no pooler can log in to a server that asks for SCRAM."""
    pg.psql("DROP ROLE IF EXISTS longtrust")
    pg.psql(f"CREATE ROLE longtrust LOGIN PASSWORD '{LONG_PASSWORD}'")
    hba = os.path.join(pg.data, "pg_hba.conf")
    with open(hba) as f:
        rules = f.read()
    with open(hba, "w") as f:
        f.write(f"host all longtrust {harness.HOST}/32 trust\n" + rules)
    pg.psql("SELECT pg_reload_conf()")
    return "longtrust"


def test_long_password_through_auth_query(make_pooler, longpass, longtrust):
    # PgBouncer's test_auth_query_login_large_packets: the secret is PostgreSQL's SCRAM verifier
    # of the long password, found by auth_query (the default, PgBouncer's pg_authid query), and
    # the client's PasswordMessage is 65,535 bytes long.
    p = make_pooler(users={"app": "app", "postgres": "postgres"}, auth_type="plain",
                    auth_user="postgres")
    with p.connect(user=longtrust, password=LONG_PASSWORD, autocommit=True) as c:
        assert c.execute("SELECT current_user").fetchone() == ("longtrust",)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        p.connect(user=longtrust, password="b" + LONG_PASSWORD[1:])
    # Under scram-sha-256 the client proves the long password against that verifier, and its
    # proof logs the pool in to PostgreSQL (SCRAM pass-through), which asks for SCRAM.
    p = make_pooler(users={"app": "app", "postgres": "postgres"}, auth_type="scram-sha-256",
                    auth_user="postgres")
    with p.connect(user=longpass, password=LONG_PASSWORD, autocommit=True) as c:
        assert c.execute("SELECT current_user").fetchone() == ("longpass",)
    with pytest.raises(psycopg.OperationalError):
        p.connect(user=longpass, password="b" + LONG_PASSWORD[1:])


def test_long_password_and_max_packet_size(make_pooler, longpass):
    # Before login a message may be max_packet_size long, at most PostgreSQL's 65535: a
    # max_packet_size under a PasswordMessage's length refuses that password (as PgBouncer, which
    # applies max_packet_size to every packet).
    p = long_password_pooler(make_pooler, "plain", max_packet_size=16384)
    with pytest.raises(psycopg.OperationalError, match="at most 16384"):
        p.connect(user=longpass, password=LONG_PASSWORD)
    with p.connect(user="app", password="app", autocommit=True) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


# --- COPY outside a transaction does not hold a server ---------------------------------------


@pytest.fixture(scope="module")
def copy_table(pg):
    pg.psql("CREATE TABLE IF NOT EXISTS test_copy (i int); GRANT ALL ON test_copy TO PUBLIC",
            db="app")
    return "test_copy"


def another_client_is_served(pooler) -> float:
    """How long a second client waits for the pool's one server (query_wait_timeout is 5 s)."""
    started = time.monotonic()
    with pooler.connect(autocommit=True) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)
    return time.monotonic() - started


def copy_in_bad_row_before_copy_done(pgconn) -> None:
    """PgBouncer's race (test/test_copy.py, #1471): the server fails the COPY and says
    ReadyForQuery before the client's CopyDone, which arrives late."""
    assert pgconn.get_result().status == pq.ExecStatus.COPY_IN
    pgconn.put_copy_data(b"\n")  # an empty line: no integer
    pgconn.flush()
    time.sleep(1)
    assert pgconn.get_result().status == pq.ExecStatus.COPY_IN
    pgconn.put_copy_end()
    assert pgconn.get_result().status == pq.ExecStatus.FATAL_ERROR
    assert pgconn.get_result() is None


def test_late_copy_done_does_not_hold_a_server(make_pooler, copy_table):
    p = make_pooler(default_pool_size=1, query_wait_timeout=5)
    with p.connect(autocommit=True) as conn:
        conn.pgconn.send_query(b"COPY test_copy(i) FROM STDIN")
        copy_in_bad_row_before_copy_done(conn.pgconn)
        time.sleep(0.5)  # the late CopyDone is at the pooler
        # The client now sends nothing: the one server serves another client meanwhile (a late
        # CopyDone given a server would keep it until this client's next query).
        assert another_client_is_served(p) < 2
        conn.pgconn.send_query(b"SELECT 1")
        assert conn.pgconn.get_result().status == pq.ExecStatus.TUPLES_OK
        assert conn.pgconn.get_result() is None
    assert another_client_is_served(p) < 2


def test_late_copy_done_in_a_transaction(make_pooler, copy_table):
    # PgBouncer's test_copy_stdin_error_before_copy_done_in_transaction: the failed transaction
    # keeps its server, which gets the late CopyDone (PostgreSQL drops it), until ROLLBACK.
    p = make_pooler(default_pool_size=1, query_wait_timeout=5)
    with p.connect(autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.pgconn.send_query(b"COPY test_copy(i) FROM STDIN")
        copy_in_bad_row_before_copy_done(conn.pgconn)
        conn.pgconn.send_query(b"ROLLBACK")
        assert conn.pgconn.get_result().status == pq.ExecStatus.COMMAND_OK
        assert conn.pgconn.get_result() is None
        assert another_client_is_served(p) < 2


@pytest.mark.parametrize("bad_row", [False, True], ids=["ok", "bad_row"])
def test_pipelined_copy_releases_its_server(make_pooler, copy_table, bad_row):
    # PgBouncer's test_copy_stdin_*_extended: PostgreSQL ignores the Sync that follows the
    # Execute of a COPY FROM STDIN (it reads it in COPY mode), so only the Syncs after the
    # CopyDone get a ReadyForQuery; counting the first would keep the server for ever.
    if psycopg.pq.version() < 140000:
        pytest.skip("libpq without pipeline mode")
    p = make_pooler(default_pool_size=1, query_wait_timeout=5)
    with p.connect(autocommit=True) as conn:
        pgc = conn.pgconn
        pgc.enter_pipeline_mode()
        pgc.send_query_params(b"COPY test_copy(i) FROM STDIN", [])
        pgc.pipeline_sync()
        assert pgc.get_result().status == pq.ExecStatus.COPY_IN
        pgc.put_copy_data(b"\n" if bad_row else b"1\n")
        pgc.put_copy_end()
        pgc.pipeline_sync()
        expected = pq.ExecStatus.FATAL_ERROR if bad_row else pq.ExecStatus.COMMAND_OK
        assert pgc.get_result().status == expected
        assert pgc.get_result() is None
        assert pgc.get_result().status == pq.ExecStatus.PIPELINE_SYNC
        assert pgc.get_result().status == pq.ExecStatus.PIPELINE_SYNC
        pgc.exit_pipeline_mode()
        assert another_client_is_served(p) < 2


def test_extended_copy_releases_its_server(make_pooler, copy_table):
    # PQexecParams' COPY without pipeline mode: Parse … Execute, Sync, then CopyData, CopyDone and
    # libpq's second Sync, of which PostgreSQL answers the second only.
    p = make_pooler(default_pool_size=1, query_wait_timeout=5)
    with p.connect(autocommit=True) as conn:
        pgc = conn.pgconn
        pgc.send_query_params(b"COPY test_copy(i) FROM STDIN", [])
        assert pgc.get_result().status == pq.ExecStatus.COPY_IN
        pgc.put_copy_data(b"2\n")
        pgc.put_copy_end()
        assert pgc.get_result().status == pq.ExecStatus.COMMAND_OK
        assert pgc.get_result() is None
        assert another_client_is_served(p) < 2


# --- query_timeout leaves a connection running no query --------------------------------------


@pytest.mark.parametrize("pool_mode", ["transaction", "session"])
def test_query_timeout_spares_a_client_running_no_query(make_pooler, pool_mode):
    # PgBouncer's test_query_timeout_when_no_active_query (#1395): idle in a transaction longer
    # than query_timeout, with no query running, the client is not closed (PgBouncer counted from
    # the client's last request, query running or not).
    p = make_pooler(query_timeout=2, pool_mode=pool_mode)
    with p.connect() as c:  # not autocommit: the SELECT opens a transaction
        c.execute("SELECT 1")
        time.sleep(3)
        assert c.execute("SELECT 2").fetchone() == (2,)
    # A query that runs longer is still stopped.
    with p.connect(autocommit=True) as c:
        with pytest.raises(psycopg.OperationalError, match="query timeout"):
            c.execute("SELECT pg_sleep(5)")


# --- search_path and default_transaction_read_only are kept for every client -----------------


@pytest.fixture(scope="module")
def rw_table(pg):
    pg.psql("CREATE TABLE IF NOT EXISTS test_rw (i int); GRANT ALL ON test_rw TO PUBLIC",
            db="app")
    return "test_rw"


def test_search_path_and_default_transaction_read_only_per_client(make_pooler, rw_table):
    # PgBouncer's test_track_extra_parameters (test/test_misc.py) with the two parameters that
    # PgBouncer 1.26 tracks by default (#1573, #1580): two clients in transaction mode take turns
    # on one server, each SETs its own value and reads its own back.
    p = make_pooler(default_pool_size=1)
    values = {"search_path": ["s1", "s2"], "default_transaction_read_only": ["on", "off"]}
    with p.connect(autocommit=True) as c1, p.connect(autocommit=True) as c2:
        for key, (v1, v2) in values.items():
            c1.execute(f"SET {key} TO {v1}")
            c2.execute(f"SET {key} TO {v2}")
            assert c1.execute(f"SHOW {key}").fetchone() == (v1,)
            assert c2.execute(f"SHOW {key}").fetchone() == (v2,)
        # What #1573 fixes: the server the first client made read-only is not read-only for the
        # second one's writes.
        c2.execute(f"INSERT INTO public.{rw_table} VALUES (1)")
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            c1.execute(f"INSERT INTO public.{rw_table} VALUES (1)")
        c2.execute(f"INSERT INTO public.{rw_table} VALUES (2)")
