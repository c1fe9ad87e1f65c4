"""Primaries and standbys (#20): a [databases] entry in libpq's multi-host form with
target_session_attrs and load_balance_hosts, against real streaming replication on loopback — a
primary and two standbys made by pg_basebackup -R, synchronous replication to the one that is
promoted:

- a read-write entry sends every transaction to the primary; a standby entry spreads its
  servers over both standbys and never uses the primary;
- four clients writing in a loop through the read-write entry while the primary is stopped with
  -m immediate and standby 1 promoted (pg_promote): the first write through pgsluice comes
  within 0.3 s of the new primary accepting writes (issue 45: while the entry has no primary its
  hosts are asked every 100 ms, not once a second), with the same connection string, and the
  rechecks stay bounded; every acknowledged commit is on the new primary; no write ever reached a
  standby (a standby refuses it with 25006, which would show);
- the old primary rebuilt as a standby of the new one (pg_basebackup -R) is used by the standby
  entry again, never by the read-write entry;
- with no traffic, a standby promoted while a standby entry holds idle servers on it: the role
  check (server_role_check_interval) closes them within the interval, the next transactions of
  the standby entry go to the remaining standby and the read-write entry's to the new primary;
  what the standby entry's pool learned is the process's knowledge, so the promotion is logged
  once, not again by the read-write entry's pool (which knew the host as a standby).
The tests run in order on one topology: the third needs the second's failover.
"""

from __future__ import annotations

import re
import threading
import time

import psycopg
import pytest

import harness


@pytest.fixture(scope="module")
def topology():
    # Debian's 15 whatever PG_BIN says: npm's 17 and 18 ship no pg_basebackup, and 15's refuses
    # a newer server.
    primary = harness.PostgresCluster(max_connections=100, replication=True,
                                      bin_dir="/usr/lib/postgresql/15/bin")
    standbys = []
    try:
        standbys = [primary.standby("standby1"), primary.standby("standby2")]
        # Synchronous to standby 1, the one a failover promotes: what the primary acknowledged
        # is on it (an asynchronous standby may lose commits, PostgreSQL's property).
        primary.psql("ALTER SYSTEM SET synchronous_standby_names = 'standby1'")
        # The harness's clusters run synchronous_commit = off (speed); this one must wait.
        primary.psql("ALTER SYSTEM SET synchronous_commit = on")
        primary.psql("SELECT pg_reload_conf()")
        harness.wait_until(lambda: primary.psql(
            "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'")
            == "sync", 30)
        primary.psql("CREATE TABLE acks (writer int, n int, port int, PRIMARY KEY (writer, n))",
                     db="app")
        primary.psql("GRANT ALL ON acks TO app", db="app")
        yield primary, standbys
    finally:
        for c in standbys + [primary]:
            c.stop()


def entry(clusters, attrs: str, extra: str = "") -> str:
    hosts = ",".join(harness.HOST for _ in clusters)
    ports = ",".join(str(c.port) for c in clusters)
    return f"host={hosts} port={ports} dbname=app target_session_attrs={attrs} {extra}"


def where(conn) -> tuple[int, bool]:
    port, recovering = conn.execute(
        "SELECT inet_server_port(), pg_is_in_recovery()").fetchone()
    return port, recovering


def test_read_write_goes_to_the_primary_and_standby_spreads_over_standbys(topology, make_pooler):
    primary, (s1, s2) = topology
    p = make_pooler(databases={"rw": entry([s1, s2, primary], "read-write"),
                               "ro": entry([s1, primary, s2], "standby")},
                    default_pool_size=4, server_login_retry=1)
    with p.connect(db="rw", autocommit=True) as c:
        for _ in range(10):
            assert where(c) == (primary.port, False)
    # Four clients at once need four servers of the standby entry: round-robin over the list,
    # the primary skipped.
    conns = [p.connect(db="ro") for _ in range(4)]
    try:
        ports = set()
        for c in conns:
            port, recovering = where(c)  # each holds its server: the transaction stays open
            assert recovering, port
            ports.add(port)
        assert ports == {s1.port, s2.port}, ports
    finally:
        for c in conns:
            c.close()
    # The standby entry's pool never logged in to the primary to find it one: the read-write
    # entry's pool had, and what a pool learns of a host is the process's (its four logins take
    # well under the second for which that keeps the host skipped).
    assert not re.search(r"server is not in hot standby mode", p.log()), p.log()[-3000:]
    assert p.wait_for_log(r"session is read-only \(target_session_attrs = read-write\)")


def promote_and_time(cluster) -> tuple[float, float]:
    """pg_promote() on `cluster`, with a direct connection polling pg_is_in_recovery() every
    few milliseconds meanwhile: (when it first answered false, i.e. the host accepts writes;
    when pg_promote returned). pg_promote waits for the promotion in steps of 100 ms, so the
    first is the sharper mark."""
    writable: list[float] = []
    done = threading.Event()

    def poll() -> None:
        with cluster.connect() as c:
            while not done.is_set():
                if not c.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                    writable.append(time.monotonic())
                    return
                time.sleep(0.002)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        with cluster.connect() as c:
            assert c.execute("SELECT pg_promote(true, 60)").fetchone()[0]
        returned = time.monotonic()
        poller.join(timeout=10)
    finally:
        done.set()
        poller.join(timeout=10)
    assert writable, "the poller never saw the promotion"
    return writable[0], returned


def test_failover_resumes_writes_on_the_promoted_standby(topology, make_pooler):
    primary, (s1, s2) = topology
    p = make_pooler(databases={"rw": entry([primary, s1, s2], "read-write")},
                    default_pool_size=4, server_login_retry=1, query_wait_timeout=60)
    stop = threading.Event()
    acked: list[tuple[int, int, int, float]] = []  # writer, n, port, when
    errors: list[str] = []

    def writer(w: int) -> None:
        n = 0
        conn = None
        while not stop.is_set():
            try:
                if conn is None:
                    conn = psycopg.connect(p.dsn(db="rw"), autocommit=True)
                n += 1
                port = conn.execute("INSERT INTO acks VALUES (%s, %s, inet_server_port()) "
                                    "RETURNING port", (w, n)).fetchone()[0]
                acked.append((w, n, port, time.monotonic()))
            except psycopg.Error as e:
                errors.append(f"{getattr(e, 'sqlstate', None)} {e}".strip())
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    try:
        assert harness.wait_until(lambda: len(acked) >= 200, 30), (len(acked), errors[-5:])
        primary.stop_now("immediate")
        # 1.5 s: the writers wait with every host skipped (the primary failed, the standbys
        # refused for their role). A host rechecked once a second would be asked about 1.0-1.2 s
        # and 2.0-2.4 s after the stop, half a second or more after the promotion is over.
        time.sleep(1.5)
        writable, returned = promote_and_time(s1)
        assert harness.wait_until(lambda: any(a[2] == s1.port for a in acked), 30), \
            (errors[-5:], p.log()[-3000:])
        first = min(a[3] for a in acked if a[2] == s1.port)
        print(f"first write on the new primary {first - writable:.3f} s after it accepted "
              f"writes, {first - returned:.3f} s after pg_promote returned "
              f"({returned - writable:.3f} s after it accepted writes); {len(errors)} client "
              f"errors during the failover")
        assert first - writable <= 0.3, f"first write on the new primary " \
                                        f"{first - writable:.2f} s after it accepted writes"
        harness.wait_until(lambda: sum(a[2] == s1.port for a in acked) >= 100, 30)
        # The failover is logged with its timing: how long the pool had no usable host, how
        # long its clients waited, and how many servers the rechecks found of the wrong role.
        line = p.wait_for_log(r"new primary 127\.0\.0\.1:%d after ([0-9.]+) s without one; "
                              r"(\d+) clients waited up to ([0-9.]+) s; (\d+) servers had the "
                              r"wrong role meanwhile" % s1.port)
        assert line, p.log()[-3000:]
        print(line.group(0))
        # Bounded: two standbys asked at most every 100 ms (and a few refused at the start,
        # before the pool knew it had no host), not a storm of logins.
        outage, rechecks = float(line.group(1)), int(line.group(4))
        assert rechecks <= 2 * (outage / 0.1 + 1) + 4, (rechecks, outage)
        assert p.wait_for_log(r"host 127\.0\.0\.1:%d unusable: " % primary.port)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    # Only the two primaries ever took a write; a standby would have refused it (25006).
    assert {a[2] for a in acked} <= {primary.port, s1.port}
    assert not [e for e in errors if e.startswith("25006")], errors
    on_new = set(tuple(map(int, line.split("|"))) for line in
                 s1.psql("SELECT writer, n FROM acks", db="app").splitlines())
    missing = [(w, n) for w, n, _, _ in acked if (w, n) not in on_new]
    assert not missing, f"{len(missing)} acknowledged commits missing: {missing[:5]}"


def test_the_old_primary_rebuilt_as_a_standby_serves_the_standby_entry(topology, make_pooler):
    primary, (s1, s2) = topology
    assert s1.psql("SELECT pg_is_in_recovery()") == "f", "the failover test runs first"
    primary.follow(s1, "old_primary")
    p = make_pooler(databases={"rw": entry([primary, s2, s1], "read-write"),
                               "ro": entry([primary, s1, s2], "standby")},
                    default_pool_size=4, server_login_retry=1)
    with p.connect(db="rw", autocommit=True) as c:
        for _ in range(5):
            assert where(c) == (s1.port, False)
    conns = [p.connect(db="ro") for _ in range(4)]
    try:
        seen = {where(c) for c in conns}
    finally:
        for c in conns:
            c.close()
    assert {port for port, _ in seen} == {primary.port, s2.port}, seen
    assert all(recovering for _, recovering in seen), seen


def test_idle_servers_follow_a_promotion_without_traffic(topology, make_pooler):
    primary, (s1, s2) = topology
    # After the tests above: standby 1 is the primary, the old primary and standby 2 are standbys.
    assert s1.psql("SELECT pg_is_in_recovery()") == "f", "the failover test runs first"
    assert primary.psql("SELECT pg_is_in_recovery()") == "t"
    p = make_pooler(databases={"rw": entry([s1, primary], "read-write"),
                               "ro": entry([primary, s2], "standby")},
                    default_pool_size=4, server_login_retry=1, server_role_check_interval=1,
                    admin_users="app")
    # Two servers of the read-write entry: round-robin sends the second login to the old
    # primary, which refuses it for its role (a standby), and the pool takes s1 again.
    rw = [p.connect(db="rw") for _ in range(2)]
    try:
        assert {where(c) for c in rw} == {(s1.port, False)}
    finally:
        for c in rw:
            c.close()
    assert p.wait_for_log(r"session is read-only \(target_session_attrs = read-write\)")
    conns = [p.connect(db="ro") for _ in range(4)]
    try:
        seen = {where(c) for c in conns}
    finally:
        for c in conns:
            c.close()
    assert (primary.port, True) in seen, seen
    # Idle servers of the standby entry on the old primary, now a standby.
    assert harness.wait_until(lambda: len(primary.server_backends()) > 0, 5)
    with psycopg.connect(p.dsn(db="pgsluice"), autocommit=True) as admin:
        servers = admin.execute("SHOW SERVERS").fetchall()
        cols = [d.name for d in admin.execute("SHOW SERVERS").description]
    rows = [dict(zip(cols, r)) for r in servers]
    on_old = [r for r in rows if r["database"] == "ro" and int(r["port"]) == primary.port]
    assert on_old and all(r["role"] == "standby" for r in on_old), rows
    assert all(r["host"] == f"127.0.0.1:{primary.port}" for r in on_old), rows

    s1.stop_now("immediate")
    primary.promote()
    promoted = time.monotonic()
    # No client runs anything: only the role check can tell that the host was promoted.
    assert harness.wait_until(lambda: not primary.server_backends(), 10), \
        (primary.server_backends(), p.log()[-3000:])
    closed = time.monotonic() - promoted
    print(f"idle servers on the promoted host closed {closed:.2f} s after pg_ctl promote returned")
    assert closed < 1 + 1.5, closed  # the interval, a janitor round, the query
    assert p.wait_for_log(r"host 127\.0\.0\.1:%d is now a primary \(was a standby\)"
                          % primary.port)
    # The next transactions, without an error: the standby entry's on the standby left, the
    # read-write entry's on the new primary.
    for _ in range(4):
        with p.connect(db="ro", autocommit=True) as c:
            assert where(c) == (s2.port, True)
    with p.connect(db="rw", autocommit=True) as c:
        assert where(c) == (primary.port, False)
    # The read-write entry's pool knew the host as a standby (its second server's login was
    # refused there) and learned the promotion from the standby entry's pool: one line for the
    # process, where each pool (and each worker's share) used to log its own.
    told = re.findall(r"host 127\.0\.0\.1:%d is now a primary" % primary.port, p.log())
    assert len(told) == 1, p.log()[-3000:]


def terminate_backend_of(cluster, pid: int) -> None:
    assert cluster.psql(f"SELECT pg_terminate_backend({pid})") == "t"


def terminated_during(cluster, conn, sql: str) -> None:
    """Runs `sql` on conn while its backend is terminated half a second in: PostgreSQL's
    57P01 must reach the client as an error of that statement."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    killer = threading.Timer(0.5, terminate_backend_of, (cluster, pid))
    killer.start()
    with pytest.raises(psycopg.errors.AdminShutdown):
        conn.execute(sql)
    killer.join()


def test_a_client_keeps_its_connection_when_its_server_dies(topology, make_pooler):
    """Issue 45: PostgreSQL ends a backend (pg_terminate_backend here; a fast shutdown or a
    crash alike) under a client of the read-write entry. The client gets PostgreSQL's error
    (57P01) and a ReadyForQuery instead of losing its connection: inside a transaction block a
    failed one ('E'), whose ROLLBACK the pooler answers; its next transaction runs on a new
    server, over the same connection. Nothing of the terminated transaction is committed."""
    primary, (s1, s2) = topology
    # After the tests above the old primary is the primary again, s1 is stopped.
    assert primary.psql("SELECT pg_is_in_recovery()") == "f"
    primary.psql("CREATE TABLE IF NOT EXISTS kept (tag text)", db="app")
    primary.psql("GRANT ALL ON kept TO app", db="app")
    p = make_pooler(databases={"rw": entry([s1, primary, s2], "read-write")},
                    default_pool_size=2, server_login_retry=1)
    conn = psycopg.connect(p.dsn(db="rw"))
    try:
        # Idle in its transaction block when its backend goes: the next statement hears it.
        conn.execute("INSERT INTO kept VALUES ('idle in block')")
        terminate_backend_of(primary, conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        time.sleep(0.3)
        with pytest.raises(psycopg.errors.AdminShutdown) as info:
            conn.execute("SELECT 1")
        assert "terminating connection due to administrator command" in str(info.value)
        assert not conn.closed
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        # PostgreSQL's answer in a failed transaction block, until it ends.
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 2")
        conn.rollback()
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        conn.execute("INSERT INTO kept VALUES ('next')")
        conn.commit()

        # In the middle of a statement of a block.
        terminated_during(primary, conn, "INSERT INTO kept SELECT 'mid statement' FROM pg_sleep(5)")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        conn.rollback()
        assert conn.execute("SELECT count(*) FROM kept").fetchone()[0] == 1
        conn.commit()

        # An autocommit statement: outside a block, the next statement simply runs.
        conn.autocommit = True
        terminated_during(primary, conn, "SELECT pg_sleep(5)")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT 42").fetchone()[0] == 42
    finally:
        conn.close()

    # The simple protocol, and COMMIT in the failed block: PostgreSQL's ROLLBACK, nothing kept.
    with p.raw(db="rw") as c:
        c.query("BEGIN")
        c.query("INSERT INTO kept VALUES ('raw')")
        terminate_backend_of(primary, int(c.scalar("SELECT pg_backend_pid()")))
        time.sleep(0.3)
        c.send_query("SELECT 1")
        with pytest.raises(harness.PgError) as raised:
            c.read_result()
        assert raised.value.fields["C"] == "57P01", raised.value.fields
        assert raised.value.fields["S"] == "ERROR", raised.value.fields
        # Spelled as applications do (a comment, lower case, the optional words): still the end.
        c.send_query("/* app */ commit work and no chain; -- done")
        assert c.read_result()[1:] == ("ROLLBACK", "I")
        assert c.scalar("SELECT count(*) FROM kept") == "1"
        # Not told yet: a COMMIT hears of the loss (it did not commit), a ROLLBACK is answered
        # (what it asked is what happened).
        for end, told in (("COMMIT", True), ("ROLLBACK", False)):
            c.query("BEGIN")
            c.query(f"INSERT INTO kept VALUES ('raw {end}')")
            terminate_backend_of(primary, int(c.scalar("SELECT pg_backend_pid()")))
            time.sleep(0.3)
            c.send_query(end)
            if told:
                with pytest.raises(harness.PgError) as raised:
                    c.read_result()
                assert raised.value.fields["C"] == "57P01", raised.value.fields
                assert c.query("ROLLBACK") == []
            else:
                assert c.read_result()[1:] == ("ROLLBACK", "I")
            assert c.scalar("SELECT count(*) FROM kept") == "1"
    assert primary.psql("SELECT string_agg(tag, ',') FROM kept", db="app") == "next"
    assert p.wait_for_log(r"server connection lost \(57P01: terminating connection due to "
                          r"administrator command\): the client keeps its connection, in a "
                          r"failed transaction")


def test_a_restarted_standby_gets_the_standby_entrys_servers_again(topology, make_pooler):
    """Issue 45: a standby entry (load_balance_hosts) whose servers all went to one standby
    while the other restarted moves some of them back once it is up again: at a release, at most
    one server per second and worker, a login to the emptier host (or the released server
    closed to make room). Before, nothing logged in there until something forced new logins."""
    primary, (s1, s2) = topology
    assert primary.psql("SELECT pg_is_in_recovery()") == "f", "the tests above run first"
    s1.follow(primary, "standby1")
    p = make_pooler(databases={"ro": entry([s1, s2], "standby", "load_balance_hosts=random")},
                    default_pool_size=8, server_login_retry=1)
    stop = threading.Event()
    reads: list[tuple[int, float]] = []
    errors: list[str] = []

    def reader() -> None:
        with psycopg.connect(p.dsn(db="ro"), autocommit=True) as conn:
            while not stop.is_set():
                try:
                    reads.append((conn.execute("SELECT inet_server_port()").fetchone()[0],
                                  time.monotonic()))
                except psycopg.Error as e:
                    errors.append(f"{e.sqlstate} {e}")
                time.sleep(0.005)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        assert harness.wait_until(lambda: len(reads) >= 100, 30), errors[-3:]
        s1.stop_now("fast")
        time.sleep(2)  # every server of the entry on s2 now
        since = time.monotonic()
        assert harness.wait_until(lambda: sum(t > since for _, t in reads) >= 100, 30)
        assert {port for port, t in reads if t > since} == {s2.port}
        s1._start()
        s1.wait_ready()
        back = time.monotonic()
        assert harness.wait_until(
            lambda: any(port == s1.port and t > back for port, t in reads), 15), \
            p.log()[-3000:]
        first = min(t for port, t in reads if port == s1.port and t > back)
        print(f"the first read on the restarted standby {first - back:.2f} s after it was back")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert p.wait_for_log(r"ro: rebalancing onto host 127\.0\.0\.1:%d" % s1.port)
    # Only the reads in flight when s1 stopped failed, none when it came back.
    assert len(errors) <= 4, errors
