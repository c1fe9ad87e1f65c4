"""Replication connections through pgsluice (#19), as PgBouncer 1.23+ passes them: a client with
replication=true (physical) or replication=database (logical) gets a server connection of its
own, opened with the same parameter, linked to it for its whole life (session semantics in a
transaction pool), counted against pool_size like any server, and closed with it; the bytes are
relayed both ways unparsed (CopyBoth). Against a real primary (wal_level = logical, Debian's
PostgreSQL 15 whatever PG_BIN says: npm's 17 and 18 ship no pg_basebackup):

- pg_basebackup through pgsluice makes a backup that starts as a standby, and that standby
  streams from the primary through pgsluice (its primary_conninfo is pgsluice's address): a row
  inserted on the primary reaches it; when it stops, its walsender is closed, not pooled;
- pg_recvlogical (test_decoding) through pgsluice receives a change another client committed
  through the pool, and ends cleanly on SIGINT;
- the accounting, side by side with PgBouncer 1.25.2 when its build is beside the repository
  (harness.PGBOUNCER_ANCHOR; Debian's 1.18 predates replication connections): with
  default_pool_size = 1 a replication client closes the idle server to take the slot (SHOW
  CLIENTS and SHOW SERVERS say `logical`, `active`), and a normal client then waits until
  query_wait_timeout; the slot comes back when the stream ends;
- RECONNECT closes a replication connection at once (it may never end by itself), as in PgBouncer;
- auth_hba_file's `replication` keyword matches physical connections only, `all` never does;
- PostgreSQL's own refusal of a replication login reaches the client, and does not make the
  pool's normal clients fail (no server_login_retry);
- an invalid `replication` value is refused as PostgreSQL refuses it (22023), false values give a
  normal session;
- a client that stalls in the middle of a base backup does not make pgsluice buffer it: the
  walsender is held back instead (the channels' high-water marks), pgsluice's memory stays flat;
- with a small tcp_socket_buffer (PgBouncer's suite sets 4096) a base backup still goes at the
  speed of the loopback, not at one segment per delayed ACK.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

import harness

PG15 = "/usr/lib/postgresql/15/bin"
BASEBACKUP = os.path.join(PG15, "pg_basebackup")
RECVLOGICAL = os.path.join(PG15, "pg_recvlogical")
HOST = harness.HOST

pytestmark = pytest.mark.skipif(
    not (os.path.exists(BASEBACKUP) and os.path.exists(RECVLOGICAL)),
    reason="needs Debian's PostgreSQL 15 pg_basebackup and pg_recvlogical")

USERS = {"repl": "repl", "app": "app"}
DATABASES = {
    "app": "host=127.0.0.1 port={pg_port} dbname=app",
    # What pg_basebackup and a standby ask for (dbname=replication): a physical walsender is
    # attached to no database, and the entry only names the server.
    "replication": "host=127.0.0.1 port={pg_port} dbname=postgres",
    # Every client of `shared` is one pool (server user repl), replication or not.
    "shared": "host=127.0.0.1 port={pg_port} dbname=app user=repl",
}


@pytest.fixture(scope="module")
def pg():
    cluster = harness.PostgresCluster(max_connections=60, logical=True, bin_dir=PG15)
    try:
        cluster.psql("CREATE ROLE repl LOGIN REPLICATION PASSWORD 'repl'")
        with open(os.path.join(cluster.data, "pg_hba.conf"), "a") as f:
            f.write(f"host replication repl {HOST}/32 scram-sha-256\n")
        cluster.psql("SELECT pg_reload_conf()")
        cluster.psql("CREATE TABLE events (id serial PRIMARY KEY, note text)", db="app")
        cluster.psql("GRANT ALL ON events, events_id_seq TO app, repl", db="app")
        yield cluster
    finally:
        cluster.stop()


def pooler(make_pooler, **kw):
    kw.setdefault("databases", DATABASES)
    kw.setdefault("users", USERS)
    kw.setdefault("admin_users", "app")
    return make_pooler(**kw)


def show(p, what: str) -> list[dict[str, str]]:
    rc, out, err = p.psql(f"SHOW {what}", db="pgbouncer",
                          args=["-P", "tuples_only=off", "-P", "footer=off"])
    assert rc == 0, err
    header, *lines = out.splitlines()
    cols = header.split("|")
    return [dict(zip(cols, line.split("|"))) for line in lines]


def conninfo(p, user: str, password: str, db: str, **extra) -> str:
    parts = {"host": HOST, "port": p.port, "dbname": db, "user": user, "password": password,
             "connect_timeout": 10, **extra}
    return " ".join(f"{k}={v}" for k, v in parts.items())


def psql_conninfo(dsn: str, sql: str, timeout: float = 60):
    return harness.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", sql],
                       timeout=timeout)


def walsenders(pg) -> int:
    return int(pg.psql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'"))


def test_pg_basebackup_through_pgsluice_makes_a_standby_that_streams_through_it(pg, make_pooler):
    p = pooler(make_pooler)
    standby = pg.standby("via_pgsluice", f"host={HOST} port={p.port} user=repl password=repl")
    try:
        assert standby.psql("SELECT pg_is_in_recovery()") == "t"
        pg.psql("INSERT INTO events (note) VALUES ('streamed through pgsluice')", db="app")
        assert harness.wait_until(lambda: standby.psql(
            "SELECT count(*) FROM events WHERE note = 'streamed through pgsluice'",
            db="app") == "1", 30)
        assert pg.psql("SELECT application_name, state FROM pg_stat_replication") == \
            "via_pgsluice|streaming"
        servers = [s for s in show(p, "SERVERS") if s["replication"] != "none"]
        assert [(s["replication"], s["state"], s["database"]) for s in servers] == \
            [("physical", "active", "replication")], servers
        clients = [c for c in show(p, "CLIENTS") if c["replication"] != "none"]
        assert [(c["replication"], c["state"], c["user"]) for c in clients] == \
            [("physical", "active", "repl")], clients
        assert clients[0]["link"] == servers[0]["ptr"]
    finally:
        standby.stop()
    # The walsender went with its client: closed, never returned to the pool.
    assert harness.wait_until(lambda: walsenders(pg) == 0, 15)
    assert [s for s in show(p, "SERVERS") if s["replication"] != "none"] == []


def start_recvlogical(dsn: str, slot: str, out: str) -> subprocess.Popen:
    return subprocess.Popen([RECVLOGICAL, "-d", dsn, "--slot", slot, "--start", "-f", out,
                             "--fsync-interval", "1", "--status-interval", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=harness.clean_env())


def stop_recvlogical(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err.decode(errors="replace")


def read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def slot_active(pg, slot: str) -> bool:
    return pg.psql(f"SELECT active FROM pg_replication_slots WHERE slot_name = '{slot}'") == "t"


def test_pg_recvlogical_through_pgsluice_receives_a_change_committed_through_the_pool(
        pg, make_pooler, tmp_path):
    p = pooler(make_pooler)
    dsn = conninfo(p, "repl", "repl", "app")
    rc, _, err = harness.run([RECVLOGICAL, "-d", dsn, "--slot", "decoding", "--create-slot",
                              "--plugin", "test_decoding"], timeout=60)
    assert rc == 0, err
    out = str(tmp_path / "changes.txt")
    proc = start_recvlogical(dsn, "decoding", out)
    try:
        assert harness.wait_until(lambda: slot_active(pg, "decoding"), 15)
        rc, _, err = p.psql("INSERT INTO events (note) VALUES ('decoded through pgsluice')")
        assert rc == 0, err
        assert harness.wait_until(lambda: "decoded through pgsluice" in read(out), 30)
        assert "table public.events: INSERT:" in read(out), read(out)
        logical = [c for c in show(p, "CLIENTS") if c["replication"] == "logical"]
        assert [(c["state"], c["database"]) for c in logical] == [("active", "app")], logical
    finally:
        rc, err = stop_recvlogical(proc)
    assert rc == 0, err
    assert harness.wait_until(lambda: not slot_active(pg, "decoding"), 15)
    rc, _, err = harness.run([RECVLOGICAL, "-d", dsn, "--slot", "decoding", "--drop-slot"],
                             timeout=60)
    assert rc == 0, err


def anchor_or_skip(binary: str) -> str | None:
    """None for pgsluice; for the PgBouncer half, its 1.25.2 build, or a skip that says what the
    test compared against without it."""
    if binary == "pgsluice":
        return None
    anchor = harness.pgbouncer_anchor()
    if anchor is None:
        pytest.skip(f"no PgBouncer 1.25.2 at {harness.PGBOUNCER_ANCHOR}: pgsluice was checked "
                    "alone against 1.25.2's behaviour as this test writes it down (Debian's 1.18 "
                    "predates replication connections, 1.23)")
    return anchor


def repl_backends(pg) -> int:
    return int(pg.psql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'repl' "
                       "AND backend_type = 'client backend'"))


@pytest.mark.parametrize("binary", ["pgsluice", "pgbouncer-1.25.2"])
def test_a_replication_connection_takes_a_slot_of_the_pool_as_in_pgbouncer(
        pg, make_pooler, tmp_path, binary):
    anchor = anchor_or_skip(binary)
    slot = "acct_" + binary.split("-")[0]
    # A logical slot belongs to a database: the one the stream connects to.
    pg.psql(f"SELECT pg_create_logical_replication_slot('{slot}', 'test_decoding')", db="app")
    p = pooler(make_pooler, binary=anchor, default_pool_size=1, query_wait_timeout=3)
    # A normal client of the shared pool leaves its server idle there: the pool is full.
    rc, out, err = p.psql("SELECT 1", db="shared")
    assert (rc, out.strip()) == (0, "1"), err
    assert repl_backends(pg) == 1
    proc = start_recvlogical(conninfo(p, "repl", "repl", "shared"), slot,
                             str(tmp_path / "out.txt"))
    try:
        # The replication client took the slot: the idle server was closed for it.
        assert harness.wait_until(lambda: slot_active(pg, slot), 15)
        assert harness.wait_until(lambda: repl_backends(pg) == 0, 10)
        # The replication columns, as the anchor fills them.
        clients = [(c["replication"], c["state"]) for c in show(p, "CLIENTS")
                   if c["replication"] != "none"]
        servers = [(s["replication"], s["state"]) for s in show(p, "SERVERS")]
        assert clients == [("logical", "active")], clients
        assert servers == [("logical", "active")], servers
        # A normal client now waits for the slot the stream holds, until query_wait_timeout.
        started = time.monotonic()
        rc, _, err = p.psql("SELECT 1", db="shared", timeout=30)
        waited = time.monotonic() - started
        assert rc != 0 and "query_wait_timeout" in err, err
        assert waited >= 2.5, waited
    finally:
        rc, err = stop_recvlogical(proc)
    assert rc == 0, err
    # The stream's end gives the slot back.
    assert harness.wait_until(lambda: not slot_active(pg, slot), 15)
    rc, out, err = p.psql("SELECT 1", db="shared")
    assert (rc, out.strip()) == (0, "1"), err
    pg.psql(f"SELECT pg_drop_replication_slot('{slot}')", db="app")


@pytest.mark.parametrize("binary", ["pgsluice", "pgbouncer-1.25.2"])
def test_reconnect_closes_a_replication_connection_at_once(pg, make_pooler, binary):
    # A stream may never end by itself: RECONNECT cannot wait for it, in PgBouncer either.
    anchor = anchor_or_skip(binary)
    p = pooler(make_pooler, binary=anchor)
    c = harness.RawClient(HOST, p.port, "repl", "replication", "repl",
                          params={"replication": "true"}, timeout=10)
    try:
        assert len(c.query("IDENTIFY_SYSTEM")[0]) == 4
        assert walsenders(pg) == 1
        rc, _, err = p.psql("RECONNECT", db="pgbouncer")
        assert rc == 0, err
        started = time.monotonic()
        ended = None
        try:
            c.query("IDENTIFY_SYSTEM")  # served until the close, or refused by it
            while time.monotonic() - started < 5:
                c.query("IDENTIFY_SYSTEM")
                time.sleep(0.1)
        except (harness.PgError, ConnectionError, OSError) as e:
            ended = e
        assert ended is not None, "the replication connection outlived RECONNECT by 5 s"
        assert harness.wait_until(lambda: walsenders(pg) == 0, 10)
    finally:
        c.close(abort=True)


def test_a_replication_login_is_greeted_and_counted_as_any_login(pg, make_pooler):
    # PgBouncer 1.26 greets a replication client as any other (login_notify_message, in
    # welcome_client) and counts its login (client_login_count, in finish_client_login).
    p = pooler(make_pooler, login_notify_message="Through pgsluice")
    rc, out, err = psql_conninfo(conninfo(p, "repl", "repl", "replication", replication="true"),
                                 "IDENTIFY_SYSTEM")
    assert rc == 0 and out.count("|") == 3, (out, err)
    assert "NOTICE:  Through pgsluice" in err, err
    stats = {s["database"]: s for s in show(p, "STATS")}
    assert stats["replication"]["total_client_login_count"] == "1", stats


def test_hba_replication_keyword_matches_physical_connections_only(pg, make_pooler, tmp_path):
    hba = tmp_path / "pgsluice_hba.conf"
    hba.write_text(f"host replication repl {HOST}/32 scram-sha-256\n"
                   f"host all repl {HOST}/32 reject\n"
                   f"host all all {HOST}/32 scram-sha-256\n")
    p = pooler(make_pooler, auth_type="hba", auth_hba_file=str(hba))
    rc, out, err = psql_conninfo(conninfo(p, "repl", "repl", "replication", replication="true"),
                                 "IDENTIFY_SYSTEM")
    assert rc == 0 and out.count("|") == 3, (out, err)
    # Logical is matched by its database like a normal connection: line 2 rejects it.
    rc, _, err = psql_conninfo(conninfo(p, "repl", "repl", "app", replication="database"),
                               "IDENTIFY_SYSTEM")
    assert rc != 0 and ('pg_hba.conf rejects connection for host "127.0.0.1", user "repl", '
                        'database "app"') in err, err
    # `all` (line 3) does not match a physical connection of app: no line does.
    rc, _, err = psql_conninfo(conninfo(p, "app", "app", "replication", replication="true"),
                               "IDENTIFY_SYSTEM")
    assert rc != 0 and ('no pg_hba.conf entry for replication connection from host '
                        '"127.0.0.1", user "app", no encryption') in err, err
    rc, out, err = psql_conninfo(conninfo(p, "app", "app", "app"), "SELECT 1")
    assert (rc, out.strip()) == (0, "1"), err


def test_postgresql_refusing_a_replication_login_reaches_the_client_only(pg, make_pooler):
    p = pooler(make_pooler, server_login_retry=30)
    # app passes pgsluice's authentication, but PostgreSQL's pg_hba.conf has no replication line
    # for it: the client gets PostgreSQL's error and SQLSTATE, after PgBouncer's "login failed"
    # (its suite matches the words), and both close lines say "login failed" as PgBouncer's do.
    with pytest.raises(harness.PgError) as info:
        harness.RawClient(HOST, p.port, "app", "replication", "app",
                          params={"replication": "true"}).close()
    assert info.value.fields["C"] == "28000", info.value.fields
    assert info.value.fields["M"].startswith(
        'login failed: no pg_hba.conf entry for replication connection from host "127.0.0.1", '
        'user "app"'), info.value.fields
    assert harness.wait_until(
        lambda: len(re.findall(r"closing because: login failed \(age=", p.log())) == 2, 5), \
        p.log()[-3000:]
    # The same pool's normal clients are not failed by it (server_login_retry is not started).
    rc, out, err = p.psql("SELECT current_database()", db="replication")
    assert (rc, out.strip()) == (0, "postgres"), err


def test_replication_values_are_read_as_postgresql_reads_them(pg, make_pooler):
    p = pooler(make_pooler)
    errors = {}
    for port in (pg.port, p.port):  # PostgreSQL itself, then pgsluice
        with pytest.raises(harness.PgError) as info:
            harness.RawClient(HOST, port, "repl", "app", "repl",
                              params={"replication": "maybe"}).close()
        errors[port] = (info.value.fields["C"], info.value.fields["M"])
    assert errors[p.port] == errors[pg.port] == \
        ("22023", 'invalid value for parameter "replication": "maybe"'), errors
    # A false value is a normal session (a physical walsender would refuse SQL).
    for value in ("off", "false", "0", "no"):
        with harness.RawClient(HOST, p.port, "app", "app", "app",
                               params={"replication": value}) as c:
            assert c.scalar("SELECT count(*) >= 0 FROM events") == "t"
    # A physical walsender through pgsluice refuses SQL as PostgreSQL's does: it is one.
    with harness.RawClient(HOST, p.port, "repl", "replication", "repl",
                           params={"replication": "yes"}) as c:
        with pytest.raises(harness.PgError) as info:
            c.query("SELECT 1")
        assert "WAL sender" in info.value.fields["M"], info.value.fields
        assert len(c.query("IDENTIFY_SYSTEM")[0]) == 4


def basebackup_streamed(pg) -> int | None:
    out = pg.psql("SELECT backup_streamed FROM pg_stat_progress_basebackup")
    return int(out) if out else None


def test_a_stalled_base_backup_client_is_held_back_not_buffered(pg, make_pooler):
    # About 85 MB of table, more than any buffer between the walsender and the client.
    pg.psql("CREATE TABLE ballast AS SELECT g, repeat(md5(g::text), 32) AS t "
            "FROM generate_series(1, 80000) g", db="app")
    try:
        p = pooler(make_pooler)
        before = harness.rss_kb(p.proc.pid)
        c = harness.RawClient(HOST, p.port, "repl", "replication", "repl",
                              params={"replication": "true"}, timeout=60)
        c.send_query("BASE_BACKUP (CHECKPOINT 'fast')")
        # The client reads nothing: the walsender stops once the buffers on the way are full.
        assert harness.wait_until(lambda: (basebackup_streamed(pg) or 0) > 0, 30)
        last = basebackup_streamed(pg)
        for _ in range(30):
            time.sleep(1)
            now = basebackup_streamed(pg)
            if now == last:
                break
            last = now
        ballast = int(pg.psql("SELECT pg_relation_size('ballast')", db="app"))
        # Still under way (the row goes when the backup ends), and not moving.
        assert last is not None and last == basebackup_streamed(pg), last
        assert last < ballast / 2, (last, ballast)
        grown_kb = harness.rss_kb(p.proc.pid) - before
        print(f"stalled at {last} of {ballast} bytes of ballast; pgsluice grew {grown_kb} kB")
        assert grown_kb < 16 * 1024, grown_kb
        # Then the client reads on, and gets the whole backup.
        copied = 0
        while True:
            kind, body = c.read_message()
            if kind == b"d":
                copied += len(body)
            elif kind == b"E":
                raise harness.PgError(c._fields(body))
            elif kind == b"Z":
                break
        assert copied > ballast, (copied, ballast)
        c.close()
    finally:
        pg.psql("DROP TABLE ballast", db="app")


def test_base_backup_with_a_small_tcp_socket_buffer_is_not_held_to_delayed_acks(
        pg, make_pooler, tmp_path):
    # About 40 MB of table. Before Channel::set_send_chunk each send() put one 64 kB loopback
    # segment past the 8 kB SO_SNDBUF and waited for pg_basebackup's delayed ACK (40 ms): some
    # 1.6 MB/s, 25 s for this backup, against a second or two now.
    pg.psql("CREATE TABLE ballast AS SELECT g, repeat(md5(g::text), 32) AS t "
            "FROM generate_series(1, 40000) g", db="app")
    try:
        p = pooler(make_pooler, tcp_socket_buffer=4096)
        start = time.monotonic()
        rc, out, err = harness.run(
            [BASEBACKUP, "-d", f"host={HOST} port={p.port} user=repl password=repl",
             "-c", "fast", "-X", "stream", "-D", str(tmp_path / "backup")], timeout=120)
        took = time.monotonic() - start
        assert rc == 0, err
        assert (tmp_path / "backup" / "PG_VERSION").exists()
        print(f"base backup through pgsluice with tcp_socket_buffer=4096: {took:.1f} s")
        assert took < 12, took
    finally:
        pg.psql("DROP TABLE ballast", db="app")
