"""The relay action for LISTEN, the default in transaction mode (#18): one listener connection per
pool runs every client's LISTEN and relays each notification to every client of the pool that
listens on its channel, idle clients included, in order; LISTEN/UNLISTEN keep PostgreSQL's
answers and transaction semantics; a lost listener reconnects and says so with a NOTICE; a client
that does not read is closed at its queue's bound while the others keep receiving. Run at the
defaults (no session_state_action line), a pool of 2, with noise clients so that a listening
client's transactions run on different servers."""

from __future__ import annotations

import select
import struct
import time

import psycopg
import pytest

import harness
from hopping import Hopper
from test_pin import Noise
from test_prepared import SYNC, bind, describe, execute, parse


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
        # Each NOTIFY in a transaction that also reads the sending backend's pid: the pid every
        # notification must carry, as on a direct connection.
        sender_pids = []
        for n in range(20):
            with sender.transaction():
                sender.execute(f"NOTIFY jobs, 'job {n}'")
                sender_pids.append(pid_of(sender))
        sender_pids.append(sender.execute(
            "SELECT pg_backend_pid(), pg_notify('Other', 'mixed case')").fetchone()[0])
        got_a = collect(a, 20)
        got_b = collect(b, 21)
        assert [n.payload for n in got_a] == [f"job {n}" for n in range(20)]
        assert [n.pid for n in got_a] == sender_pids[:20], (got_a, sender_pids)
        assert [(n.channel, n.payload) for n in got_b] == \
            [("jobs", f"job {n}") for n in range(20)] + [("Other", "mixed case")]
        assert [n.pid for n in got_b] == sender_pids, (got_b, sender_pids)
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
    # Holders make the client's transactions alternate between the servers (hopping.Hopper).
    pooler = make_pooler(default_pool_size=2, admin_users="app")
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as sender:
        a.hopper = Hopper(pooler)
        got: list[str] = []
        a.add_notify_handler(lambda n: got.append(n.payload))  # psycopg drops unhandled ones
        try:
            a.execute("LISTEN hops")
            pids = set()
            for n in range(10):
                pids.add(a.hopper.run(a, "SELECT pg_backend_pid()")[0])
                # Again, on the other server: still one channel.
                pids.add(a.hopper.run(a, "SELECT pg_backend_pid(); LISTEN hops")[0])
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
    # Noise clients measure that nobody else is slowed meanwhile.
    pooler = make_pooler(default_pool_size=2, admin_users="app")
    with Noise(pooler, clients=2) as noise, pooler.connect(autocommit=True) as stuck, \
            pooler.connect(autocommit=True) as reader:
        stuck.execute("LISTEN flood")
        reader.execute("LISTEN flood")
        raw_stuck = pooler.raw()  # the error's fields, which psycopg does not keep
        raw_stuck.query("LISTEN flood")
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
        try:
            kind = b"A"
            while kind == b"A":  # the notifications its socket held, then the error
                kind, body = raw_stuck.read_message()
            fields = raw_stuck._fields(body)
            assert (kind, fields["S"], fields["C"]) == (b"E", "FATAL", "54000"), fields
        finally:
            raw_stuck.close()
    assert noise.slowest < 1.0, noise.slowest


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
        sender_pids = []
        for n in range(10):
            async with sender.transaction():  # one server: the pid the notification carries
                await sender.execute(f"NOTIFY apg_jobs, '{n}'")
                sender_pids.append(await sender.fetchval("SELECT pg_backend_pid()"))
        for _ in range(100):
            if len(got) >= 10:
                break
            await asyncio.sleep(0.05)  # idle: asyncpg only reads
        await listener.close()
        await sender.close()
        assert [pid for pid, _ in got] == sender_pids, (got, sender_pids)
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


def replies(raw, messages) -> list[tuple[bytes, object]]:
    """Every message up to ReadyForQuery of what `messages` (or one Query text) asks; an
    ErrorResponse or NoticeResponse as its fields without the source file and line (the same
    server build answers both ways, but the fields are compared as a set)."""
    if isinstance(messages, str):
        raw.send_query(messages)
    else:
        raw.sendall(b"".join(k + struct.pack("!i", len(b) + 4) + b for k, b in messages))
    out = []
    while True:
        kind, body = raw.read_message()
        if kind in (b"E", b"N"):
            fields = raw._fields(body)
            fields.pop("L", None)
            out.append((kind, tuple(sorted(fields.items()))))
        else:
            out.append((kind, body))
        if kind == b"Z":
            return out


# What a client says about its channels, and what PostgreSQL answers to each, on a direct
# connection: tags, NOTICEs (a truncated name), errors (25P02 in a failed block, a syntax error),
# transaction states.
LISTEN_SCRIPT = [
    "LISTEN a", "LISTEN a", 'LISTEN "Mixed Case"', "UNLISTEN a", "UNLISTEN never", "UNLISTEN *",
    "LISTEN " + "x" * 70,
    "BEGIN", "LISTEN b", "SELECT 1/0", "LISTEN c", "UNLISTEN *", "ROLLBACK",
    "LISTEN d; UNLISTEN d; UNLISTEN *", "listen  e ; unlisten e", "LISTEN",
    "BEGIN", "LISTEN f", "UNLISTEN *", "COMMIT", "UNLISTEN f",
]


def test_listen_and_unlisten_are_answered_byte_for_byte_as_postgresql(pg, pooler):
    # Through the relay (the default) the same bytes as from PostgreSQL itself, in a Query and
    # in the extended protocol (pgjdbc sends LISTEN as Parse/Bind/Execute).
    extended = [[parse("", sql), bind(""), describe("P", ""), execute(), SYNC]
                for sql in ("LISTEN g", "UNLISTEN g", "UNLISTEN *", "LISTEN")]
    with Noise(pooler, clients=2):
        direct = harness.RawClient("127.0.0.1", pg.port, "app", "app", "app")
        through = pooler.raw()
        try:
            for step in LISTEN_SCRIPT + extended:
                want, got = replies(direct, step), replies(through, step)
                assert got == want, f"{step!r}: PostgreSQL {want}, through pgsluice {got}"
        finally:
            direct.close()
            through.close()


def test_every_listening_client_is_told_of_a_reconnect(pg, pooler):
    # Three listeners (consecutive connections land on different workers) and one that stopped
    # listening: each of the three gets the NOTICE once, the fourth none.
    with Noise(pooler, clients=2):
        conns = [pooler.connect(autocommit=True) for _ in range(4)]
        try:
            notices: list[list[str]] = [[] for _ in conns]
            for n, c in enumerate(conns):
                c.execute(f"LISTEN told_{n}")
                c.add_notice_handler(lambda d, n=n: notices[n].append(d.message_primary or ""))
            conns[3].execute("UNLISTEN *")
            rows = listener_rows(pooler)
            assert len(rows) == 1, rows
            pg.psql(f"SELECT pg_terminate_backend({int(rows[0][16])})")
            deadline = time.monotonic() + 10
            while not all(notices[:3]) and time.monotonic() < deadline:
                for c in conns:
                    c.execute("SELECT 1")  # psycopg reads what arrived
                time.sleep(0.1)
            for c in conns:
                c.execute("SELECT 1")
            for n in range(3):
                assert len(notices[n]) == 1 and "may have been missed" in notices[n][0], notices
            assert notices[3] == [], notices
            # And every one is listening again.
            with pooler.connect(autocommit=True) as sender:
                for n in range(3):
                    sender.execute(f"NOTIFY told_{n}, 'back {n}'")
            for n in range(3):
                assert [x.payload for x in collect(conns[n], 1)] == [f"back {n}"]
        finally:
            for c in conns:
                c.close()


def test_notifications_of_an_aborted_transaction_never_arrive(pooler):
    with Noise(pooler, clients=2), pooler.connect(autocommit=True) as a, \
            pooler.connect(autocommit=True) as sender:
        a.execute("LISTEN outcome")
        sender.execute("BEGIN")
        sender.execute("NOTIFY outcome, 'rolled back'")
        sender.execute("ROLLBACK")
        with pytest.raises(psycopg.errors.DivisionByZero):
            sender.execute("NOTIFY outcome, 'failed'; SELECT 1/0")
        sender.execute("NOTIFY outcome, 'committed'")
        assert [n.payload for n in collect(a, 1)] == ["committed"]
        assert quiet(a) == []
