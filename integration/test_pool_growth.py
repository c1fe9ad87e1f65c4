"""How a pool grows: as PgBouncer, one server login at a time while clients wait, not one per
waiting client. A slow PostgreSQL login (a delaying TCP relay the test puts in front of the
cluster) makes the logins in flight countable."""

from __future__ import annotations

import socket
import threading
import time

import psycopg
import pytest

import harness
from harness import wait_until


class SlowLoginRelay(threading.Thread):
    """A loopback TCP relay to PostgreSQL that holds every new connection `delay` seconds before
    relaying it, and records how many were held at once (logins in flight at the pooler)."""

    def __init__(self, pg_port: int, delay: float):
        super().__init__(daemon=True)
        self.pg_port = pg_port
        self.delay = delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.held = 0
        self.max_held = 0
        self.accepted = 0
        self._closing = False

    def run(self):
        while not self._closing:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket):
        with self.lock:
            self.accepted += 1
            self.held += 1
            self.max_held = max(self.max_held, self.held)
        time.sleep(self.delay)
        with self.lock:
            self.held -= 1
        try:
            upstream = socket.create_connection(("127.0.0.1", self.pg_port))
        except OSError:
            conn.close()
            return
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self._closing = True
        self.listener.close()


def test_one_login_at_a_time_while_clients_wait(pg, make_pooler):
    relay = SlowLoginRelay(pg.port, delay=0.3)
    relay.start()
    try:
        # One login at a time for the pool, whichever worker's clients wait (the count is one
        # for the process, as PgBouncer's is one for its pool): two workers at least, whatever
        # PGSLUICE_TEST_WORKERS says.
        pooler = make_pooler(
            databases={"app": f"host=127.0.0.1 port={relay.port} dbname=app"},
            default_pool_size=10, workers=max(2, harness.DEFAULT_WORKERS))
        # The first client gets its greeting from the first server.
        with pooler.connect() as first:
            first.execute("SELECT 1")
        assert relay.accepted == 1

        # Six clients, each holding a server for a while, at once: five of them wait. An eager
        # pool would start five logins at once; PgBouncer starts one and the next when it is done.
        errors: list[Exception] = []

        def client():
            try:
                with pooler.connect() as conn:
                    conn.execute("SELECT pg_sleep(0.5)")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        assert relay.max_held == 1, (relay.max_held, relay.accepted)
        # The pool did grow for the waiting clients (one login after the other), not only reuse.
        assert relay.accepted >= 3, relay.accepted
        assert relay.accepted <= 7, relay.accepted
    finally:
        relay.close()


@pytest.mark.parametrize("workers", [harness.DEFAULT_WORKERS, 3])
def test_idle_clients_do_not_open_a_server_each(pg, make_pooler, workers):
    # 200 clients that connect, run one short query each, one after another, and stay connected
    # need one server, not one per client, and not one per worker: a released server is reused,
    # by whichever worker the next client landed on (one pool per process: below the pool's
    # size a worker asks the others for an idle server before it logs in; at 3 workers the ask
    # may pass through a worker that has none).
    pooler = make_pooler(default_pool_size=50, workers=workers)
    conns = []
    try:
        for _ in range(200):
            conn = psycopg.connect(pooler.dsn(), autocommit=True)
            conn.execute("SELECT 1")
            conns.append(conn)
        assert wait_until(lambda: len(pg.server_backends()) >= 1, 5)
        assert len(pg.server_backends()) == 1, pg.server_backends()
    finally:
        for c in conns:
            c.close()


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_pool_of_one_serves_sequential_clients_on_every_worker_with_one_backend(
        pg, make_pooler, workers):
    # default_pool_size = 1 at one worker (the default on a 2-core machine), two and three: the
    # clients land on the workers in turn, and the one server goes to whichever worker the
    # current client is on. A pool per worker would close it and log in a new one for nearly
    # every client.
    pooler = make_pooler(default_pool_size=1, workers=workers)
    pids = []
    for _ in range(40):
        with psycopg.connect(pooler.dsn(), autocommit=True) as conn:
            pids.append(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    assert len(set(pids)) == 1, pids
    assert [pid for pid, _, _ in pg.server_backends()] == pids[:1]


def test_a_server_follows_clients_between_workers_in_a_transaction_pool(pg, make_pooler):
    # Clients on both workers, taking turns (nobody waits long): the servers move to where the
    # next transaction is, and no transaction gets a new backend while the pool has an idle one.
    pooler = make_pooler(default_pool_size=2, workers=2)
    conns = [psycopg.connect(pooler.dsn(), autocommit=True) for _ in range(8)]
    try:
        pids = set()
        for _ in range(25):
            for c in conns:
                pids.add(c.execute("SELECT pg_backend_pid()").fetchone()[0])
        # One transaction at a time: one server serves them all.
        assert len(pids) == 1, pids
        # Two at a time, on different workers: two servers at most, never a third login.
        for _ in range(10):
            for a, b in zip(conns[0::2], conns[1::2]):
                a.execute("BEGIN")
                b.execute("BEGIN")
                pids.add(a.execute("SELECT pg_backend_pid()").fetchone()[0])
                pids.add(b.execute("SELECT pg_backend_pid()").fetchone()[0])
                a.execute("COMMIT")
                b.execute("COMMIT")
        assert len(pids) == 2, pids
        assert len(pg.server_backends()) == 2
    finally:
        for c in conns:
            c.close()
