"""A cancel request that reaches PostgreSQL late must not cancel the next client's query.

pgsluice sends a client's CancelRequest to PostgreSQL on a connection of its own. If the
server's query ends before every such request has landed (many requests, or a slow path to
PostgreSQL), the server goes back to the pool and the next client's query may be the one a late
request cancels. PgBouncer keeps such a server out of the pool until its cancel requests are done
(sv_being_canceled); so does pgsluice. Here a relay in front of PostgreSQL delays the cancel
connections, one more step each, so that the requests land one after the other over half a
second: the first cancels the first client's query, the later ones would cancel the second's.
"""

import socket
import threading
import time

import psycopg
import pytest

import harness

STEP_S = 0.1
CANCELS = 5


class DelayingRelay:
    """TCP relay to PostgreSQL. Connections made after arm() wait k * STEP_S (k = 1, 2, …)
    before they are connected through; earlier ones (the pool's server logins) flow at once."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((harness.HOST, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.armed = False
        self.delayed = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self) -> None:
        self.armed = True

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.sock.accept()
            except OSError:
                return
            delay = 0.0
            if self.armed:
                with self.lock:
                    self.delayed += 1
                    delay = self.delayed * STEP_S
            threading.Thread(target=self._serve, args=(down, delay), daemon=True).start()

    def _serve(self, down: socket.socket, delay: float) -> None:
        time.sleep(delay)
        up = socket.create_connection((harness.HOST, self.target_port), timeout=10)
        for a, b in ((down, up), (up, down)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


def console_while(t1, t2, pooler) -> set:
    """Polls SHOW SERVERS and SHOW POOLS until both threads end: the (server state,
    sv_being_canceled) pairs seen."""
    seen = set()
    with psycopg.connect(pooler.dsn(db="pgbouncer"), autocommit=True) as console:
        while t1.is_alive() or t2.is_alive():
            cur = console.execute("SHOW SERVERS")
            names = [d.name for d in cur.description]
            states = [row[names.index("state")] for row in cur.fetchall()
                      if row[names.index("database")] == "app"]
            cur = console.execute("SHOW POOLS")
            names = [d.name for d in cur.description]
            held = sum(row[names.index("sv_being_canceled")] for row in cur.fetchall()
                       if row[names.index("database")] == "app")
            for state in states:
                seen.add((state, held))
            time.sleep(0.02)
        t1.join(15)
        t2.join(15)
    return seen


def test_a_late_cancel_does_not_reach_the_next_clients_query(make_pooler, pg):
    relay = DelayingRelay(pg.port)
    try:
        pooler = make_pooler(
            databases={"app": f"host=127.0.0.1 port={relay.port} dbname=app"},
            pool_mode="transaction", default_pool_size=1, admin_users="app")
        # Accepted one after the other, the two clients are on different workers: the server,
        # held until its cancels are done, then moves to the second's worker.
        first = pooler.connect(autocommit=True)
        second = pooler.connect(autocommit=True)
        # One server for both clients: the second's query waits for the first's.
        assert first.execute("SELECT 1").fetchone() == (1,)
        relay.arm()
        results = {}

        def run(name, conn, sql):
            try:
                conn.execute(sql)
                results[name] = "ok"
            except psycopg.Error as e:
                results[name] = e.sqlstate

        t1 = threading.Thread(target=run, args=("first", first, "SELECT pg_sleep(5)"))
        t1.start()
        time.sleep(0.5)
        t2 = threading.Thread(target=run, args=("second", second, "SELECT pg_sleep(1)"))
        t2.start()
        time.sleep(0.3)
        for _ in range(CANCELS):
            first.cancel()  # each returns once pgsluice has the request
        # While held, the console shows the server as PgBouncer does: its own state and list.
        held = console_while(t1, t2, pooler)
        assert results.get("first") == "57014", results
        # Without the hold, the requests landing at 0.2 .. 0.5 s cancel this one.
        assert results.get("second") == "ok", results
        assert ("being_canceled", 1) in held, held
        assert relay.delayed == CANCELS, relay.delayed
        # Both clients and the one server are fine afterwards.
        assert first.execute("SELECT 2").fetchone() == (2,)
        assert second.execute("SELECT 3").fetchone() == (3,)
        first.close()
        second.close()
    finally:
        relay.close()
