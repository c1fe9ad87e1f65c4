"""`keep`, the default for settings in transaction mode: a client's SET, RESET, set_config(…,
false), SET ROLE follow it from server to server and never reach another client, with
PostgreSQL's semantics (ROLLBACK, savepoints, SET LOCAL, a failed SET, RESET ALL, DISCARD ALL).
Every test runs a pool of 2 with noise clients at the default worker count; holders make one
client's transactions land on both servers (hopping.py), and the noise clients check at every
transaction that they see none of it."""

from __future__ import annotations

import contextlib
import threading

import psycopg
import psycopg.errors
import pytest

import harness
from hopping import Holders, Hopper, Rotator

DEFAULTS = {"work_mem": "4MB", "statement_timeout": "0", "search_path": '"$user", public'}


@contextlib.contextmanager
def noise(pooler, clients: int = 3):
    """Clients running short transactions that must always see the defaults."""
    stop = threading.Event()
    seen: list[str] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with pooler.connect(autocommit=True) as c:
                while not stop.is_set():
                    row = c.execute("SELECT current_setting('work_mem'), "
                                    "current_setting('statement_timeout'), "
                                    "current_setting('search_path'), current_user, "
                                    "pg_sleep(0.002)").fetchone()
                    got = dict(zip(["work_mem", "statement_timeout", "search_path"], row[:3]))
                    if got != DEFAULTS or row[3] != "app":
                        seen.append(f"{got} as {row[3]}")
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors, errors
    assert not seen, f"a noise client saw another client's settings: {seen[:5]}"


def settings_over_transactions(conn, name: str, rounds: int = 20) -> tuple[set, set]:
    """The values of `name` and the backend pids over `rounds` autocommit transactions that
    alternate between the two servers."""
    values, pids = set(), set()
    hop = getattr(conn, "hopper")
    for _ in range(rounds):
        v, pid = hop.run(conn, f"SELECT current_setting('{name}'), pg_backend_pid()")
        values.add(v)
        pids.add(pid)
    assert len(pids) == 2, f"the transactions ran on {pids}, not on both servers"
    return values, pids


@contextlib.contextmanager
def client(pooler, **kwargs):
    """An autocommit client whose transactions settings_over_transactions spreads over both
    servers."""
    conn = pooler.connect(autocommit=True, **kwargs)
    conn.hopper = Hopper(pooler)
    try:
        yield conn
    finally:
        conn.hopper.close()
        conn.close()


def admin(pooler, command: str) -> str:
    rc, out, err = pooler.psql(command, db="pgsluice")
    assert rc == 0, err
    return out


@pytest.fixture
def pooler(make_pooler):
    return make_pooler(default_pool_size=2, admin_users="app")


def test_a_set_holds_across_servers_and_reaches_no_one_else(pooler):
    with noise(pooler), client(pooler) as a:
        a.execute("SET work_mem = '64MB'")
        a.execute("SET statement_timeout TO '7s'")
        a.execute("SELECT set_config('search_path', 'pg_catalog, public', false)")
        assert settings_over_transactions(a, "work_mem")[0] == {"64MB"}
        assert a.execute("SHOW statement_timeout").fetchone()[0] == "7s"
        assert a.execute("SHOW search_path").fetchone()[0] == "pg_catalog, public"
    # Recorded as kept, with who did it.
    rows = admin(pooler, "SHOW LEAKS")
    assert "set|work_mem|definite|keep" in rows, rows


def test_transaction_semantics_are_postgresqls(pooler):
    with noise(pooler), client(pooler) as a:
        a.execute("SET work_mem = '64MB'")
        # ROLLBACK undoes a SET made in the block.
        a.execute("BEGIN")
        a.execute("SET work_mem = '128MB'")
        a.execute("ROLLBACK")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"64MB"}
        # ROLLBACK TO SAVEPOINT undoes what was set after the savepoint only.
        a.execute("BEGIN")
        a.execute("SET statement_timeout = '5s'")
        a.execute("SAVEPOINT s")
        a.execute("SET work_mem = '256MB'")
        a.execute("ROLLBACK TO SAVEPOINT s")
        a.execute("COMMIT")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"64MB"}
        assert settings_over_transactions(a, "statement_timeout", 10)[0] == {"5s"}
        # SET LOCAL never sticks.
        a.execute("BEGIN")
        a.execute("SET LOCAL work_mem = '32MB'")
        assert a.execute("SHOW work_mem").fetchone()[0] == "32MB"
        a.execute("COMMIT")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"64MB"}
        # A SET that failed does not stick, and neither does one in a transaction an error ended.
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            a.execute("SET work_mem = 'lots'")
        with pytest.raises(psycopg.errors.DivisionByZero):
            a.execute("SET work_mem = '512MB'; SELECT 1/0")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"64MB"}
        # RESET x and SET x TO DEFAULT go back to the default.
        a.execute("RESET statement_timeout")
        assert settings_over_transactions(a, "statement_timeout", 10)[0] == {"0"}
        a.execute("SET work_mem TO DEFAULT")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"4MB"}


def test_reset_all_and_discard_all_clear(pooler):
    with noise(pooler), client(pooler) as a:
        a.execute("SET work_mem = '64MB'")
        a.execute("SET search_path = pg_catalog")
        a.execute("RESET ALL")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"4MB"}
        assert settings_over_transactions(a, "search_path", 10)[0] == {DEFAULTS["search_path"]}
        a.execute("SET work_mem = '64MB'")
        a.execute("DISCARD ALL")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"4MB"}


def test_reset_returns_to_the_startup_value(pooler):
    # On a direct connection the startup packet's settings are what RESET returns to.
    with noise(pooler), client(pooler, options="-c work_mem=96MB") as a:
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"96MB"}
        a.execute("SET work_mem = '8MB'")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"8MB"}
        a.execute("RESET work_mem")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"96MB"}
        a.execute("SET work_mem = '8MB'")
        a.execute("RESET ALL")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"96MB"}


def test_a_reset_startup_setting_holds_in_the_very_next_statement(make_pooler):
    # RESET leaves the server's own default on the server: the client's startup value must be
    # set again before its next statement runs there. That statement comes right after the
    # ReadyForQuery, while the pooler reads the settings back, and waits for the answer (before,
    # it ran first, on the server's default: one time in two here).
    pooler = make_pooler(default_pool_size=1)
    with pooler.connect(autocommit=True, options="-c work_mem=96MB") as a:
        for reset in ("RESET work_mem", "RESET ALL") * 25:
            a.execute("SET work_mem = '8MB'")
            a.execute(reset)
            assert a.execute("SHOW work_mem").fetchone()[0] == "96MB", reset


def test_role_is_kept_and_reset(pg, pooler):
    pg.psql("DO $$BEGIN CREATE ROLE keep_reader NOLOGIN; EXCEPTION WHEN duplicate_object "
            "THEN NULL; END$$; GRANT keep_reader TO app")
    with noise(pooler), client(pooler) as a:
        a.execute("SET ROLE keep_reader")
        assert settings_over_transactions(a, "role")[0] == {"keep_reader"}
        assert a.execute("SELECT current_user").fetchone()[0] == "keep_reader"
        # A setting made after the role is kept too, and the order of replay holds both.
        a.execute("SET work_mem = '64MB'")
        assert settings_over_transactions(a, "work_mem", 10)[0] == {"64MB"}
        assert settings_over_transactions(a, "role", 10)[0] == {"keep_reader"}
        a.execute("RESET ROLE")
        assert settings_over_transactions(a, "role", 10)[0] == {"none"}
        assert a.execute("SELECT current_user").fetchone()[0] == "app"


def test_settings_of_two_clients_never_mix(pooler):
    with noise(pooler, clients=2), pooler.connect(autocommit=True) as a, \
            pooler.connect(autocommit=True) as b:
        a.execute("SET work_mem = '11MB'")
        b.execute("SET work_mem = '22MB'")
        for _ in range(20):
            assert a.execute("SHOW work_mem").fetchone()[0] == "11MB"
            assert b.execute("SHOW work_mem").fetchone()[0] == "22MB"


def test_a_computed_set_config_name_falls_back_to_reset(pooler):
    # The name is not a constant: the pooler cannot read it back, so the server is cleaned and
    # the finding says so.
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        a.execute("SELECT set_config('work' || '_mem', '77MB', false)")
        for _ in range(10):
            assert b.execute("SHOW work_mem").fetchone()[0] == "4MB"
    rows = admin(pooler, "SHOW LEAKS")
    assert "set_config||definite|reset" in rows, rows


def test_driver_settings_at_login_cost_nothing_once_kept(pooler):
    # pgjdbc sends SET extra_float_digits = 3 after every login. Ten such clients on a pool of
    # 2 all work, none is pinned, and the servers end up with the value applied once each.
    conns = []
    try:
        for _ in range(10):
            c = pooler.connect(autocommit=True)
            c.execute("SET extra_float_digits = 3")
            conns.append(c)
        for c in conns:
            assert c.execute("SHOW extra_float_digits").fetchone()[0] == "3"
        out = admin(pooler, "SHOW POOLS")
        assert "app|app|" in out, out
    finally:
        for c in conns:
            c.close()


def test_session_mode_reset_of_a_startup_setting_goes_back_to_the_startup_value(make_pooler):
    # Session mode too (PgBouncer gets this wrong): the pool's server applied the client's
    # startup DateStyle and TimeZone with SET, so without the pooler a RESET would go to the
    # server's default. A client of its own first makes the pool's server with the defaults.
    pooler = make_pooler(pool_mode="session", default_pool_size=1)
    with pooler.connect(autocommit=True) as other:
        assert other.execute("SHOW datestyle").fetchone()[0] == "ISO, MDY"
    with pooler.connect(autocommit=True,
                        options="-c DateStyle=German -c TimeZone=Asia/Tokyo") as a:
        assert a.execute("SHOW datestyle").fetchone()[0] == "German, DMY"
        a.execute("SET datestyle = 'SQL'")
        a.execute("RESET datestyle")
        assert a.execute("SHOW datestyle").fetchone()[0] == "German, DMY"
        assert a.info.parameter_status("DateStyle") == "German, DMY"
        a.execute("SET timezone = 'UTC'")
        a.execute("SET datestyle = 'ISO, MDY'")  # the server's own default, set on purpose
        assert a.execute("SHOW datestyle").fetchone()[0] == "ISO, MDY"
        a.execute("RESET ALL")
        assert a.execute("SHOW timezone").fetchone()[0] == "Asia/Tokyo"
        assert a.execute("SHOW datestyle").fetchone()[0] == "German, DMY"
        a.execute("SET datestyle = 'Postgres'")
        a.execute("BEGIN")
        a.execute("RESET datestyle")
        a.execute("ROLLBACK")
        assert a.execute("SHOW datestyle").fetchone()[0] == "Postgres, DMY"
        a.execute("SET datestyle TO DEFAULT; SELECT 1")
        assert a.execute("SHOW datestyle").fetchone()[0] == "German, DMY"
        a.execute("DISCARD ALL")
        assert a.execute("SHOW datestyle").fetchone()[0] == "German, DMY"
        assert a.execute("SHOW timezone").fetchone()[0] == "Asia/Tokyo"
    # The next session on that server starts from the pool's defaults.
    with pooler.connect(autocommit=True) as other:
        assert other.execute("SHOW datestyle").fetchone()[0] == "ISO, MDY"


def test_explicit_warn_still_shows_the_leak(make_pooler):
    # What the workshop demonstrates: under warn the SET reaches the next client.
    pooler = make_pooler(default_pool_size=1, session_state_action="warn")
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        a.execute("SET statement_timeout = '12345ms'")
        assert b.execute("SHOW statement_timeout").fetchone()[0] == "12345ms"


def test_a_prepared_set_config_is_kept_at_every_execution(pooler):
    # asyncpg prepares every statement once and binds it again in later transactions, on
    # whichever server the client has then: the tenant it sets each time must be the one its
    # next queries see, and no other client's (before, only the Parse's transaction was kept:
    # the client went on seeing its first tenant). Each read runs while holders hold the server
    # the set ran on: on the other server, wherever the holders and the client are.
    import asyncio

    import asyncpg

    stop = threading.Event()
    seen: list[str] = []

    def bystander() -> None:
        with pooler.connect(autocommit=True) as c:
            while not stop.is_set():
                v = c.execute("SELECT current_setting('app.tenant', true), pg_sleep(0.002)") \
                    .fetchone()[0]
                if v:
                    seen.append(v)

    async def tenant_client() -> tuple[list, set]:
        conn = await asyncpg.connect(host="127.0.0.1", port=pooler.port, user="app",
                                     password="app", database="app")
        wrong, pids = [], set()
        try:
            for n in range(40):
                tenant = f"tenant{n}"
                _, set_on = await conn.fetchrow(
                    "SELECT set_config('app.tenant', $1, false), pg_backend_pid()", tenant)
                # asyncpg's connection is idle while the holders (blocking) take the server.
                with holders.holding(set_on):
                    got, pid = await conn.fetchrow(
                        "SELECT current_setting('app.tenant', true), pg_backend_pid()")
                assert pid != set_on, f"read on {pid}, the server a holder held"
                pids.update((set_on, pid))
                if got != tenant:
                    wrong.append((tenant, got))
        finally:
            await conn.close()
        return wrong, pids

    holders = Holders(pooler)
    threads = [threading.Thread(target=bystander) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        wrong, pids = asyncio.run(tenant_client())
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        holders.close()
    assert len(pids) == 2, f"the client's transactions ran on {pids} only"
    assert not wrong, f"the client saw another tenant than the one it set: {wrong[:5]}"
    assert not seen, f"a bystander saw a tenant: {seen[:5]}"


def test_node_postgres_settings_are_kept(make_pooler):
    # At the defaults and the default worker count: node-postgres clients' SETs hold on every
    # server they reach, ROLLBACK and SET LOCAL as PostgreSQL's, and the noise clients see none.
    # A pool of 4 over the default 2 workers: servers stay with the worker whose clients use
    # them, so each worker's clients share about two, and a client moves between them.
    pooler = make_pooler(default_pool_size=4, admin_users="app")
    with noise(pooler, clients=4):
        rc, out, err = harness.run_node("kept_settings.js", str(pooler.port), "3", "1000",
                                        timeout=180)
    assert rc == 0, out + err
    assert out.strip() == "ok 3 2", f"every client should have run on both servers: {out}"
    assert "set|work_mem|definite|keep" in admin(pooler, "SHOW LEAKS")


def test_pgjdbc_connections_beyond_the_pool_log_in_and_keep_settings(make_pooler, tmp_path):
    # pgjdbc SETs extra_float_digits and application_name after every login: kept, they hold
    # no server, so 4 connections work through a pool of 2 (under pin the third never finished
    # logging in), each with its own search_path and statement_timeout on both servers. Servers
    # stay with the worker whose clients use them, so that each worker's connections would keep
    # one server: the rotator holds each in turn, and every connection runs on both.
    pooler = make_pooler(default_pool_size=2, admin_users="app")
    with noise(pooler, clients=2), Rotator(pooler):
        rc, out, err = harness.run_java("KeptSettings", str(tmp_path), str(pooler.port), "4",
                                        "1000", timeout=240)
    assert rc == 0, out + err
    assert out.strip() == "ok 4 2", f"every connection should have run on both servers: {out}"
    leaks = admin(pooler, "SHOW LEAKS")
    assert "set|extra_float_digits|definite|keep" in leaks, leaks
    assert "set|search_path|definite|keep" in leaks, leaks


# Plain SETs whose value the pool knows (pooler/session_state/set_literal.h): as SHOW answers on
# a direct connection, on both servers; anything else is read back.
KNOWN_SETS = [
    ("work_mem", "'64MB'"), ("work_mem", "65536"), ("work_mem", "'65536kB'"),
    ("maintenance_work_mem", "'1GB'"), ("statement_timeout", "'7s'"),
    ("statement_timeout", "90000"), ("lock_timeout", "'1min'"), ("enable_seqscan", "OFF"),
    ("enable_seqscan", "'false'"), ("client_min_messages", "'WARNING'"),
    ("random_page_cost", "1.10"), ("synchronous_commit", "Local"), ("jit", "0"),
]


def read_backs(pg, name: str) -> int:
    with open(pg.logfile, errors="replace") as f:
        return f.read().count(f"pg_catalog.current_setting('{name}', true)")


@contextlib.contextmanager
def statements_logged(pg):
    """The app role's sessions log every statement (its servers log in after this)."""
    pg.psql("ALTER ROLE app SET log_statement = 'all'")
    try:
        yield
    finally:
        pg.psql("ALTER ROLE app RESET log_statement")


def test_plain_sets_are_read_back_once_per_pool_and_show_as_postgresql(pg, make_pooler):
    with statements_logged(pg):
        pooler = make_pooler(default_pool_size=2, admin_users="app")
        with pg.connect(user="app", db="app") as direct, \
                noise(pooler), client(pooler) as a:
            for name, value in KNOWN_SETS:
                direct.execute(f"SET {name} = {value}")
                expected = direct.execute(f"SHOW {name}").fetchone()[0]
                before = read_backs(pg, name)
                for _ in range(4):
                    a.execute(f"SET {name} = {value}")
                    got = settings_over_transactions(a, name, 4)[0]
                    assert got == {expected}, f"SET {name} = {value}"
                # Once, the first time the pool saw the statement: then it knew.
                assert read_backs(pg, name) - before <= 1, f"SET {name} = {value}"
            # Strings are read back every time (search_path quotes a literal as one name). A SET
            # that arrives while the last one is read back is read with the next: 2 or more.
            before = read_backs(pg, "search_path")
            for _ in range(4):
                a.execute("SET search_path = 'pg_catalog, public'")
            assert read_backs(pg, "search_path") - before >= 2
            assert settings_over_transactions(a, "search_path", 4)[0] == {'"pg_catalog, public"'}


def test_a_known_set_that_did_not_commit_alone_is_read_back(pg, make_pooler):
    pooler = make_pooler(default_pool_size=2, admin_users="app")
    with noise(pooler), client(pooler) as a:
        a.execute("SET work_mem = '64MB'")  # learned
        a.execute("RESET work_mem")
        # Sent behind a BEGIN, in one batch: the ROLLBACK undoes it.
        with pooler.raw() as raw:
            raw.sendall(b"".join(b"Q" + (len(q) + 5).to_bytes(4, "big") + q + b"\0" for q in
                                 (b"SET work_mem = '1MB'", b"BEGIN", b"SET work_mem = '64MB'",
                                  b"ROLLBACK")))
            statuses = [raw.read_result()[2] for _ in range(4)]
            assert statuses == ["I", "T", "T", "I"]
            assert raw.scalar("SHOW work_mem") == "1MB"
        # A known SET followed by an error, and by another statement that changes it.
        with pytest.raises(psycopg.errors.DivisionByZero):
            a.execute("SET work_mem = '64MB'; SELECT 1/0")
        assert settings_over_transactions(a, "work_mem", 6)[0] == {"4MB"}
        a.execute("SET work_mem = '64MB'")
        a.execute("SELECT set_config('work_mem', '2MB', false)")
        assert settings_over_transactions(a, "work_mem", 6)[0] == {"2MB"}
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            a.execute("SET work_mem = 'lots'")
        assert settings_over_transactions(a, "work_mem", 6)[0] == {"2MB"}


def test_driver_settings_cost_no_query_once_every_server_has_them(pg, make_pooler):
    # pgjdbc's login SETs (extra_float_digits, application_name), kept for six connections that
    # stay: once a server carries the values it gets no query of the pooler's for them (no sync
    # at a link, no read-back); at most one sync per server when it first meets them. At the
    # default worker count.
    with statements_logged(pg):
        pooler = make_pooler(default_pool_size=2, admin_users="app")
        conns = [pooler.connect(autocommit=True) for _ in range(6)]
        try:
            for c in conns:
                c.execute("SET extra_float_digits = 3")
                c.execute("SET application_name = 'PostgreSQL JDBC Driver'")
            for _ in range(5):
                for c in conns:
                    c.execute("SELECT 1")
            with open(pg.logfile, errors="replace") as f:
                before = f.read().count("statement: ")

            wrong: list[tuple] = []

            def run(c) -> None:
                for _ in range(50):
                    row = c.execute("SELECT current_setting('extra_float_digits'), "
                                    "current_setting('application_name')").fetchone()
                    if row != ("3", "PostgreSQL JDBC Driver"):
                        wrong.append(row)

            threads = [threading.Thread(target=run, args=(c,)) for c in conns]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            with open(pg.logfile, errors="replace") as f:
                after = [line.split("statement: ", 1)[1] for line in f.read().splitlines()
                         if "statement: " in line][before:]
        finally:
            for c in conns:
                c.close()
    assert not wrong, wrong[:5]
    theirs = [s for s in after if s.startswith("SELECT current_setting('extra_float_digits')")]
    assert len(theirs) == 300, len(theirs)
    ours = [s for s in after if s not in theirs]
    assert len(ours) <= 2, ours


# Every statement form `keep` is the default for (issue 18's list), and the names SHOW reads.
FORMS = [
    "SET SESSION work_mem = '12MB'", "SET TIME ZONE 'Asia/Tokyo'", "SET NAMES 'LATIN1'",
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    "SET statement_timeout = '9s'", "SET statement_timeout TO DEFAULT",
    "SELECT set_config('app.tenant', 't1', false)", "SET ROLE keep_reader",
    "SET SESSION AUTHORIZATION app", "SET lock_timeout = '3s'", "RESET lock_timeout",
    "DO $$BEGIN SET work_mem = '14MB'; PERFORM set_config('lock_timeout', '4s', false); END$$",
    "RESET ROLE", "RESET SESSION AUTHORIZATION", "SET ROLE keep_reader", "RESET ALL",
    "SET work_mem = '13MB'", "DISCARD ALL",
]
FORM_NAMES = ["work_mem", "TimeZone", "client_encoding", "default_transaction_isolation",
              "statement_timeout", "lock_timeout", "app.tenant", "role",
              "session_authorization"]
SHOW_FORMS = "SELECT " + ", ".join(f"current_setting('{n}', true)" for n in FORM_NAMES) + \
    ", current_user, session_user"


def test_every_setting_form_answers_as_on_a_direct_connection(pg, make_pooler):
    # At the defaults and the default worker count, a pool of 2 with bystanders: after each
    # form, what the client's next transactions read is what a direct connection reads after
    # the same statements, and the bystanders read their own defaults throughout.
    # SET SESSION AUTHORIZATION needs a superuser session user: scramuser, for this test. Not
    # prepared: psycopg's own statements do not survive the DISCARD ALL on the direct side.
    pg.psql("DO $$BEGIN CREATE ROLE keep_reader NOLOGIN; EXCEPTION WHEN duplicate_object "
            "THEN NULL; END$$; GRANT keep_reader TO app, scramuser; "
            "ALTER ROLE scramuser SUPERUSER")
    pooler = make_pooler(default_pool_size=2, admin_users="app")
    try:
        with pg.connect(user="scramuser", db="app") as direct:
            direct.autocommit = True
            defaults = direct.execute(SHOW_FORMS, prepare=False).fetchone()
        stop = threading.Event()
        seen: list[tuple] = []

        def bystander() -> None:
            with pooler.connect(user="scramuser", password="scrampass", autocommit=True) as c:
                while not stop.is_set():
                    row = c.execute(SHOW_FORMS, prepare=False).fetchone()
                    # A custom setting, once defined in a server session, reads '' after its
                    # reset there (PostgreSQL keeps the placeholder; nothing but a new session
                    # removes it): '' is the default too, never another client's value.
                    tenant = FORM_NAMES.index("app.tenant")
                    if row[tenant] == "":
                        row = row[:tenant] + (None,) + row[tenant + 1:]
                    if row != defaults:
                        seen.append(row)

        threads = [threading.Thread(target=bystander) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            with pg.connect(user="scramuser", db="app") as direct, \
                    pooler.connect(user="scramuser", password="scrampass",
                                   autocommit=True) as a:
                direct.autocommit = True
                for sql in FORMS:
                    direct.execute(sql)
                    a.execute(sql)
                    want = direct.execute(SHOW_FORMS, prepare=False).fetchone()
                    for _ in range(5):
                        assert a.execute(SHOW_FORMS, prepare=False).fetchone() == want, sql
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
        assert not seen, f"a bystander saw another client's settings: {seen[:3]}"
    finally:
        pg.psql("ALTER ROLE scramuser NOSUPERUSER")


def test_reset_of_a_startup_parameter_goes_back_to_the_startup_value(pooler):
    # On a direct connection a RESET goes to the value of the startup packet (`options`), not to
    # the server's default: RESET datestyle, RESET timezone, RESET ALL, on whichever server.
    # A RESET that is rolled back leaves the value the client had set.
    with noise(pooler), client(pooler, options="-c DateStyle=German -c TimeZone=Asia/Tokyo") as a:
        assert a.execute("SHOW datestyle").fetchone()[0] == "German, DMY"
        a.execute("SET datestyle = 'SQL'")
        a.execute("RESET datestyle")
        assert settings_over_transactions(a, "DateStyle", 6)[0] == {"German, DMY"}
        # The client was told the value too (libpq keeps the last ParameterStatus).
        assert a.info.parameter_status("DateStyle") == "German, DMY"
        a.execute("SET timezone = 'UTC'")
        a.execute("SET datestyle = 'ISO, MDY'")  # the server's own default
        a.execute("RESET ALL")
        assert settings_over_transactions(a, "TimeZone", 6)[0] == {"Asia/Tokyo"}
        assert settings_over_transactions(a, "DateStyle", 6)[0] == {"German, DMY"}
        a.execute("SET datestyle = 'Postgres'")
        a.execute("BEGIN")
        a.execute("RESET datestyle")
        a.execute("ROLLBACK")
        assert settings_over_transactions(a, "DateStyle", 6)[0] == {"Postgres, DMY"}
