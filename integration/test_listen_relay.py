"""The relay action for LISTEN, the default in transaction mode (#18): one listener connection per
pool runs every client's LISTEN and relays each notification to every client of the pool that
listens on its channel, idle clients included, in order; LISTEN/UNLISTEN keep PostgreSQL's
answers and transaction semantics; a lost listener reconnects and says so with a NOTICE; a client
that does not read is closed at its queue's bound while the others keep receiving. Run at the
defaults (no session_state_action line), a pool of 2, with noise clients so that a listening
client's transactions run on different servers."""

from __future__ import annotations

import select
import time

import psycopg
import pytest

import harness
from test_keep_settings import Hopper
from test_pin import Noise


@pytest.fixture
def pooler(make_pooler):
    return make_pooler(default_pool_size=2, admin_users="app")


def pid_of(conn) -> int:
    return conn.execute("SELECT pg_backend_pid()").fetchone()[0]


def collect(conn, count: int, timeout: float = 5.0) -> list[psycopg.Notify]:
    """Notifications that reach an idle client, without a query of its own until they came."""
    got: list[psycopg.Notify] = []
    handler = got.append
    conn.add_notify_handler(handler)
    try:
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            readable, _, _ = select.select([conn.fileno()], [], [], 0.2)
            if readable:
                conn.execute("SELECT 1")  # psycopg reads what arrived
    finally:
        conn.remove_notify_handler(handler)
    return got


def quiet(conn, wait: float = 0.5) -> list[psycopg.Notify]:
    """What arrives within `wait` seconds (nothing, where a test expects nothing)."""
    got: list[psycopg.Notify] = []
    conn.add_notify_handler(got.append)
    time.sleep(wait)
    conn.execute("SELECT 1")
    return got


def listener_rows(pooler) -> list[list[str]]:
    rc, out, err = pooler.psql("SHOW SERVERS", db="pgsluice", args=["-F", "\t"])
    assert rc == 0, err
    return [line.split("\t") for line in out.splitlines() if line.split("\t")[-1] == "1"]


def test_idle_listeners_receive_notifications_in_order(pooler):
    with Noise(pooler, clients=3), pooler.connect(autocommit=True) as a, \
            pooler.connect(autocommit=True) as b, pooler.connect(autocommit=True) as sender:
        a.execute("LISTEN jobs")
        b.execute("LISTEN jobs")
        b.execute('LISTEN "Other"')
        pids = {pid_of(a) for _ in range(20)}
        sender_pid = pid_of(sender)
        for n in range(20):
            sender.execute(f"NOTIFY jobs, 'job {n}'")
        sender.execute("SELECT pg_notify('Other', 'mixed case')")
        got_a = collect(a, 20)
        got_b = collect(b, 21)
        assert [n.payload for n in got_a] == [f"job {n}" for n in range(20)]
        assert {n.pid for n in got_a} <= {sender_pid} | set(pids), got_a
        assert [(n.channel, n.payload) for n in got_b] == \
            [("jobs", f"job {n}") for n in range(20)] + [("Other", "mixed case")]
        # The pool's servers never keep a LISTEN: only the listener does.
        for _ in range(4):
            assert sender.execute("SELECT count(*) FROM pg_listening_channels()").fetchone()[0] == 0
        # LISTEN is answered as PostgreSQL answers it, and a client sees its own channels.
        cur = a.execute("LISTEN jobs")
        assert cur.statusmessage == "LISTEN"
    rows = listener_rows(pooler)
    assert len(rows) == 1, rows
    assert pooler.wait_for_log(r"is the LISTEN relay's listener"), pooler.log()
    assert "pinned to" not in pooler.log()
    rc, out, err = pooler.psql("SHOW LEAKS", db="pgsluice")
    assert "listen|jobs|definite|relay" in out, out


def test_a_listener_whose_transactions_hop_between_servers_receives_everything(make_pooler):
    # One worker, so that holders can make the client's transactions alternate (Hopper).
    pooler = make_pooler(default_pool_size=2, admin_users="app", workers=1)
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as sender:
        a.hopper = Hopper(pooler)
        got: list[str] = []
        a.add_notify_handler(lambda n: got.append(n.payload))  # psycopg drops unhandled ones
        try:
            a.execute("LISTEN hops")
            pids = set()
            for n in range(10):
                pids.add(a.hopper.run(a, "SELECT pg_backend_pid()")[0])
                # Again, on whichever server: still one channel.
                a.hopper.run(a, "SELECT pg_backend_pid(); LISTEN hops")
                sender.execute(f"NOTIFY hops, '{n}'")
            assert len(pids) == 2, pids
            deadline = time.monotonic() + 5
            while len(got) < 10 and time.monotonic() < deadline:
                select.select([a.fileno()], [], [], 0.2)
                a.execute("SELECT 1")
            assert got == [str(n) for n in range(10)]
            a.hopper.run(a, "SELECT pg_backend_pid(); UNLISTEN hops")
            sender.execute("NOTIFY hops, 'gone'")
            time.sleep(0.5)
            a.execute("SELECT 1")
            assert got == [str(n) for n in range(10)]
        finally:
            a.hopper.close()


def test_a_notify_after_the_listens_ready_for_query_always_arrives(pooler):
    # Causality: the listener LISTENs before the client's ReadyForQuery, every time.
    with Noise(pooler, clients=2), pooler.connect(autocommit=True) as sender:
        for n in range(10):
            with pooler.connect(autocommit=True) as c:
                c.execute(f"LISTEN fresh_{n}")
                sender.execute(f"NOTIFY fresh_{n}, 'hello'")
                got = collect(c, 1)
                assert [x.payload for x in got] == ["hello"], n


def test_rolled_back_listens_do_not_stick(pooler):
    with Noise(pooler, clients=2), pooler.connect(autocommit=True) as a, \
            pooler.connect(autocommit=True) as sender:
        a.execute("BEGIN")
        a.execute("LISTEN rolled_back")
        a.execute("ROLLBACK")
        a.execute("BEGIN")
        a.execute("SAVEPOINT s")
        a.execute("LISTEN after_savepoint")
        a.execute("ROLLBACK TO SAVEPOINT s")
        a.execute("LISTEN kept_in_tx")
        a.execute("COMMIT")
        with pytest.raises(psycopg.errors.DivisionByZero):
            a.execute("LISTEN undone_by_error; SELECT 1/0")
        for channel in ("rolled_back", "after_savepoint", "undone_by_error", "kept_in_tx"):
            sender.execute(f"NOTIFY {channel}, '{channel}'")
        got = collect(a, 1)
        assert [n.channel for n in got] == ["kept_in_tx"]
        assert quiet(a) == []


def test_unlisten_and_discard_all_stop_delivery(pooler):
    with Noise(pooler, clients=2), pooler.connect(autocommit=True) as a, \
            pooler.connect(autocommit=True) as sender:
        a.execute("LISTEN one")
        a.execute("LISTEN two")
        a.execute("LISTEN three")
        a.execute("UNLISTEN one")
        sender.execute("NOTIFY one, 'x'")
        sender.execute("NOTIFY two, 'y'")
        assert [n.channel for n in collect(a, 1)] == ["two"]
        # An UNLISTEN that rolls back keeps the channel.
        a.execute("BEGIN")
        a.execute("UNLISTEN two")
        a.execute("ROLLBACK")
        sender.execute("NOTIFY two, 'still'")
        assert [n.payload for n in collect(a, 1)] == ["still"]
        a.execute("UNLISTEN *")
        sender.execute("NOTIFY two, 'gone'")
        sender.execute("NOTIFY three, 'gone'")
        assert quiet(a) == []
        a.execute("LISTEN four")
        a.execute("DISCARD ALL")
        sender.execute("NOTIFY four, 'gone'")
        assert quiet(a) == []


def test_a_notification_in_a_transaction_waits_for_its_end(pooler):
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as sender:
        a.execute("LISTEN later")
        a.execute("BEGIN")
        a.execute("SELECT 1")
        sender.execute("NOTIFY later, 'after commit'")
        got: list[psycopg.Notify] = []
        a.add_notify_handler(got.append)
        time.sleep(0.3)
        a.execute("SELECT 2")
        assert got == []  # PostgreSQL delivers between transactions
        a.execute("COMMIT")
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            select.select([a.fileno()], [], [], 0.2)
            a.execute("SELECT 3")
        assert [n.payload for n in got] == ["after commit"]


def test_a_killed_listener_reconnects_and_says_so(pg, pooler):
    with Noise(pooler, clients=2), pooler.connect(autocommit=True) as a, \
            pooler.connect(autocommit=True) as sender:
        a.execute("LISTEN survives")
        notices: list[str] = []
        a.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        rows = listener_rows(pooler)
        assert len(rows) == 1, rows
        listener_pid = int(rows[0][16])
        pg.psql(f"SELECT pg_terminate_backend({listener_pid})")
        deadline = time.monotonic() + 10
        while not notices and time.monotonic() < deadline:
            select.select([a.fileno()], [], [], 0.2)
            a.execute("SELECT 1")
        assert notices and "may have been missed" in notices[0], notices
        sender.execute("NOTIFY survives, 'after the reconnect'")
        assert [n.payload for n in collect(a, 1)] == ["after the reconnect"]
        rows = listener_rows(pooler)
        assert len(rows) == 1 and int(rows[0][16]) != listener_pid, rows


def test_a_client_that_does_not_read_is_closed_and_others_keep_receiving(make_pooler, pg):
    # At the default session_state_relay_queue (8 MB).
    pooler = make_pooler(default_pool_size=2, admin_users="app")
    with pooler.connect(autocommit=True) as stuck, pooler.connect(autocommit=True) as reader:
        stuck.execute("LISTEN flood")
        reader.execute("LISTEN flood")
        payload = "x" * 500
        total = 60000  # 30 MB: more than the stuck client's socket buffers and its queue
        got: list[str] = []
        reader.add_notify_handler(lambda n: got.append(n.payload))
        start = time.monotonic()
        for part in range(12):
            # Distinct payloads: PostgreSQL folds identical ones of one transaction into one.
            pg.psql(f"SELECT pg_notify('flood', i || '{payload}') "
                    f"FROM generate_series(1, {total // 12}) AS i", db="app")
            while len(got) < (part + 1) * total // 12 and time.monotonic() < start + 60:
                select.select([reader.fileno()], [], [], 0.2)
                reader.execute("SELECT 1")
        assert len(got) == total
        assert pooler.wait_for_log(r"session_state_relay_queue"), pooler.log()
        with pytest.raises(psycopg.OperationalError) as e:
            while True:  # what its socket held first, then the error
                stuck.execute("SELECT 1")
        assert "session_state_relay_queue" in str(e.value), str(e.value)


def test_asyncpg_listener_receives_while_idle(pooler):
    import asyncio

    import asyncpg

    async def main() -> list[tuple[int, str]]:
        kw = dict(host="127.0.0.1", port=pooler.port, user="app", password="app", database="app")
        listener = await asyncpg.connect(**kw)
        sender = await asyncpg.connect(**kw)
        got: list[tuple[int, str]] = []
        await listener.add_listener("apg_jobs", lambda conn, pid, channel, payload:
                                    got.append((pid, payload)))
        sender_pids = set()
        for n in range(10):
            sender_pids.add(await sender.fetchval("SELECT pg_backend_pid()"))
            await sender.execute(f"NOTIFY apg_jobs, '{n}'")
        for _ in range(100):
            if len(got) >= 10:
                break
            await asyncio.sleep(0.05)  # idle: asyncpg only reads
        await listener.close()
        await sender.close()
        assert {pid for pid, _ in got} <= sender_pids | {0}, (got, sender_pids)
        return got

    with Noise(pooler, clients=2):
        got = asyncio.run(main())
    assert [payload for _, payload in got] == [str(n) for n in range(10)]


def test_node_postgres_listener_receives_while_idle(pooler):
    with Noise(pooler, clients=2):
        rc, out, err = harness.run_node("listen_relay.js", str(pooler.port), "10", timeout=60)
    assert rc == 0 and out.strip() == "ok " + ",".join(str(n) for n in range(10)), out + err


def test_pgjdbc_listener_receives_while_idle(pooler, tmp_path):
    with Noise(pooler, clients=2):
        rc, out, err = harness.run_java("ListenThroughPool", str(tmp_path), str(pooler.port),
                                        "10", timeout=120)
    assert rc == 0 and out.strip() == "ok " + ",".join(str(n) for n in range(10)), out + err
