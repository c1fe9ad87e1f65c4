"""Where the features that act at a server's release and hand-out meet: session_state_action
reset cleanup, session_state_verify, server_reset_query_always, server_check_query, server_lifetime,
prepared statement rewriting, auth_query lookups on pooled servers and the client timeouts. Each
test turns several of them on at once and checks that the next client gets a clean, checked
server, that no internal reply reaches a client, and that the pool's counters come back."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

import harness



ALL_AT_RELEASE = dict(session_state_action="reset", session_state_verify="always",
                      server_reset_query_always=1, server_check_delay=0,
                      server_check_query="SELECT 1")


def poll(fn, timeout: float = 20, interval: float = 0.1):
    return harness.wait_until(fn, timeout, interval)


def pools(pooler, db: str = "app", user: str = "app", admin: str = "app",
          password: str = "app") -> dict[str, str]:
    with psycopg.connect(pooler.dsn(user=admin, password=password, db="pgsluice"),
                         autocommit=True) as admin:
        cur = admin.execute("SHOW POOLS")
        names = [d.name for d in cur.description]
        for row in cur.fetchall():
            r = dict(zip(names, (str(v) for v in row)))
            if r["database"] == db and r["user"] == user:
                return r
    return {}


def settled(pooler, servers: int | None, **kw) -> dict[str, str] | None:
    """Nothing linked, nothing waiting, `servers` idle (no check, cleanup or lookup left): the
    SHOW POOLS row, or None."""
    r = pools(pooler, **kw)
    ok = r.get("sv_active") == "0" and r.get("cl_waiting") == "0" and r.get("cl_active") == "0"
    return r if ok and (servers is None or r.get("sv_idle") == str(servers)) else None


def no_protocol_trouble(log: str) -> None:
    for needle in ("out of step", "unexpected message", "unexpected ReadyForQuery",
                   "cleaning the server failed", "server_check_query failed"):
        assert needle not in log, needle


def advisory_locks(conn) -> int:
    return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                        "AND pid = pg_backend_pid()").fetchone()[0]


def test_cleanup_verify_reset_and_check_run_in_order_before_the_next_client(make_pooler):
    """One server: the release runs the reset action's cleanup, server_reset_query_always and the
    verify query, and the next client's hand-out the check; the next client sees none of it."""
    pooler = make_pooler(default_pool_size=1, admin_users="app", args=["-v"], **ALL_AT_RELEASE)
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        pid = a.execute("SELECT pg_backend_pid()").fetchone()[0]
        a.execute("SET work_mem = '9MB'")
        a.execute("SELECT pg_advisory_lock(4711)")
        a.execute("LISTEN interplay")
        for _ in range(3):
            # Each statement is its own transaction: the server goes back and forth.
            assert b.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
            assert b.execute("SHOW work_mem").fetchone()[0] == "4MB"
            assert advisory_locks(b) == 0
            assert b.execute("SELECT count(*) FROM pg_listening_channels()").fetchone()[0] == 0
            # Only the rows the client asked for: no check or verify row leaks in.
            assert b.execute("SELECT 42 UNION ALL SELECT 43").fetchall() == [(42,), (43,)]
    assert poll(lambda: settled(pooler, 1)), pools(pooler)
    log = pooler.log()
    assert "server_check_query after" in log
    assert "internal query: DISCARD ALL" in log
    no_protocol_trouble(log)


def test_idle_transaction_timeout_with_dirty_state_cleans_before_reuse(make_pooler):
    """idle_transaction_timeout fails a client idle in a transaction that also took a session
    advisory lock (which ROLLBACK keeps): the server is rolled back, cleaned and verified, and
    reused by the next client without the lock."""
    pooler = make_pooler(default_pool_size=1, admin_users="app", idle_transaction_timeout=1,
                         **ALL_AT_RELEASE)
    a = pooler.connect()
    pid = a.execute("SELECT pg_backend_pid()").fetchone()[0]
    a.execute("SELECT pg_advisory_lock(99)")  # inside the transaction psycopg opened
    with pooler.connect(autocommit=True) as b:
        # b waits for the only server until a's timeout gives it back.
        assert b.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
        assert advisory_locks(b) == 0
        assert b.execute("SELECT pg_catalog.txid_current_if_assigned() IS NULL").fetchone()[0]
    with pytest.raises(psycopg.Error):
        a.execute("SELECT 1")
    a.close()
    assert poll(lambda: settled(pooler, 1)), pools(pooler)
    no_protocol_trouble(pooler.log())


def test_auth_query_lookup_on_a_server_that_is_checked_and_verified(pg, make_pooler):
    """The lookup server of auth_user is also the pool of auth_user's own clients: a lookup
    waits for the check, and its rows never reach the client that shares the pool."""
    pooler = make_pooler(auth_type="md5", users={"postgres": "postgres"}, auth_user="postgres",
                         default_pool_size=1, args=["-v"], auth_query_cache_ttl=0,
                         admin_users="postgres",
                         **ALL_AT_RELEASE)
    with pooler.connect(user="postgres", password="postgres", autocommit=True) as own:
        pid = own.execute("SELECT pg_backend_pid()").fetchone()[0]
        own.execute("SET work_mem = '7MB'")
        for _ in range(3):
            with pooler.connect(user="md5user", password="md5pass", autocommit=True) as c:
                assert c.execute("SELECT current_user").fetchone()[0] == "md5user"
            # The lookup ran on the same (only) server of postgres@app between own's queries.
            assert own.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
            assert own.execute("SHOW work_mem").fetchone()[0] == "4MB"
            assert own.execute("SELECT 1").fetchall() == [(1,)]
    assert pooler.log().count('auth_query for user "md5user"') >= 3
    kw = dict(db="app", user="postgres", admin="postgres", password="postgres")
    assert poll(lambda: settled(pooler, 1, **kw)), pools(pooler, **kw)
    no_protocol_trouble(pooler.log())


def test_everything_at_release_under_concurrent_load(make_pooler):
    """Several clients, two servers, prepared statements (rewritten, and re-prepared after every
    DISCARD ALL), server_lifetime retiring servers, query_timeout cancelling some queries: every
    query either succeeds or gets the timeout, and the pool settles."""
    pooler = make_pooler(default_pool_size=2, admin_users="app", max_prepared_statements=50,
                         server_lifetime=1, query_timeout=2, **ALL_AT_RELEASE)
    errors: list[str] = []
    timeouts = [0]
    stop = time.monotonic() + 8

    def worker(n: int) -> None:
        try:
            with pooler.connect(autocommit=True) as c:
                i = 0
                while time.monotonic() < stop:
                    i += 1
                    assert c.execute("SELECT %s::int + 1", (i,), prepare=True).fetchone()[0] == i + 1
                    with c.transaction():
                        c.execute("SET LOCAL work_mem = '8MB'")
                        assert c.execute("SELECT %s::text", (str(n),),
                                         prepare=True).fetchone()[0] == str(n)
                    if n == 0 and i % 5 == 0:
                        try:
                            c.execute("SELECT pg_sleep(10)")
                        except psycopg.errors.QueryCanceled:
                            timeouts[0] += 1
                            return  # query_timeout closes the client connection
                        except psycopg.OperationalError:
                            timeouts[0] += 1
                            return
                    if n == 1:
                        c.execute("SET work_mem = '5MB'")  # left behind: cleaned by reset
                        c.execute("SELECT pg_advisory_lock(%s)", (1000 + n,))
                    assert advisory_locks(c) in (0, 1)
        except Exception as e:  # noqa: BLE001 - collected for the assertion below
            errors.append(f"worker {n}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert timeouts[0] == 1
    assert poll(lambda: settled(pooler, None)), pools(pooler)
    log = pooler.log()
    assert "closing because: server_lifetime" in log
    no_protocol_trouble(log)


def read_until_ready(c: harness.RawClient) -> list[bytes]:
    kinds = []
    while True:
        kind, body = c.read_message()
        kinds.append(kind)
        if kind == b"E":
            raise harness.PgError(c._fields(body))
        if kind == b"Z":
            return kinds


def test_deallocate_answered_by_the_pooler_while_the_link_sync_runs_releases_the_server(
        make_pooler):
    """A DEALLOCATE the pooler answers itself, sent by a client whose link had to apply its
    session parameters (an internal query still owed): the server goes back to the pool when
    that query's ReadyForQuery comes, not at the client's next request."""
    pooler = make_pooler(default_pool_size=1, max_prepared_statements=10, query_wait_timeout=4,
                         admin_users="app", args=["-v"])
    with pooler.connect(autocommit=True, application_name="first") as a, \
            pooler.raw(params={"application_name": "second"}) as b:
        assert a.execute("SELECT 1").fetchone()[0] == 1  # the server now says "first"
        b.send(b"P", b"s1\0SELECT 1\0\0\0")
        b.send(b"S")
        assert read_until_ready(b) == [b"1", b"Z"]
        assert a.execute("SELECT 1").fetchone()[0] == 1  # "first" again
        # b's link applies "second" (an internal query), and the pooler answers the DEALLOCATE.
        b.send_query("DEALLOCATE s1")
        assert read_until_ready(b)[-2:] == [b"C", b"Z"]
        # b is idle now: a must get the only server (not wait for query_wait_timeout).
        assert a.execute("SELECT current_setting('application_name')").fetchone()[0] == "first"
        assert b.scalar("SELECT current_setting('application_name')") == "second"
    assert poll(lambda: settled(pooler, 1)), pools(pooler)
    no_protocol_trouble(pooler.log())
