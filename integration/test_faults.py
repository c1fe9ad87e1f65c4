"""Faults on the server side with a real PostgreSQL behind pgsluice: a backend terminated in the
middle of a transaction, a COPY (in and out) and an extended-protocol pipeline; a server that
accepts TCP and never answers; PostgreSQL restarted under pgbench load; and, last because it makes
the postmaster restart every backend, a backend killed with SIGKILL. Each time the client whose
server died gets an error, nothing of its transaction is committed, and the pool heals: new
clients (more of them at once than the pool has servers) are served at once. (Outside a COPY the
client keeps its connection to pgsluice: test_ha.py's test_a_client_keeps_its_connection_when_
its_server_dies checks what it is told and that it carries on.)"""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import threading
import time
import uuid

import psycopg
import pytest

import harness

POOL_SIZE = 3


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def terminate(pg: harness.PostgresCluster, pid: int) -> None:
    assert pg.psql(f"SELECT pg_terminate_backend({pid})") == "t"


def wait_for_backend(pg: harness.PostgresCluster, query_part: str, timeout: float = 20) -> int:
    """The pid of the app backend whose current query contains `query_part`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid, state, query in pg.server_backends():
            if query_part in query and state == "active":
                return pid
        time.sleep(0.05)
    raise AssertionError(f"no backend running {query_part!r}: {pg.server_backends()}")


def assert_pool_heals(pooler: harness.Pooler, clients: int = POOL_SIZE * 2) -> None:
    """More clients at once than the pool has servers, each holding a server for a moment inside
    a transaction, all succeed; then a run of fresh connections succeed on the first try."""
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with pooler.connect() as conn:
                conn.execute("SELECT pg_sleep(0.2)")
                assert conn.execute("SELECT %s::int", (i,)).fetchone()[0] == i
                conn.commit()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for _ in range(10):
        with pooler.raw() as c:
            assert c.scalar("SELECT 1") == "1"


@pytest.fixture
def table(pg):
    name = unique("fault")
    # The test cluster runs with synchronous_commit = off, and the SIGKILL tests below make the
    # postmaster reinitialise shared memory: WAL not yet written by then is gone, and with it a
    # table created half a second before (CI lost one this way). Its creation waits for the flush.
    pg.psql(f"SET synchronous_commit = on; CREATE TABLE {name} (id int, tag text, payload text); "
            f"ALTER TABLE {name} OWNER TO app", db="app")
    yield name
    pg.psql(f"DROP TABLE IF EXISTS {name}", db="app")


def count_rows(pg, table: str, tag: str) -> int:
    return int(pg.psql(f"SELECT count(*) FROM {table} WHERE tag = '{tag}'", db="app"))


# --------------------------------------------------------------------------------------------
# pg_terminate_backend


def test_terminate_in_transaction(pg, make_pooler, table):
    pooler = make_pooler(default_pool_size=POOL_SIZE)
    conn = pooler.connect()
    conn.execute(f"INSERT INTO {table} VALUES (1, 'tx', 'a')")
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    terminate(pg, pid)
    with pytest.raises(psycopg.OperationalError):
        conn.execute(f"INSERT INTO {table} VALUES (2, 'tx', 'b')")
        conn.commit()
    conn.close()
    assert count_rows(pg, table, "tx") == 0
    assert pooler.wait_for_log(r"server connection lost|terminating connection"), pooler.log()
    assert_pool_heals(pooler)


def copy_in_killed(pg, pooler, table: str, kill) -> None:
    """A COPY FROM STDIN whose backend `kill(pid)` ends after the first rows: the client gets an
    error (at the latest with CopyDone) and no row is committed."""
    conn = pooler.connect()
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    t0 = time.monotonic()
    with pytest.raises(psycopg.Error):
        with conn.cursor() as cur:
            with cur.copy(f"COPY {table} FROM STDIN") as copy:
                for i in range(100):
                    copy.write_row((i, "copy", "x" * 100))
                kill(pid)
                # Keep writing as a client that has not noticed would; the error comes at the
                # latest with CopyDone.
                for i in range(100, 100000):
                    copy.write_row((i, "copy", "x" * 100))
                    if time.monotonic() - t0 > 10:
                        break
        conn.commit()
    conn.close()


def test_terminate_during_copy_in(pg, make_pooler, table):
    pooler = make_pooler(default_pool_size=POOL_SIZE)
    copy_in_killed(pg, pooler, table, lambda pid: terminate(pg, pid))
    assert count_rows(pg, table, "copy") == 0
    assert_pool_heals(pooler)


def test_terminate_during_copy_out(pg, make_pooler):
    pooler = make_pooler(default_pool_size=POOL_SIZE)
    conn = pooler.connect()
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    received = 0
    with pytest.raises(psycopg.Error):
        with conn.cursor() as cur:
            with cur.copy("COPY (SELECT g, repeat('y', 200) FROM generate_series(1, 5000000) g) "
                          "TO STDOUT") as copy:
                for chunk in copy:
                    received += len(chunk)
                    if received > 100000 and pid:
                        terminate(pg, pid)
                        pid = 0
    conn.close()
    assert received > 100000
    assert_pool_heals(pooler)


def pipeline_killed(pg, pooler, table: str, kill, recover=lambda: None) -> None:
    """An extended-protocol pipeline (psycopg pipeline mode: many Parse/Bind/Execute, one Sync)
    whose backend `kill(pid)` ends while it runs a statement in its middle: the client gets an
    error and the statements after the kill never ran (in a transaction: none committed)."""
    conn = pooler.connect()
    marker = unique("pipe")
    killed = []

    def killer():
        pid = wait_for_backend(pg, f"pg_sleep(2.{len(marker)})")
        kill(pid)
        killed.append(pid)

    t = threading.Thread(target=killer)
    t.start()
    with pytest.raises(psycopg.Error):
        with conn.pipeline():
            conn.execute(f"INSERT INTO {table} VALUES (1, %s, 'before')", (marker,))
            conn.execute("SELECT 1")
            conn.execute(f"SELECT pg_sleep(2.{len(marker)}), %s::text", (marker,))
            conn.execute(f"INSERT INTO {table} VALUES (2, %s, 'after')", (marker,))
            conn.execute("SELECT 2")
        conn.commit()
    t.join(30)
    assert killed
    conn.close()
    recover()
    assert count_rows(pg, table, marker) == 0
    # The same in autocommit mode: statements before the kill may have committed, the ones after
    # it must not have run.
    conn = pooler.connect(autocommit=True)
    marker2 = unique("pipe")
    t = threading.Thread(target=lambda: kill(wait_for_backend(
        pg, f"pg_sleep(2.{len(marker2)})")))
    t.start()
    with pytest.raises(psycopg.Error):
        with conn.pipeline():
            conn.execute(f"SELECT pg_sleep(2.{len(marker2)}), %s::text", (marker2,))
            conn.execute(f"INSERT INTO {table} VALUES (2, %s, 'after')", (marker2,))
    t.join(30)
    conn.close()
    recover()
    assert count_rows(pg, table, marker2) == 0


def test_terminate_during_pipeline(pg, make_pooler, table):
    pooler = make_pooler(default_pool_size=POOL_SIZE)
    pipeline_killed(pg, pooler, table, lambda pid: terminate(pg, pid))
    assert_pool_heals(pooler)


def test_terminated_client_sees_server_reason(pg, make_pooler):
    pooler = make_pooler(default_pool_size=POOL_SIZE)
    conn = pooler.connect()
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    terminate(pg, pid)
    time.sleep(0.5)
    with pytest.raises(psycopg.OperationalError) as info:
        conn.execute("SELECT 1")
    conn.close()
    # What PostgreSQL said (or, from pgsluice's own words, at least not a made-up reason).
    assert "terminating connection due to administrator command" in str(info.value), \
        str(info.value)


# --------------------------------------------------------------------------------------------
# a server that never answers


class BlackHole:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte; counts them, and sees when
    the pooler gives up on one (EOF)."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((harness.HOST, 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.closed_by_peer = 0
        self._conns: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import selectors
        sel = selectors.DefaultSelector()
        self.sock.setblocking(False)
        sel.register(self.sock, selectors.EVENT_READ)
        while not self._stop:
            for key, _ in sel.select(0.1):
                if key.fileobj is self.sock:
                    try:
                        c, _ = self.sock.accept()
                    except BlockingIOError:
                        continue
                    c.setblocking(False)
                    self.accepted += 1
                    self._conns.append(c)
                    sel.register(c, selectors.EVENT_READ)
                else:
                    try:
                        data = key.fileobj.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                        self.closed_by_peer += 1
        sel.close()

    def open_connections(self) -> int:
        return self.accepted - self.closed_by_peer

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass
        self.sock.close()


def test_server_never_answers(make_pooler):
    """A server that accepts TCP and never answers: each login ends at server_connect_timeout,
    and the clients wait for the next attempt (PgBouncer 1.25: a connection that could not be
    made does not fail the waiting clients) until query_wait_timeout, which tells them why."""
    hole = BlackHole()
    try:
        pooler = make_pooler(
            databases={"app": f"host=127.0.0.1 port={hole.port} dbname=app"},
            default_pool_size=POOL_SIZE, server_connect_timeout=1, server_login_retry=2,
            query_wait_timeout=3)
        results: list[tuple[float, str]] = []
        lock = threading.Lock()

        def client():
            t0 = time.monotonic()
            try:
                with pooler.raw(timeout=30) as c:
                    c.scalar("SELECT 1")
                outcome = "ok"
            except harness.PgError as e:
                outcome = f"{e.sqlstate}: {e.message}"
            except OSError as e:
                outcome = f"socket: {e}"
            with lock:
                results.append((time.monotonic() - t0, outcome))

        # Three waves of 20 clients: while the first login is on its way, during the retry
        # pause, and after it.
        threads = []
        for wave in range(3):
            threads += [threading.Thread(target=client) for _ in range(20)]
            for t in threads[-20:]:
                t.start()
            time.sleep(1.5)
        for t in threads:
            t.join(60)
        assert len(results) == 60
        for elapsed, outcome in results:
            assert outcome.startswith("57014: query_wait_timeout (the last server login failed: "
                                      "server_connect_timeout"), outcome
            # Each waited its query_wait_timeout (janitor rounds of 200 ms), no longer.
            assert 2.8 < elapsed < 5, (elapsed, outcome)
        # No pile-up: one login attempt at a time, and each given up.
        assert hole.accepted <= 3 * POOL_SIZE, hole.accepted
        deadline = time.monotonic() + 10
        while hole.open_connections() > 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert hole.open_connections() == 0, (hole.accepted, hole.closed_by_peer)
        assert pooler.wait_for_log(r"server_connect_timeout"), pooler.log()[-3000:]
        assert pooler.alive()
    finally:
        hole.close()


def outcome_recorder(pooler, outcomes: list[tuple[float, str]], started: float):
    """A client thread's body: SELECT 1 through `pooler`, appending (seconds since `started`,
    "ok" or "SQLSTATE: message") to `outcomes`."""
    lock = threading.Lock()

    def client() -> None:
        try:
            with pooler.raw(timeout=30) as c:
                outcome = "ok" if c.scalar("SELECT 1") == "1" else "wrong answer"
        except harness.PgError as e:
            outcome = f"{e.sqlstate}: {e.message}"
        with lock:
            outcomes.append((time.monotonic() - started, outcome))

    return client


def test_login_retry_is_one_pools_on_every_worker(pg, make_pooler):
    """server_login_retry holds back the pool, not one worker's share of it: after a login that
    could not connect, the clients of every worker wait (PgBouncer 1.25 keeps them queued), no
    worker tries again before the pause is over, and once PostgreSQL is reachable one login
    frees every worker's clients."""
    port = harness.free_port()  # nothing listens there yet: logins are refused
    pooler = make_pooler(databases={"app": f"host=127.0.0.1 port={port} dbname=app"},
                         workers=2, default_pool_size=POOL_SIZE, server_login_retry=3,
                         query_wait_timeout=20)
    outcomes: list[tuple[float, str]] = []
    started = time.monotonic()
    client = outcome_recorder(pooler, outcomes, started)

    # Connections go to the workers in turn: these six reach both.
    threads = [threading.Thread(target=client) for _ in range(6)]
    for t in threads:
        t.start()
    assert pooler.wait_for_log(r"login failed: could not connect to server"), pooler.log()
    failed_at = time.monotonic()
    proxy = StallProxy(pg.port, listen_port=port)
    try:
        for t in threads:
            t.join(30)
        assert [o for _, o in outcomes] == ["ok"] * 6, (outcomes, pooler.log()[-3000:])
        # Served by the attempt after the pause, not before it: the first failure held back
        # both workers, and the clients were neither failed nor served meanwhile.
        assert all(at > failed_at - started + 2.5 for at, _ in outcomes), outcomes
        # One failed attempt in all (its warning line; the server's closing line says it too).
        failures = re.findall(r"\d server login failed: could not connect to server", pooler.log())
        assert len(failures) == 1, pooler.log()[-3000:]
    finally:
        proxy.close()
    assert pooler.alive()


class SlowRefusal:
    """A server that answers every login, after `delay` seconds, with PostgreSQL's FATAL 28P01
    (what a wrong password in the [databases] line gets); counts the logins."""

    def __init__(self, delay: float):
        self.delay = delay
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((harness.HOST, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.logins = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                while True:
                    length = struct.unpack("!i", conn.recv(4, socket.MSG_WAITALL))[0]
                    body = conn.recv(length - 4, socket.MSG_WAITALL)
                    if body[:4] != struct.pack("!i", 80877103):
                        break
                    conn.sendall(b"N")  # SSLRequest: no TLS here
                self.logins += 1
                time.sleep(self.delay)
                fields = b"".join(k + v.encode() + b"\0" for k, v in [
                    (b"S", "FATAL"), (b"V", "FATAL"), (b"C", "28P01"),
                    (b"M", 'password authentication failed for user "app"')]) + b"\0"
                conn.sendall(b"E" + struct.pack("!i", len(fields) + 4) + fields)
            except (OSError, struct.error):
                pass

    def close(self) -> None:
        self.sock.close()
        self._thread.join(5)


def test_refused_login_fails_the_clients_waiting_on_every_worker(make_pooler):
    """PostgreSQL refusing the login (28P01 here) is an answer the next login would get too: the
    clients waiting for it on every worker hear it at once (PgBouncer's kill_pool_logins), not
    at a timeout. A client that comes after it waits for the next attempt (server_login_retry)
    and hears that one's answer."""
    server = SlowRefusal(delay=1.0)
    try:
        pooler = make_pooler(databases={"app": f"host=127.0.0.1 port={server.port} dbname=app"},
                             workers=2, server_login_retry=3, query_wait_timeout=30)
        outcomes: list[tuple[float, str]] = []
        started = time.monotonic()
        client = outcome_recorder(pooler, outcomes, started)

        # Six clients on both workers, all waiting before the login's answer comes (1 s).
        first = [threading.Thread(target=client) for _ in range(6)]
        for t in first:
            t.start()
        for t in first:
            t.join(30)
        refused = '08006: server login failed: password authentication failed for user "app"'
        assert [o for _, o in outcomes] == [refused] * 6, outcomes
        assert all(at < 2.5 for at, _ in outcomes), outcomes
        assert server.logins == 1
        # During the retry pause: this one waits for the next attempt (3 s after the first).
        late = threading.Thread(target=client)
        late.start()
        late.join(30)
        at, outcome = outcomes[-1]
        assert outcome == refused, outcomes
        assert at > 4.0, outcomes  # the first answer at ~1 s, the retry at ~4 s, its answer ~5 s
        assert server.logins == 2
        assert pooler.alive()
    finally:
        server.close()


# --------------------------------------------------------------------------------------------
# a network stall between pgsluice and PostgreSQL


class StallProxy:
    """A TCP relay in front of PostgreSQL. stall() freezes every connection open at that moment:
    what either side sends is still read (as the kernel buffers would take it) but held, never
    delivered, like a link that went silent; connections made later flow normally. It notes
    when pgsluice closes a frozen connection."""

    def __init__(self, target_port: int, listen_port: int = 0):
        self.target_port = target_port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((harness.HOST, listen_port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs: list[dict] = []  # {"down": pooler side, "up": PostgreSQL side, ...}
        self.frozen_closed_by_pooler = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stall(self) -> int:
        with self.lock:
            live = [p for p in self.pairs if not p["closed"]]
            for p in live:
                p["frozen"] = True
            return len(live)

    def _close(self, pair: dict, sel) -> None:
        if pair["closed"]:
            return
        pair["closed"] = True
        for s in (pair["down"], pair["up"]):
            try:
                sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()

    def _run(self) -> None:
        import selectors
        sel = selectors.DefaultSelector()
        self.sock.setblocking(False)
        sel.register(self.sock, selectors.EVENT_READ, None)
        while not self._stop:
            for key, _ in sel.select(0.1):
                if key.data is None:
                    try:
                        down, _ = self.sock.accept()
                    except BlockingIOError:
                        continue
                    up = socket.create_connection((harness.HOST, self.target_port), timeout=10)
                    pair = {"down": down, "up": up, "frozen": False, "closed": False}
                    with self.lock:
                        self.pairs.append(pair)
                    sel.register(down, selectors.EVENT_READ, (pair, "down"))
                    sel.register(up, selectors.EVENT_READ, (pair, "up"))
                    continue
                pair, side = key.data
                if pair["closed"]:
                    continue
                try:
                    data = key.fileobj.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    if pair["frozen"] and side == "down":
                        self.frozen_closed_by_pooler += 1
                    # A frozen link delivers nothing, not even the close of the far side.
                    if not (pair["frozen"] and side == "up"):
                        self._close(pair, sel)
                    else:
                        sel.unregister(key.fileobj)
                    continue
                if not pair["frozen"]:
                    other = pair["up"] if side == "down" else pair["down"]
                    try:
                        other.sendall(data)
                    except OSError:
                        self._close(pair, sel)
        for pair in self.pairs:
            self._close(pair, sel)
        sel.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        self.sock.close()


def test_network_stall_to_server(pg, make_pooler):
    proxy = StallProxy(pg.port)
    try:
        pooler = make_pooler(databases={"app": f"host=127.0.0.1 port={proxy.port} dbname=app"},
                             default_pool_size=POOL_SIZE, query_timeout=3)
        stuck = pooler.raw()
        assert stuck.scalar("SELECT 'before the stall'") == "before the stall"
        assert proxy.stall() >= 1
        t0 = time.monotonic()
        stuck.send_query("SELECT 'into the void'")
        # Others are served meanwhile, on servers that are not behind the frozen link.
        for _ in range(POOL_SIZE):
            with pooler.raw() as c:
                assert c.scalar("SELECT 'around it'") == "around it"
        # query_timeout ends the wait with a clear error; the frozen server is not reused.
        with pytest.raises((harness.PgError, ConnectionError)) as info:
            stuck.read_result()
            stuck.read_result()
        elapsed = time.monotonic() - t0
        stuck.close()
        if isinstance(info.value, harness.PgError):
            assert info.value.sqlstate == "57014", info.value.fields
            assert "timeout" in info.value.message
        assert 2.5 <= elapsed < 20, elapsed
        deadline = time.monotonic() + 10
        while proxy.frozen_closed_by_pooler < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proxy.frozen_closed_by_pooler >= 1, "pgsluice kept the frozen server connection"
        assert pooler.wait_for_log(r"query timeout"), pooler.log()[-3000:]
        assert_pool_heals(pooler)
        assert pooler.alive()
    finally:
        proxy.close()


# --------------------------------------------------------------------------------------------
# PostgreSQL restarted under load


def test_restart_under_pgbench_load(pgbench_data, make_pooler):
    pg = pgbench_data
    pooler = make_pooler(default_pool_size=POOL_SIZE, server_login_retry=1,
                         query_wait_timeout=60)
    out: dict = {}

    def load():
        out["result"] = pooler.pgbench(["-n", "-c", "8", "-j", "2", "-T", "12", "-M", "extended"],
                                       timeout=120)

    t = threading.Thread(target=load)
    t.start()
    time.sleep(4)
    pg.restart()
    t.join(120)
    back = time.monotonic()
    rc, stdout, stderr = out["result"]
    # In-flight transactions failed: pgbench reports the aborted clients (it exits 2 then).
    assert rc in (0, 2), (rc, stdout, stderr)
    errors_seen = stderr.count("error") + stderr.count("aborted")
    # PostgreSQL is back. pgsluice may refuse logins for server_login_retry (1 s here) after the
    # failures it saw while PostgreSQL was down; after that a client is served.
    while True:
        try:
            with pooler.raw() as c:
                assert c.scalar("SELECT 1") == "1"
            break
        except (harness.PgError, OSError) as e:
            assert time.monotonic() - back < 15, f"not serving {time.monotonic() - back:.1f} s " \
                                                 f"after the restart: {e}"
            time.sleep(0.2)
    print(f"pgbench during restart: rc={rc}, errors/aborts in stderr: {errors_seen}; "
          f"serving again {time.monotonic() - back:.1f} s after PostgreSQL was back")
    # Once the server is back, new transactions succeed, with every client.
    rc, stdout, stderr = pooler.pgbench(["-n", "-c", "8", "-j", "2", "-T", "5", "-M",
                                         "extended"], timeout=120)
    assert rc == 0, (stdout, stderr)
    assert "number of failed transactions: 0" in stdout, stdout
    assert_pool_heals(pooler)
    # No server connection left half-open: the pool's servers are live backends.
    backends = pg.server_backends()
    assert len(backends) <= POOL_SIZE, backends


# --------------------------------------------------------------------------------------------
# SIGKILL: last, since the postmaster then restarts every backend (crash recovery)


def sigkill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def recover_from_crash(pg: harness.PostgresCluster) -> None:
    """After a SIGKILL the postmaster ends every backend and runs crash recovery: wait for it,
    then give pgsluice a moment to see that its idle servers are gone."""
    time.sleep(0.5)
    pg.wait_ready()
    time.sleep(1)


def test_sigkill_backend_in_transaction(pg, make_pooler, table):
    if not harness.is_root():
        pytest.skip("needs to signal the postgres user's processes")
    pooler = make_pooler(default_pool_size=POOL_SIZE)
    # Fill the pool with idle servers first: they all die in the crash recovery, and pgsluice
    # must not hand them out afterwards.
    assert_pool_heals(pooler)
    conn = pooler.connect()
    conn.execute(f"INSERT INTO {table} VALUES (1, 'kill', 'a')")
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    sigkill(pid)
    with pytest.raises(psycopg.Error):
        conn.execute(f"INSERT INTO {table} VALUES (2, 'kill', 'b')")
        conn.commit()
    conn.close()
    recover_from_crash(pg)
    assert count_rows(pg, table, "kill") == 0
    assert_pool_heals(pooler)
    assert pooler.alive()


def test_sigkill_backend_during_copy_in(pg, make_pooler, table):
    if not harness.is_root():
        pytest.skip("needs to signal the postgres user's processes")
    pooler = make_pooler(default_pool_size=POOL_SIZE)
    assert_pool_heals(pooler)
    copy_in_killed(pg, pooler, table, sigkill)
    recover_from_crash(pg)
    assert count_rows(pg, table, "copy") == 0
    assert_pool_heals(pooler)
    assert pooler.alive()


def test_sigkill_backend_during_pipeline(pg, make_pooler, table):
    if not harness.is_root():
        pytest.skip("needs to signal the postgres user's processes")
    pooler = make_pooler(default_pool_size=POOL_SIZE)
    assert_pool_heals(pooler)
    pipeline_killed(pg, pooler, table, sigkill, recover=lambda: recover_from_crash(pg))
    assert_pool_heals(pooler)
    assert pooler.alive()
