"""Making a client's transactions run on both servers of a pool of 2, at any worker count.

Tests of what follows a client from server to server (kept settings, SQL PREPARE, LISTEN) mean
something only if the client's transactions really change servers. Noise clients do not make
them: a server stays with the worker whose clients use it and moves only when another worker's
clients wait (docs/design.md), so at two workers each worker's clients tend to keep one server.
Holding one server in an open transaction does it at any worker count: the pool has two slots,
so every other client's next transaction runs on the other server, which the pool moves to the
client's worker if it is elsewhere. Both helpers check that it happened (backend pids)."""

from __future__ import annotations

import contextlib
import threading


def backend_pid(conn) -> int:
    """The backend of a connection that is not in autocommit: its transaction stays open."""
    return conn.execute("SELECT pg_backend_pid()").fetchone()[0]


class Holders:
    """Two connections that hold a chosen server of a pool of 2 in an open transaction."""

    def __init__(self, pooler):
        self.conns = [pooler.connect(), pooler.connect()]
        self.held = None  # the connection whose transaction holds the server

    def hold(self, pid: int) -> None:
        """Holds server `pid`. The first holder takes whichever server it gets; when that is the
        other one, the second holder can only get `pid`, and the first lets the other go."""
        first, second = self.conns
        if backend_pid(first) == pid:
            self.held = first
            return
        got = backend_pid(second)
        first.rollback()
        self.held = second
        assert got == pid, f"the holders got {got}, not {pid}: more than two servers?"

    def release(self) -> None:
        if self.held is not None:
            self.held.rollback()
            self.held = None

    def hold_other_than(self, pid: int | None) -> int:
        """Holds a server that is not `pid` (any when None) and returns its pid. Unlike hold(),
        it does not assume the pool's servers stay the same two: the pooler may rightly close
        one (a client that left in a COPY, or during a reply that did not end within 2 s) and
        open another in its place."""
        first, second = self.conns
        got = backend_pid(first)
        if got != pid:
            self.held = first
            return got
        other = backend_pid(second)  # the first holds `pid`: the second gets another server
        first.rollback()
        self.held = second
        return other

    @contextlib.contextmanager
    def holding(self, pid: int):
        self.hold(pid)
        try:
            yield
        finally:
            self.release()

    def close(self) -> None:
        for c in self.conns:
            c.close()


class Hopper:
    """For clients the test drives one transaction at a time: every other transaction of each
    client runs while the holders hold the server its previous one ran on, so it must run on the
    other one, which run() checks (the last column of `sql`'s first row is the backend pid)."""

    def __init__(self, pooler):
        self.holders = Holders(pooler)
        self.clients: dict[int, tuple[int, int]] = {}  # id(connection) -> (turn, last pid)
        self.hops = 0

    def run(self, conn, sql: str):
        key = id(getattr(conn, "conn", conn))  # a wrapper's (test_sql_prepare.Extended)
        turn, last = self.clients.get(key, (0, None))
        if turn % 2 == 1:
            with self.holders.holding(last):
                row = conn.execute(sql).fetchone()
            assert row[-1] != last, f"the transaction ran on {last}, which a holder held"
            self.hops += 1
        else:
            row = conn.execute(sql).fetchone()
        self.clients[key] = (turn + 1, row[-1])
        return row

    def close(self) -> None:
        self.holders.close()


class Rotator:
    """For clients the test does not drive one transaction at a time (node-postgres, pgjdbc,
    concurrent asyncpg tasks): a thread holds the pool's two servers in turn, `phase` seconds
    each, so that every client's transactions run on one and then the other, whatever worker
    each client is on. On exit it checks that it held at least two servers."""

    def __init__(self, pooler, phase: float = 0.2):
        self.holders = Holders(pooler)
        self.phase = phase
        self.held: dict[int, int] = {}  # pid -> phases it was held
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            last = None
            while not self._stop.is_set():
                pid = self.holders.hold_other_than(last)
                try:
                    self.held[pid] = self.held.get(pid, 0) + 1
                    self._stop.wait(self.phase)
                finally:
                    self.holders.release()
                last = pid
        except BaseException as e:  # noqa: BLE001 - reported on exit
            self.errors.append(e)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=30)
        self.holders.close()
        if exc[0] is None:
            assert not self._thread.is_alive(), "the rotator did not stop"
            assert not self.errors, self.errors
            assert len(self.held) >= 2, f"held only {self.held}: the clients did not hop"
        return False
