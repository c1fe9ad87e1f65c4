"""Pin without starving, the default in transaction mode for what cannot move to another server
(session advisory locks, temp tables, WITH HOLD cursors; SQL PREPARE is kept, LISTEN is relayed by
default, test_listen_relay.py, and pins under listen:pin): the owner keeps its
server across transactions, a pool never pins its last session_state_pin_reserve servers (the
statement that would is refused with 0A000 and a hint), and a client that releases everything is
unpinned."""

from __future__ import annotations

import select
import threading
import time

import psycopg
import psycopg.errors
import pytest

import harness


def pid_of(conn) -> int:
    return conn.execute("SELECT pg_backend_pid()").fetchone()[0]


def pin_when_free(conn, sql: str, timeout: float = 5) -> None:
    """Runs a statement that pins, retrying while the pool's pin is still taken (0A000)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute(sql)
            return
        except psycopg.errors.FeatureNotSupported:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class Noise:
    """Clients running short transactions; records the slowest one."""

    def __init__(self, pooler, clients: int = 3):
        self.stop = threading.Event()
        self.slowest = 0.0
        self.count = 0
        self.errors: list[BaseException] = []
        self.running = threading.Semaphore(0)  # one release per client's first answered query
        self.threads = [threading.Thread(target=self.run, args=(pooler,)) for _ in range(clients)]

    def run(self, pooler) -> None:
        first = True
        try:
            with pooler.connect(autocommit=True) as c:
                while not self.stop.is_set():
                    start = time.monotonic()
                    c.execute("SELECT pg_sleep(0.002)")
                    self.slowest = max(self.slowest, time.monotonic() - start)
                    self.count += 1
                    if first:
                        self.running.release()
                        first = False
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)
            if first:
                self.running.release()

    def __enter__(self):
        for t in self.threads:
            t.start()
        # The noise must be running before the test's own client acts: on a loaded machine the
        # test's few queries can otherwise finish before a noise client has logged in (CI, stop 35).
        for _ in self.threads:
            assert self.running.acquire(timeout=30), "a noise client did not get a query answered"
        assert not self.errors, self.errors
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)
        assert not self.errors, self.errors
        assert self.count > 0


@pytest.fixture
def pooler(make_pooler):
    return make_pooler(default_pool_size=2, admin_users="app")


def test_advisory_lock_holds_across_the_owners_transactions(pooler):
    with Noise(pooler) as noise, pooler.connect(autocommit=True) as a:
        a.execute("SELECT pg_advisory_lock(41)")
        pid = pid_of(a)
        for _ in range(20):
            assert pid_of(a) == pid
            assert a.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                             "AND pid = pg_backend_pid()").fetchone()[0] == 1
        a.execute("SELECT pg_advisory_unlock(41)")
        a.execute("SELECT 1")  # the pin check after the unlock answers while a is still here
    assert noise.slowest < 1.0, noise.slowest
    assert pooler.wait_for_log(r"pinned to S-"), pooler.log()
    assert pooler.wait_for_log(r"unpinned from S-.*holds nothing"), pooler.log()


def test_the_last_server_is_never_pinned(make_pooler):
    # A pool of 2 with the default reserve of 1: one pin is given, the second waits for one
    # up to query_wait_timeout and is then refused, and the other clients are still served
    # within a second meanwhile.
    pooler = make_pooler(default_pool_size=2, admin_users="app", query_wait_timeout=2)
    with Noise(pooler) as noise, pooler.connect(autocommit=True) as a, \
            pooler.connect(autocommit=True) as b:
        a.execute("SELECT pg_advisory_lock(42)")
        started = time.monotonic()
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            b.execute("CREATE TEMP TABLE t_b (x int)")
        assert 1.5 < time.monotonic() - started < 10
        assert "session_state_pin_reserve" in str(e.value), str(e.value)
        assert "ON COMMIT DROP" in (e.value.diag.message_hint or "")
        assert "session-mode pool" in (e.value.diag.message_hint or "")
        assert e.value.diag.context is None, e.value.diag.context  # not the pooler's DO block
        # b is not broken: its next statements run.
        assert b.execute("SELECT 1").fetchone()[0] == 1
        # Released by a: b may pin now.
        a.execute("SELECT pg_advisory_unlock(42)")
        assert a.execute("SELECT 1").fetchone()[0] == 1  # the boundary where the check runs
        pin_when_free(b, "CREATE TEMP TABLE t_b (x int)")
        pid = pid_of(b)
        b.execute("INSERT INTO t_b VALUES (1)")
        assert pid_of(b) == pid
        assert b.execute("SELECT count(*) FROM t_b").fetchone()[0] == 1
        b.execute("DROP TABLE t_b")
    assert noise.slowest < 1.0, noise.slowest
    rc, out, err = pooler.psql("SHOW LEAKS", db="pgsluice")
    assert "temp_object|t_b|definite|reject" in out, out
    # Counted once, at its refusal, not at every retry during its two seconds of waiting.
    rejects = [row.split("|") for row in out.splitlines()
               if row.startswith("temp_object|t_b|definite|reject|")]
    assert [row[9] for row in rejects] == ["1"], out


def test_a_pool_no_larger_than_its_reserve_refuses_at_once(make_pooler):
    # A pool of 1 with the default reserve of 1 never has a server to pin: the statement is
    # refused at once, not after query_wait_timeout (it used to wait the full two minutes),
    # whether it comes as a Query or as a Parse of its own, and the client goes on.
    pooler = make_pooler(default_pool_size=1)
    with pooler.connect(autocommit=True) as a:
        for run in (lambda: a.execute("SELECT pg_advisory_lock(45)"),
                    lambda: a.execute("SELECT pg_advisory_lock(%s)", (45,), prepare=True)):
            started = time.monotonic()
            with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
                run()
            assert time.monotonic() - started < 5
            assert "session_state_pin_reserve" in str(e.value), str(e.value)
            assert a.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                             ).fetchone()[0] == 0
        assert a.execute("SELECT 1").fetchone()[0] == 1


class InBackground:
    """Runs fn() in a thread: a statement that waits for a pin while the test goes on."""

    def __init__(self, fn):
        self.done = threading.Event()
        self.errors: list[BaseException] = []

        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported by join()
                self.errors.append(e)
            self.done.set()

        self.thread = threading.Thread(target=run)
        self.thread.start()

    def join(self, what: str) -> None:
        assert self.done.wait(10), what
        self.thread.join()
        assert not self.errors, self.errors


def test_a_statement_that_needs_a_pin_waits_for_one(pooler):
    # Issue 42, part 3: while the pool's one pin is taken, CREATE TEMP TABLE waits (counted as a
    # waiting client in SHOW POOLS) instead of being refused, and runs once the pin is free;
    # the other clients are served meanwhile.
    with Noise(pooler) as noise, pooler.connect(autocommit=True) as a, \
            pooler.connect(autocommit=True) as b:
        a.execute("SELECT pg_advisory_lock(43)")
        waiter = InBackground(lambda: b.execute("CREATE TEMP TABLE t_wait (x int)"))
        waiting = harness.wait_until(lambda: int(pool_row(pooler)["cl_waiting"]) >= 1, 5)
        assert waiting, pool_row(pooler)
        assert not waiter.done.is_set()
        a.execute("SELECT pg_advisory_unlock(43)")
        a.execute("SELECT 1")  # the boundary where the pin check runs and unpins a
        waiter.join("the statement did not run once the pin was free")
        pid = pid_of(b)
        b.execute("INSERT INTO t_wait VALUES (1)")
        assert pid_of(b) == pid
        b.execute("DROP TABLE t_wait")
    assert noise.slowest < 1.0, noise.slowest


def test_a_pin_inside_a_transaction_block_waits_with_its_server(pooler):
    # BEGIN; DECLARE … WITH HOLD while the pool's one pin is taken: the client keeps its server
    # (its transaction is open) and waits for the pin, as the regression suite's portals test
    # does at a pool of 4.
    with Noise(pooler) as noise, pooler.connect(autocommit=True) as a, \
            pooler.connect(autocommit=True) as b:
        a.execute("SELECT pg_advisory_lock(44)")
        rows = []

        def declare():
            with b.transaction():
                b.execute("DECLARE held_c CURSOR WITH HOLD FOR SELECT generate_series(1, 3)")
            rows.extend(r[0] for r in b.execute("FETCH ALL FROM held_c").fetchall())
            b.execute("CLOSE held_c")

        waiter = InBackground(declare)
        time.sleep(0.6)
        assert not waiter.done.is_set()
        a.execute("SELECT pg_advisory_unlock(44)")
        a.execute("SELECT 1")
        waiter.join("the DECLARE did not run once the pin was free")
        assert rows == [1, 2, 3]
    assert noise.slowest < 1.0, noise.slowest


def pool_row(pooler) -> dict:
    rc, out, err = pooler.psql("SHOW POOLS", db="pgsluice",
                               args=["-P", "tuples_only=off", "-P", "footer=off"])
    assert rc == 0, err
    header, *rows = out.splitlines()
    return dict(zip(header.split("|"), [r for r in rows if r.startswith("app|app|")][0]
                    .split("|")))


def test_a_try_lock_that_takes_nothing_is_answered_not_refused(pooler):
    # Two application instances take a migration lock with pg_try_advisory_lock at a pool of 2:
    # the first holds it (pinned: the pool's one pin), the second is answered `false`, as by
    # PostgreSQL, not refused, and its server is not kept pinned. Issue 42, part 3.
    with Noise(pooler) as noise, pooler.connect(autocommit=True) as a, \
            pooler.connect(autocommit=True) as b:
        assert a.execute("SELECT pg_try_advisory_lock(7001)").fetchone()[0] is True
        for _ in range(3):
            assert b.execute("SELECT pg_try_advisory_lock(7001)").fetchone()[0] is False
            assert b.execute("SELECT 1").fetchone()[0] == 1  # the pin check has run before
        # b holds nothing: it is not pinned, and a's lock still is.
        rc, out, err = pooler.psql("SHOW POOLS", db="pgsluice",
                                   args=["-P", "tuples_only=off", "-P", "footer=off"])
        assert rc == 0, err
        header, *rows = out.splitlines()
        row = dict(zip(header.split("|"), [r for r in rows if r.startswith("app|app|")][0]
                       .split("|")))
        assert row.get("sv_pinned", "1") == "1", row
        # A try lock that is granted while the reserve is reached is PostgreSQL's `true`: the
        # lock is the client's, so its server stays with it.
        assert b.execute("SELECT pg_try_advisory_lock(7002)").fetchone()[0] is True
        pid = pid_of(b)
        for _ in range(5):
            assert pid_of(b) == pid
        b.execute("SELECT pg_advisory_unlock(7002)")
        b.execute("SELECT 1")
        a.execute("SELECT pg_advisory_unlock(7001)")
        a.execute("SELECT 1")
    assert noise.slowest < 1.0, noise.slowest
    assert "would pin" not in pooler.log()


def test_temp_table_and_hold_cursor_work_across_transactions(pooler):
    with Noise(pooler, clients=2), pooler.connect(autocommit=True) as a:
        a.execute("CREATE TEMP TABLE scratch (x int)")
        a.execute("INSERT INTO scratch SELECT generate_series(1, 5)")
        a.execute("BEGIN")
        a.execute("DECLARE c CURSOR WITH HOLD FOR SELECT x FROM scratch ORDER BY x")
        a.execute("COMMIT")
        assert a.execute("FETCH 2 FROM c").fetchall() == [(1,), (2,)]
        assert a.execute("FETCH 2 FROM c").fetchall() == [(3,), (4,)]
        a.execute("CLOSE c")
        assert "unpinned" not in pooler.log()  # the temp table still holds it
        a.execute("DROP TABLE scratch")
        # DROP is not a statement the checks follow: the pin is checked again within a second.
        time.sleep(1.1)
        a.execute("SELECT 1")
        assert pooler.wait_for_log(r"unpinned from S-"), pooler.log()


def test_listen_receives_notifications_while_idle(pg, pooler):
    with pooler.connect(autocommit=True) as listener, Noise(pooler, clients=2):
        listener.execute("LISTEN jobs")
        for n in range(3):
            pg.psql(f"NOTIFY jobs, 'job {n}'", db="app")
        got: list[str] = []
        listener.add_notify_handler(lambda n: got.append(n.payload))
        # Idle: the notifications reach the client's socket without a query of its own.
        deadline = time.monotonic() + 5
        while len(got) < 3 and time.monotonic() < deadline:
            readable, _, _ = select.select([listener.fileno()], [], [], 0.5)
            if readable:
                listener.execute("SELECT 1")  # psycopg reads what arrived
        assert got == ["job 0", "job 1", "job 2"]


def test_a_pin_is_given_back_when_the_client_leaves(pooler):
    with pooler.connect(autocommit=True) as a:
        a.execute("SELECT pg_advisory_lock(43)")
    # a's pin went with it: b can take the one pin the pool gives.
    with pooler.connect(autocommit=True) as b:
        pin_when_free(b, "SELECT pg_advisory_lock(44)")


def test_reserve_zero_lets_every_server_be_pinned(make_pooler):
    pooler = make_pooler(default_pool_size=2, session_state_pin_reserve=0)
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        a.execute("SELECT pg_advisory_lock(45)")
        b.execute("SELECT pg_advisory_lock(46)")
        assert pid_of(a) != pid_of(b)


def test_show_clients_and_servers_say_who_is_pinned_and_why(pooler):
    def column(subject: str, name: str) -> list[str]:
        rc, out, err = pooler.psql(f"SHOW {subject}", db="pgsluice",
                                   args=["-F", "\t", "-P", "tuples_only=off", "-P", "footer=off"])
        assert rc == 0, err
        header, *lines = out.splitlines()
        at = header.split("\t").index("pinned_for")
        return [line.split("\t")[at] for line in lines if line.split("\t")[2] == name]

    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        a.execute("SELECT pg_advisory_lock(43)")
        b.execute("SELECT 1")
        # pinned_for, pgsluice's column after PgBouncer's: a's row and its server's, not b's.
        assert sorted(column("CLIENTS", "app")) == ["", "advisory_lock pg_advisory_lock"], \
            column("CLIENTS", "app")
        assert "advisory_lock pg_advisory_lock" in column("SERVERS", "app")
        a.execute("SELECT pg_advisory_unlock(43)")
        a.execute("SELECT 1")  # the boundary where the pin check runs
        deadline = time.monotonic() + 5
        while any(column("SERVERS", "app")) and time.monotonic() < deadline:
            a.execute("SELECT 1")
            time.sleep(0.1)
        assert column("CLIENTS", "app") == ["", ""]
        assert not any(column("SERVERS", "app"))




def test_a_prepared_advisory_lock_pins_at_every_execution(make_pooler):
    # asyncpg (as pgjdbc) binds a statement it prepared once again in later transactions, maybe
    # on another server than its Parse's: that execution pins its server too (before, only the
    # Parse's transaction was checked, and a lock a later Bind took stayed on a server shared
    # with everyone).
    import asyncio

    import asyncpg

    pooler = make_pooler(default_pool_size=2, admin_users="app")

    async def run() -> None:
        a = await asyncpg.connect(host="127.0.0.1", port=pooler.port, user="app",
                                  password="app", database="app")
        lock = "SELECT pg_advisory_lock($1)"
        held_count = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' " \
                     "AND pid = pg_backend_pid()"
        try:
            await a.execute("SELECT 1")
            await a.fetchval(lock, 61)
            first = await a.fetchval("SELECT pg_backend_pid()")
            await a.fetchval("SELECT pg_advisory_unlock($1)", 61)
            await a.execute("SELECT 1")  # the boundary where the pin check runs: unpinned
            assert pooler.wait_for_log(r"unpinned from S-"), pooler.log()
            # Holders take a's server and leave it the other one (a pool of 2: on whichever
            # worker the holders are, the other server is the only one a's worker can get).
            with pooler.connect() as h1, pooler.connect() as h2:
                held = [h1]
                if pid_of(h1) != first:
                    pid_of(h2)
                    held.append(h2)
                    h1.rollback()
                    held.remove(h1)
                await a.fetchval(lock, 61)  # a Bind of the statement prepared above
                second = await a.fetchval("SELECT pg_backend_pid()")
                for h in held:
                    h.rollback()
                assert second != first, "the holders did not move the client"
                for _ in range(5):
                    assert await a.fetchval("SELECT pg_backend_pid()") == second
                    assert await a.fetchval(held_count) == 1
                # Anyone else gets the other server: the locked one is pinned to its owner.
                assert pid_of(h1) != second
                h1.rollback()
            await a.fetchval("SELECT pg_advisory_unlock($1)", 61)
        finally:
            await a.close()

    asyncio.run(run())
    assert pooler.log().count("(advisory_lock pg_advisory_lock, under the pin action)") == 2, \
        pooler.log()[-3000:]


def test_pool_and_metrics_count_pinned_servers_and_each_release_unpins(make_pooler):
    # SHOW POOLS sv_pinned and /metrics' pgsluice_pool_sv_pinned say how many servers are
    # pinned, the findings counter why; each thing that releases what pinned (DISCARD ALL, CLOSE
    # of the last WITH HOLD cursor, DROP of the last temp table, unlock) unpins.
    import urllib.request

    from harness import free_port

    mport = free_port()
    pooler = make_pooler(default_pool_size=2, admin_users="app", metrics_port=mport)

    def sv_pinned() -> tuple[int, int]:
        rc, out, err = pooler.psql("SHOW POOLS", db="pgsluice",
                                   args=["-F", "\t", "-P", "tuples_only=off", "-P", "footer=off"])
        assert rc == 0, err
        header, *lines = out.splitlines()
        at = header.split("\t").index("sv_pinned")
        shown = sum(int(line.split("\t")[at]) for line in lines if line.split("\t")[0] == "app")
        body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read()
        metric = [line for line in body.decode().splitlines()
                  if line.startswith('pgsluice_pool_sv_pinned{database="app",user="app"}')]
        assert len(metric) == 1, body
        return shown, int(metric[0].split()[-1])

    def unpinned_after(a, release: str) -> None:
        a.execute(release)
        deadline = time.monotonic() + 5
        while sv_pinned() != (0, 0) and time.monotonic() < deadline:
            a.execute("SELECT 1")  # the boundary where the pin check runs
            time.sleep(0.1)
        assert sv_pinned() == (0, 0), release

    pins = [("SELECT pg_advisory_lock(47)", "SELECT pg_advisory_unlock(47)"),
            ("SELECT pg_advisory_lock(48)", "DISCARD ALL"),
            ("DECLARE c CURSOR WITH HOLD FOR SELECT 1", "CLOSE c"),
            ("CREATE TEMP TABLE pinned_t (x int)", "DROP TABLE pinned_t"),
            ("CREATE TEMP TABLE pinned_u (x int)", "DISCARD ALL")]
    with Noise(pooler, clients=2), pooler.connect(autocommit=True) as a:
        assert sv_pinned() == (0, 0)
        for pin, release in pins:
            a.execute(pin)
            assert sv_pinned() == (1, 1), pin
            unpinned_after(a, release)
    body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read().decode()
    for kind, count in (("advisory_lock", 2), ("hold_cursor", 1), ("temp_object", 2)):
        assert (f'pgsluice_session_state_findings_total{{kind="{kind}",action="pin",'
                f'database="app",user="app"}} {count}') in body, body


def test_load_pins_and_its_server_is_closed_after(pg, pooler):
    # LOAD cannot be undone: the client keeps its server, and the server is closed when the
    # client leaves rather than serving anyone with the library loaded. LOAD of a library
    # outside $libdir/plugins needs a superuser: scramuser, for this test.
    pg.psql("ALTER ROLE scramuser SUPERUSER")
    try:
        with Noise(pooler, clients=2) as noise, \
                pooler.connect(user="scramuser", password="scrampass", autocommit=True) as a:
            a.execute("LOAD 'auto_explain'")
            pid = pid_of(a)
            for _ in range(10):
                assert pid_of(a) == pid
            assert a.execute("SHOW auto_explain.log_min_duration").fetchone()[0] == "-1"
        assert noise.slowest < 1.0, noise.slowest
        assert pooler.wait_for_log(r"closing because: LOAD cannot be undone"), pooler.log()
        assert harness.wait_until(lambda: pg.psql(
            f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}") == "0", 5)
    finally:
        pg.psql("ALTER ROLE scramuser NOSUPERUSER")


def test_setseed_pins_and_its_server_is_closed_after(pg, pooler):
    # setseed() fixes the session's random() sequence and nothing resets it: the client keeps its
    # server, so its random() goes on from its seed exactly as on a direct connection, and the
    # server is closed when the client leaves rather than handing the seeded sequence on.
    with pg.connect(db="app") as direct:
        direct.execute("SELECT setseed(0.25)")
        expected = [direct.execute("SELECT random()").fetchone()[0] for _ in range(5)]
    with Noise(pooler, clients=2) as noise, pooler.connect(autocommit=True) as a:
        a.execute("SELECT setseed(0.25)")
        pid = pid_of(a)
        got = []
        for _ in range(5):
            got.append(a.execute("SELECT random()").fetchone()[0])
            assert pid_of(a) == pid
    assert got == expected, (got, expected)
    assert noise.slowest < 1.0, noise.slowest
    assert pooler.wait_for_log(r"closing because: setseed cannot be undone"), pooler.log()
    assert harness.wait_until(lambda: pg.psql(
        f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}") == "0", 5)
