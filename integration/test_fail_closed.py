"""Fail closed (issue 42, part 1): a client's statement never runs on a server that carries
another client's role or settings. The link-time sync replays a client's state in an order that
gives it the privileges it had (settings as the login role, then the session authorization, the
role last); when the sync still fails, the statement is not run at all: the client gets an
ErrorResponse naming what could not be applied, keeps its connection, and the server is closed.

The clients log in as the superuser `postgres` (trust), as the regression suite does."""

from __future__ import annotations

import psycopg
import psycopg.errors
import pytest

import harness

SHOW = "select current_user, session_user, current_setting('lo_compat_privileges')"


@pytest.fixture(scope="module")
def roles(pg):
    # The cluster asks for SCRAM over TCP: the pooler logs in to it with this password.
    pg.psql("DO $$BEGIN CREATE ROLE fc_u1; CREATE ROLE fc_u4; EXCEPTION WHEN duplicate_object "
            "THEN NULL; END$$; ALTER ROLE postgres PASSWORD 'fc_pass'")
    return pg


def trust_pooler(make_pooler, pool_size: int):
    return make_pooler(auth_type="trust", default_pool_size=pool_size,
                       users={"postgres": "fc_pass", "app": "app"},
                       databases={"postgres": "host=127.0.0.1 port={pg_port} dbname=postgres"})


def psql_lines(pooler, *statements: str) -> tuple[int, str, str]:
    args = []
    for s in statements:
        args += ["-c", s]
    rc, out, err = pooler.psql(None, user="postgres", password=None, db="postgres",
                               args=["-q"] + args)
    return rc, out.strip(), err


@pytest.mark.parametrize("pool_size", [1, 2, 10])
def test_the_next_client_gets_its_own_role_and_settings(roles, make_pooler, pool_size):
    # The reproduction: X, a superuser, sets a superuser-only setting, then becomes
    # fc_u4, and leaves; Z becomes fc_u1 on the server X left. Directly: fc_u1|fc_u1|off.
    pooler = trust_pooler(make_pooler, pool_size)
    rc, out, err = psql_lines(pooler, "SET lo_compat_privileges = true",
                              "SET SESSION AUTHORIZATION fc_u4", SHOW)
    assert rc == 0, err
    assert out == "fc_u4|fc_u4|on"
    rc, out, err = psql_lines(pooler, "SET SESSION AUTHORIZATION fc_u1", SHOW)
    assert rc == 0, err
    assert out == "fc_u1|fc_u1|off", (out, err)
    assert "WARNING" not in err, err
    # And back: X's state comes back whole on whichever server it gets.
    with psycopg.connect(pooler.dsn("postgres", None, "postgres"), autocommit=True) as x, \
            psycopg.connect(pooler.dsn("postgres", None, "postgres"), autocommit=True) as z:
        x.execute("SET lo_compat_privileges = true")
        x.execute("SET SESSION AUTHORIZATION fc_u4")
        z.execute("SET SESSION AUTHORIZATION fc_u1")
        for _ in range(10):
            assert x.execute(SHOW).fetchone() == ("fc_u4", "fc_u4", "on")
            assert z.execute(SHOW).fetchone() == ("fc_u1", "fc_u1", "off")


def test_each_ordering_of_role_and_settings_is_replayed(roles, make_pooler):
    # A setting made before SET SESSION AUTHORIZATION, one made after it, one made under SET
    # ROLE: a superuser-only setting needs the login role, the others come out the same.
    pooler = trust_pooler(make_pooler, 1)
    cases = [
        (["SET lo_compat_privileges = on", "SET SESSION AUTHORIZATION fc_u1",
          "SET work_mem = '9MB'"], ("fc_u1", "fc_u1", "on", "9MB")),
        (["SET SESSION AUTHORIZATION fc_u4", "SET work_mem = '7MB'",
          "RESET SESSION AUTHORIZATION", "SET lo_compat_privileges = on"],
         ("postgres", "postgres", "on", "7MB")),
        (["SET lo_compat_privileges = on", "SET ROLE fc_u4", "SET work_mem = '5MB'"],
         ("fc_u4", "postgres", "on", "5MB")),
        (["SET SESSION AUTHORIZATION fc_u1", "SET ROLE fc_u1", "SET work_mem = '3MB'"],
         ("fc_u1", "fc_u1", "off", "3MB")),
    ]
    show = SHOW + ", current_setting('work_mem')"
    conns = [psycopg.connect(pooler.dsn("postgres", None, "postgres"), autocommit=True)
             for _ in cases]
    try:
        for conn, (statements, _) in zip(conns, cases):
            for s in statements:
                conn.execute(s)
        # One server for all: every statement of each client is a link with a sync.
        for _ in range(3):
            for conn, (statements, want) in zip(conns, cases):
                assert conn.execute(show).fetchone() == want, statements
    finally:
        for c in conns:
            c.close()
    assert "could not apply" not in pooler.log()


def test_a_sync_that_fails_runs_nothing_and_the_client_carries_on(roles, pg, make_pooler):
    # The role a client became is dropped while its server serves someone else: no server can
    # take its session authorization any more. Its statements must not run (not as the login
    # role, not in another client's state): each gets an ErrorResponse, the connection stays.
    pg.psql("DROP ROLE IF EXISTS fc_gone; CREATE ROLE fc_gone; "
            "DROP TABLE IF EXISTS fc_ran; CREATE TABLE fc_ran (who text); "
            "GRANT INSERT ON fc_ran TO PUBLIC")
    pooler = trust_pooler(make_pooler, 1)
    dsn = pooler.dsn("postgres", None, "postgres")
    with psycopg.connect(dsn, autocommit=True) as a, psycopg.connect(dsn, autocommit=True) as b:
        a.execute("SET SESSION AUTHORIZATION fc_gone")
        b.execute("SET lo_compat_privileges = on")  # the one server now carries b's state
        assert b.execute(SHOW).fetchone() == ("postgres", "postgres", "on")
        pg.psql("DROP ROLE fc_gone")
        for _ in range(3):
            with pytest.raises(psycopg.Error) as info:
                a.execute("INSERT INTO fc_ran SELECT current_user")
            assert "could not apply" in str(info.value), info.value
            assert info.value.diag.message_detail and "session_authorization" in \
                info.value.diag.message_detail, info.value.diag.message_detail
            assert not a.closed
        # The extended protocol is refused the same way, up to its Sync.
        with pytest.raises(psycopg.Error) as info:
            a.execute("INSERT INTO fc_ran SELECT %s::text", ("x",), prepare=False)
        assert "could not apply" in str(info.value)
        with pytest.raises(psycopg.Error):
            a.execute("INSERT INTO fc_ran SELECT %s::text", ("y",), prepare=True)
        # The other client is unharmed, in its own state.
        assert b.execute(SHOW).fetchone() == ("postgres", "postgres", "on")
    # The statements ran nowhere.
    assert pg.psql("SELECT count(*) FROM fc_ran") == "0"
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute(SHOW).fetchone() == ("postgres", "postgres", "off")
    assert "could not apply" in pooler.log()


@pytest.mark.parametrize("options, message, sqlstate", [
    ("-c work_mem=abc", 'invalid value for parameter "work_mem": "abc"', "22023"),
    ("-c datestyle=bogus", 'invalid value for parameter "DateStyle": "bogus"', "22023"),
    ("-c no_such_setting=1", 'unrecognized configuration parameter "no_such_setting"', "42704"),
])
def test_a_startup_setting_no_server_takes_ends_the_session_as_postgresql_does(
        pg, make_pooler, options, message, sqlstate):
    # PostgreSQL refuses the login with FATAL; pgsluice logs the client in without a server, so
    # the first statement gets PostgreSQL's FATAL and the connection closes, instead of an error
    # per statement for ever. The statement runs nowhere; other clients are not disturbed.
    with pytest.raises(psycopg.OperationalError) as direct:
        psycopg.connect(f"host={pg.host} port={pg.port} dbname=app user=app password=app",
                        options=options)
    assert message in str(direct.value), direct.value
    pooler = make_pooler(default_pool_size=1)
    with pooler.connect(autocommit=True) as other:
        with psycopg.connect(pooler.dsn("app"), autocommit=True, options=options) as c:
            with pytest.raises(psycopg.OperationalError) as info:
                c.execute("SELECT 1")
            assert message in str(info.value), info.value
            assert c.closed or c.broken
        # On the wire: PostgreSQL's ErrorResponse as FATAL, then the end of the connection.
        with pooler.raw(params={"options": options}) as raw:
            raw.send_query("SELECT 1")
            kind, body = raw.read_message()
            assert kind == b"E", (kind, body)
            fields = raw._fields(body)
            assert (fields.get("V"), fields.get("C")) == ("FATAL", sqlstate), fields
            assert fields.get("M") == message, fields
            with pytest.raises(ConnectionError):
                raw.read_message()
        assert other.execute("SHOW work_mem").fetchone()[0] == "4MB"
    assert "could not apply the startup parameters" in pooler.log()


def test_currval_is_never_another_clients_value(pg, make_pooler):
    # currval/lastval read the session's last nextval: on a pooled server that may be another
    # client's. When other clients used the server since its sequence values were last
    # discarded, the client gets PostgreSQL's "not yet defined in this session" (55000) instead;
    # its own value, on a server only it used since, as directly.
    pg.psql("DROP SEQUENCE IF EXISTS fc_seq; CREATE SEQUENCE fc_seq; "
            "GRANT ALL ON fc_seq TO app", db="app")
    pooler = make_pooler(default_pool_size=1)
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        assert b.execute("SELECT nextval('fc_seq')").fetchone()[0] == 1
        for sql in ("SELECT currval('fc_seq')", "SELECT lastval()"):
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
                a.execute(sql)
        assert a.execute("SELECT nextval('fc_seq')").fetchone()[0] == 2
        assert a.execute("SELECT currval('fc_seq')").fetchone()[0] == 2
        assert a.execute("SELECT lastval()").fetchone()[0] == 2
        # b's own value is gone with the discard, never replaced by a's.
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            b.execute("SELECT currval('fc_seq')")
        # In the transaction that advanced it, as directly.
        with b.transaction():
            assert b.execute("SELECT nextval('fc_seq'), currval('fc_seq')").fetchone() == (3, 3)


def test_a_pinned_clients_own_currval_is_kept(pg, make_pooler):
    # Pinned (a temporary sequence), the client's next transactions run where its nextval ran:
    # its value, as directly, though other clients used the server before (regression suite's
    # `limit`).
    pooler = make_pooler(default_pool_size=2)
    with pooler.connect(autocommit=True) as b:
        b.execute("SELECT 1")
    with pooler.connect(autocommit=True) as a:
        a.execute("CREATE TEMP SEQUENCE fc_tseq")
        assert a.execute("SELECT nextval('fc_tseq')").fetchone()[0] == 1
        assert a.execute("SELECT currval('fc_tseq')").fetchone()[0] == 1
        assert a.execute("SELECT lastval()").fetchone()[0] == 1
