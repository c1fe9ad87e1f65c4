"""PgBouncer's log lines, for the operators and tools that grep them (issue 19): a client's or
server's close as `closing because: <reason> (age=<s>s)` with PgBouncer's reason where there is
one. pgsluice's prefix (`C-<id> user@db address`, `S-<id> user@db host:port`) stays its own."""

from __future__ import annotations

import re

import psycopg
import pytest

import harness

AGE = r" \(age=\d+s\)"


def client_line(user: str, db: str, reason: str) -> str:
    return rf"C-\d+ {user}@{db} 127\.0\.0\.1:\d+ closing because: {reason}{AGE}"


def test_client_close_request_and_unexpected_eof(make_pooler):
    pooler = make_pooler()
    with pooler.connect(autocommit=True) as c:
        c.execute("SELECT 1")
    assert pooler.wait_for_log(client_line("app", "app", "client close request")), pooler.log()
    raw = pooler.raw()
    raw.query("SELECT 1")
    raw.sock.close()  # no Terminate
    assert pooler.wait_for_log(client_line("app", "app", "client unexpected eof")), pooler.log()


def test_server_close_has_reason_and_age(make_pooler):
    pooler = make_pooler(server_lifetime=1, default_pool_size=1)
    with pooler.connect(autocommit=True) as c:
        c.execute("SELECT 1")
    assert pooler.wait_for_log(
        r"S-\d+ app@app 127\.0\.0\.1:\d+ closing because: server_lifetime" + AGE, 10), \
        pooler.log()


@pytest.mark.parametrize("auth_type", ["md5", "scram-sha-256", "plain"])
def test_wrong_password_close_line(make_pooler, auth_type):
    pooler = make_pooler(auth_type=auth_type)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        pooler.connect(password="wrong")
    assert pooler.wait_for_log(
        client_line("app", "app", 'password authentication failed for user "app"')), pooler.log()


def test_refused_before_authentication_is_logged(make_pooler):
    # Refused at the StartupMessage (here: auth_type = trust and a user nobody knows): the
    # close is logged, as PgBouncer does; a connection that sent nothing is not.
    pooler = make_pooler(auth_type="trust")
    with pytest.raises(psycopg.OperationalError, match='"trust" authentication failed'):
        pooler.connect(user="nosuchuser", password=None)
    assert pooler.wait_for_log(
        client_line("nosuchuser", "app", '"trust" authentication failed')), pooler.log()
    before = len(re.findall("closing because", pooler.log()))
    probe = harness.socket.create_connection((harness.HOST, pooler.port))
    probe.close()
    with pooler.connect(autocommit=True) as c:  # after the probe: its close would be logged
        c.execute("SELECT 1")
    assert pooler.wait_for_log(client_line("app", "app", "client close request"))
    assert len(re.findall("closing because", pooler.log())) == before + 1, pooler.log()


def test_server_login_failure_lines(make_pooler):
    # PostgreSQL refuses the login: PgBouncer's "server login failed: FATAL <message>", and the
    # server and its waiting client close with PostgreSQL's words.
    pooler = make_pooler(databases={
        "app": "host=127.0.0.1 port={pg_port} dbname=app",
        "nopg": "host=127.0.0.1 port={pg_port} dbname=no_such_pg_db"})
    missing = 'database "no_such_pg_db" does not exist'
    with pytest.raises(psycopg.OperationalError, match=missing):
        pooler.connect(db="nopg")
    log = pooler.wait_for_log(client_line("app", "nopg", missing)) and pooler.log()
    assert log, pooler.log()
    assert re.search(rf"S-\d+ app@nopg 127\.0\.0\.1:\d+ server login failed: FATAL {missing}",
                     log), log
    assert re.search(rf"S-\d+ app@nopg 127\.0\.0\.1:\d+ closing because: {missing}{AGE}", log), log


def server_line(db: str, host: str, reason: str) -> str:
    return rf"S-\d+ app@{db} {host}:\d+ closing because: {reason}{AGE}"


def test_connection_not_made_close_lines(make_pooler):
    # A connection to the server that could not be made closes with PgBouncer's words, which
    # its log readers match ("server DNS lookup failed", "connect failed", "connect timeout");
    # the "server login failed" line before it keeps the details. The clients wait for the
    # retry (server_login_retry) until query_wait_timeout ends their wait.
    silent = harness.socket.socket()  # accepts (the kernel does) and never answers
    silent.bind((harness.HOST, 0))
    silent.listen(8)
    pooler = make_pooler(
        databases={"nodns": "host=unresolvable-hostname port={pg_port} dbname=app",
                   "refused": f"host=127.0.0.1 port={harness.free_port()} dbname=app",
                   "silent": f"host=127.0.0.1 port={silent.getsockname()[1]} dbname=app"},
        server_connect_timeout=1, server_login_retry=10, query_wait_timeout=2)
    try:
        for db in ("nodns", "refused", "silent"):
            with pytest.raises(psycopg.OperationalError, match="query_wait_timeout"):
                pooler.connect(db=db)
        # A resolver that answers slowly may answer after the client gave up: waited for.
        assert pooler.wait_for_log("server DNS lookup failed", 30), pooler.log()
        log = pooler.log()
        assert re.search(r"S-\d+ app@nodns unresolvable-hostname:\d+ server login failed: "
                         r'could not resolve host "unresolvable-hostname"', log), log
        assert re.search(server_line("nodns", "unresolvable-hostname",
                                     "server DNS lookup failed"), log), log
        assert re.search(r"S-\d+ app@refused 127\.0\.0\.1:\d+ server login failed: could not "
                         r"connect to server 127\.0\.0\.1:\d+: connection refused", log), log
        assert re.search(server_line("refused", r"127\.0\.0\.1", "connect failed"), log), log
        assert re.search(r"S-\d+ app@silent 127\.0\.0\.1:\d+ server login failed: "
                         r"server_connect_timeout", log), log
        assert re.search(server_line("silent", r"127\.0\.0\.1", "connect timeout"), log), log
    finally:
        silent.close()


@pytest.mark.parametrize("auth_type", ["trust", "md5"])
def test_no_such_database_close_line(make_pooler, auth_type):
    pooler = make_pooler(auth_type=auth_type)
    with pytest.raises(psycopg.OperationalError, match="no such database: nosuchdb"):
        pooler.connect(db="nosuchdb")
    assert pooler.wait_for_log(client_line("app", "nosuchdb", "no such database: nosuchdb")), \
        pooler.log()


def test_new_connection_to_server_line(make_pooler):
    # Logged when the TCP connection is up (before the login), with the pooler's own end.
    pooler = make_pooler()
    with pooler.connect(autocommit=True) as c:
        c.execute("SELECT 1")
    assert pooler.wait_for_log(r"S-\d+ app@app 127\.0\.0\.1:\d+ new connection to server "
                               r"\(from 127\.0\.0\.1:\d+\)$"), pooler.log()


def test_registered_new_auto_database_once(make_pooler):
    pooler = make_pooler(databases={"*": "host=127.0.0.1 port={pg_port}"})
    for _ in range(2):
        with pooler.connect(autocommit=True) as c:
            c.execute("SELECT 1")
    assert pooler.wait_for_log(r"C-\d+ app@app \S+ registered new auto-database: app$")
    assert pooler.log().count("registered new auto-database") == 1, pooler.log()
    # Not for a client that does not get in: unauthenticated names register nothing.
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        pooler.connect(db="other", password="wrong")
    assert "auto-database: other" not in pooler.log()


def test_shutdown_close_line(make_pooler):
    # SIGINT (SHUTDOWN WAIT_FOR_SERVERS): an idle client is closed with PgBouncer's reason.
    pooler = make_pooler()
    conn = pooler.connect(autocommit=True)
    conn.execute("SELECT 1")
    assert pooler.stop(sig=harness.signal.SIGINT) == 0  # no client left: it exits
    conn.close()
    assert re.search(client_line("app", "app", "server shutting down"), pooler.log()), \
        pooler.log()


def test_prepared_statement_already_prepared_line(make_pooler):
    pooler = make_pooler(max_prepared_statements=10)
    with pooler.connect() as conn:
        assert conn.pgconn.prepare(b"test", b"SELECT 1").status == \
            psycopg.pq.ExecStatus.COMMAND_OK
        assert conn.pgconn.prepare(b"test", b"SELECT 1").status == \
            psycopg.pq.ExecStatus.FATAL_ERROR
    assert pooler.wait_for_log(r"C-\d+ app@app \S+ prepared statement 'test' was already "
                               r"prepared"), pooler.log()


def test_parameter_sync_lines_at_debug_level(make_pooler):
    # PgBouncer's debug lines for the link's parameter sync (its suite's
    # test_equivalent_startup_param): the SETs of the client's parameters on the server, then
    # the client taking the server's spelling of a value PostgreSQL did not report back.
    # DateStyle=ISO is 'ISO, MDY' on the server: set once, on the first link only.
    apply = r"S-\d+ app@app 127\.0\.0\.1:\d+ varcache_apply: SET DateStyle='ISO';"
    canonical = (r"C-\d+ app@app 127\.0\.0\.1:\d+ varcache_set_canonical: setting DateStyle "
                 r"to its canonical version ISO -> ISO, MDY")
    pooler = make_pooler(pool_mode="transaction", default_pool_size=1, verbose=2)
    with pooler.connect(autocommit=True, options="-c DateStyle=ISO") as conn:
        for _ in range(3):
            conn.execute("SELECT 1")
    log = pooler.log()
    assert len(re.findall(apply, log)) == 1, log
    assert len(re.findall(canonical, log)) == 1, log
    # Not at the default verbosity.
    quiet = make_pooler(pool_mode="transaction", default_pool_size=1)
    with quiet.connect(autocommit=True, options="-c DateStyle=ISO") as conn:
        conn.execute("SELECT 1")
    assert "varcache" not in quiet.log(), quiet.log()
