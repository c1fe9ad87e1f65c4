"""Protocol-level prepared statements through pgsluice in transaction mode: named statements are
rewritten per server and prepared on a server once, so drivers that prepare (pgbench -M prepared,
psycopg, asyncpg) work with few servers and many clients; max_prepared_statements = 0 lets the
classic breakage through (seed 002)."""

from __future__ import annotations

import asyncio
import re
import struct
import threading

import psycopg
import psycopg.errors
import pytest

import harness
from hopping import Holders




def parse(name: str, sql: str, types: tuple[int, ...] = ()) -> tuple[bytes, bytes]:
    body = name.encode() + b"\0" + sql.encode() + b"\0" + struct.pack("!h", len(types))
    for t in types:
        body += struct.pack("!I", t)
    return b"P", body


def bind(stmt: str, params: tuple[str | None, ...] = (), portal: str = "") -> tuple[bytes, bytes]:
    body = portal.encode() + b"\0" + stmt.encode() + b"\0" + struct.pack("!h", 0)
    body += struct.pack("!h", len(params))
    for p in params:
        if p is None:
            body += struct.pack("!i", -1)
        else:
            body += struct.pack("!i", len(p.encode())) + p.encode()
    return b"B", body + struct.pack("!h", 0)


def execute(portal: str = "") -> tuple[bytes, bytes]:
    return b"E", portal.encode() + b"\0" + struct.pack("!i", 0)


def describe(kind: str, name: str) -> tuple[bytes, bytes]:
    return b"D", kind.encode() + name.encode() + b"\0"


def close(kind: str, name: str) -> tuple[bytes, bytes]:
    return b"C", kind.encode() + name.encode() + b"\0"


SYNC = (b"S", b"")


def send_batch(client, messages) -> None:
    data = b"".join(k + struct.pack("!i", len(b) + 4) + b for k, b in messages)
    client.sock.sendall(data)


def read_until_ready(client) -> list[tuple[str, bytes]]:
    """Every message up to and including ReadyForQuery, as (type, body)."""
    out = []
    while True:
        kind, body = client.read_message()
        if kind in (b"S", b"N"):
            continue
        out.append((kind.decode(), body))
        if kind == b"Z":
            return out


def types_of(replies) -> str:
    return "".join(k for k, _ in replies)


def error_code(body: bytes) -> str:
    for field in body.split(b"\0"):
        if field.startswith(b"C"):
            return field[1:].decode()
    return ""


def test_pgbench_prepared_select_only(pgbench_data, make_pooler):
    pooler = make_pooler(default_pool_size=2)
    rc, out, err = pooler.pgbench(["-M", "prepared", "-S", "-c", "50", "-j", "2", "-T", "5",
                                   "--no-vacuum"])
    assert rc == 0, err
    assert re.search(r"number of failed transactions: 0 ", out), out
    assert int(re.search(r"processed: (\d+)", out).group(1)) > 500, out


def test_pgbench_prepared_tpcb(pgbench_data, make_pooler):
    # One client per pgbench thread (-j = -c): pgbench prepares with a blocking PQprepare, so
    # a thread whose client waits for a server stalls its other clients, which hold servers
    # inside BEGIN … END; with a pool smaller than that, any transaction pooler deadlocks
    # until query_wait_timeout.
    pooler = make_pooler(default_pool_size=2)
    rc, out, err = pooler.pgbench(["-M", "prepared", "-c", "50", "-j", "50", "-T", "5",
                                   "--no-vacuum"])
    assert rc == 0, err
    assert re.search(r"number of failed transactions: 0 ", out), out
    assert int(re.search(r"processed: (\d+)", out).group(1)) > 50, out


def test_without_rewriting_the_seed_breakage_returns(pgbench_data, make_pooler):
    # Seed 002: pgbench -M prepared through a transaction pool fails when names are not mapped.
    pooler = make_pooler(default_pool_size=2, max_prepared_statements=0)
    rc, out, err = pooler.pgbench(["-M", "prepared", "-S", "-c", "10", "-j", "2", "-T", "3",
                                   "--no-vacuum"])
    text = out + err
    assert re.search(r"prepared statement \"P_\d+\" (does not exist|already exists)", text), text


def test_psycopg_prepare_threshold_zero(make_pooler):
    pooler = make_pooler(default_pool_size=2)
    errors: list[str] = []

    def worker(n: int) -> None:
        try:
            with psycopg.connect(pooler.dsn(), autocommit=True) as conn:
                conn.prepare_threshold = 0
                for i in range(30):
                    got = conn.execute("SELECT %s::int + %s::int", (n, i)).fetchone()[0]
                    assert got == n + i
                    assert conn.execute("SELECT %s::text || 'x'", (str(i),)).fetchone()[0] \
                        == f"{i}x"
                    with conn.transaction():
                        conn.execute("SELECT %s::int", (i,))
        except Exception as e:  # noqa: BLE001
            errors.append(f"{n}: {e!r}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_show_clients_and_servers_count_prepared_statements(make_pooler):
    # PgBouncer's prepared_statements column: the client's own statements, and the ones each
    # server holds under rewritten names.
    pooler = make_pooler(default_pool_size=1, admin_users="app")

    def counts(subject: str) -> list[int]:
        rc, out, err = pooler.psql(f"SHOW {subject}", db="pgsluice", args=["-F", "\t"])
        assert rc == 0, err
        return [int(line.split("\t")[19]) for line in out.splitlines()
                if line.split("\t")[2] == "app"]

    with psycopg.connect(pooler.dsn(), autocommit=True) as conn:
        conn.prepare_threshold = 0
        conn.execute("SELECT %s::int", (1,))
        conn.execute("SELECT %s::text", ("a",))
        conn.execute("SELECT %s::int + 1", (2,))
        assert counts("CLIENTS") == [3], counts("CLIENTS")
        assert counts("SERVERS") == [3], counts("SERVERS")
        conn.prepare_threshold = None  # unnamed from here on: nothing more is counted
        conn.execute("SELECT %s::int * 2", (3,))
        assert counts("CLIENTS") == [3], counts("CLIENTS")
    assert counts("CLIENTS") == []


def test_asyncpg_default_statement_cache(make_pooler):
    import asyncpg

    pooler = make_pooler(default_pool_size=2)

    async def one(n: int) -> int:
        conn = await asyncpg.connect(host="127.0.0.1", port=pooler.port, user="app",
                                     password="app", database="app")
        try:
            total = 0
            for i in range(20):
                total += await conn.fetchval("SELECT $1::int * 2", i)
                row = await conn.fetchrow("SELECT $1::text AS t, $2::int AS n", "a", n)
                assert row["t"] == "a" and row["n"] == n
                async with conn.transaction():
                    await conn.execute("SELECT 1")
            return total
        finally:
            await conn.close()

    async def main():
        return await asyncio.gather(*(one(n) for n in range(20)))

    results = asyncio.run(main())
    assert results == [sum(i * 2 for i in range(20))] * 20


def test_statement_prepared_once_per_server(pg, make_pooler):
    pooler = make_pooler(default_pool_size=1)
    with pooler.raw() as a, pooler.raw() as b:
        for client in (a, b):
            send_batch(client, [parse("s1", "SELECT 41 + 1"), bind("s1"), execute(), SYNC])
            replies = read_until_ready(client)
            assert types_of(replies) == "12DCZ", replies
    prepared = pg.psql("SELECT count(*) FROM pg_stat_activity a WHERE datname = 'app' "
                       "AND usename = 'app' AND backend_type = 'client backend'")
    assert prepared.strip() == "1"


def test_pipeline_parse_bind_close_in_one_batch(make_pooler):
    pooler = make_pooler(default_pool_size=1)
    with pooler.raw() as c:
        send_batch(c, [parse("a", "SELECT $1::int", (23,)), describe("S", "a"),
                       bind("a", ("7",)), execute(), close("S", "a"),
                       parse("a", "SELECT 'again'"), bind("a"), execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "1tT2DC312DCZ", types_of(replies)
        rows = [b for k, b in replies if k == "D"]
        assert rows[0].endswith(b"7") and rows[1].endswith(b"again")


def test_reparse_of_used_name_is_42P05_and_unknown_bind_is_26000(make_pooler):
    pooler = make_pooler(default_pool_size=1)
    with pooler.raw() as c:
        send_batch(c, [parse("dup", "SELECT 1"), SYNC])
        assert types_of(read_until_ready(c)) == "1Z"
        send_batch(c, [parse("dup", "SELECT 2"), bind("dup"), execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "EZ", replies
        assert error_code(replies[0][1]) == "42P05"
        send_batch(c, [bind("nosuch"), execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "EZ", replies
        assert error_code(replies[0][1]) == "26000"
        # The connection is fine afterwards, and "dup" still means SELECT 1.
        send_batch(c, [bind("dup"), execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "2DCZ"
        assert replies[1][1].endswith(b"1")


def test_failed_parse_frees_the_name(make_pooler):
    pooler = make_pooler(default_pool_size=1)
    with pooler.raw() as c:
        send_batch(c, [parse("bad", "SELEKT 1"), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "EZ" and error_code(replies[0][1]) == "42601"
        send_batch(c, [parse("bad", "SELECT 5"), bind("bad"), execute(), SYNC])
        assert types_of(read_until_ready(c)) == "12DCZ"


def test_eviction_with_two_slots_and_ten_statements(pg, make_pooler):
    pooler = make_pooler(default_pool_size=1, max_prepared_statements=2, admin_users="app")
    with pooler.raw() as c:
        for round_ in range(2):
            for i in range(10):
                name = f"s{i}"
                if round_ == 0:
                    send_batch(c, [parse(name, f"SELECT {i} AS v"), bind(name), execute(), SYNC])
                    expect = "12DCZ"
                else:
                    send_batch(c, [bind(name), execute(), SYNC])
                    expect = "2DCZ"
                replies = read_until_ready(c)
                assert types_of(replies) == expect, (name, replies)
                assert replies[-3][1].endswith(str(i).encode())
        # At most two of the pooler's statements live on the server.
        assert c.scalar("SELECT count(*) FROM pg_prepared_statements "
                        "WHERE name LIKE 'PGSLUICE_%'") in ("1", "2")
    # Each Parse (10) and each Bind of a statement evicted meanwhile (10) prepared once; all but
    # the first two made room.
    stats = show_prepared(pooler)
    assert (stats["server_parse_count"], stats["eviction_count"]) == ("20", "18"), stats


def test_sql_deallocate_acts_on_the_client_mapping(make_pooler):
    # PHP PDO prepares at protocol level and deallocates with SQL.
    pooler = make_pooler(default_pool_size=1)
    with pooler.raw() as c:
        send_batch(c, [parse("pdo_stmt_1", "SELECT 1"), SYNC])
        assert types_of(read_until_ready(c)) == "1Z"
        rows = c.query("DEALLOCATE pdo_stmt_1")
        assert rows == []
        send_batch(c, [bind("pdo_stmt_1"), execute(), SYNC])
        replies = read_until_ready(c)
        assert error_code(replies[0][1]) == "26000"
        send_batch(c, [parse("pdo_stmt_1", "SELECT 2"), SYNC])  # the name is free again
        assert types_of(read_until_ready(c)) == "1Z"
        c.query("DEALLOCATE ALL")
        send_batch(c, [parse("pdo_stmt_1", "SELECT 3"), bind("pdo_stmt_1"), execute(), SYNC])
        assert types_of(read_until_ready(c)) == "12DCZ"


def test_session_mode_passes_names_through(make_pooler):
    pooler = make_pooler(pool_mode="session", default_pool_size=1)
    with pooler.raw() as c:
        send_batch(c, [parse("plain", "SELECT 1"), SYNC])
        assert types_of(read_until_ready(c)) == "1Z"
        assert c.scalar("SELECT name FROM pg_prepared_statements") == "plain"


def test_show_prepared_counts_each_statement_once_per_server(make_pooler):
    pooler = make_pooler(default_pool_size=1, admin_users="app")
    clients = [pooler.raw() for _ in range(5)]
    try:
        for c in clients:
            send_batch(c, [parse("q", "SELECT 1"), bind("q"), execute(), SYNC])
            assert types_of(read_until_ready(c)) == "12DCZ"
            send_batch(c, [bind("q"), execute(), SYNC])
            assert types_of(read_until_ready(c)) == "2DCZ"
    finally:
        for c in clients:
            c.close()
    rc, out, err = pooler.psql("SHOW PREPARED", db="pgsluice")
    assert rc == 0, err
    row = out.strip().splitlines()[0].split("|")
    # database|user|client_parse_count|server_parse_count|bind_count|…
    assert row[:5] == ["app", "app", "5", "1", "10"], row


def test_node_postgres_named_queries(make_pooler):
    pooler = make_pooler(default_pool_size=2)
    rc, out, err = harness.run_node("named_queries.js", str(pooler.port), "10", "20")
    assert rc == 0 and out.strip() == "ok 10", out + err


def test_pgjdbc_prepare_threshold_1(make_pooler, tmp_path):
    pooler = make_pooler(default_pool_size=2)
    rc, out, err = harness.run_java("PreparedThroughPool", str(tmp_path), str(pooler.port), "8",
                                    "15")
    assert rc == 0 and out.strip() == "ok 8", out + err


def test_error_before_sync_skips_what_follows(make_pooler):
    # psycopg's pipeline mode: Flush after each statement, Sync at the end. After an error the
    # server skips everything up to the Sync, including a named Parse the pooler could have
    # answered itself: the client must not get a ParseComplete for it, and the name stays free.
    pooler = make_pooler(default_pool_size=1)
    flush = (b"H", b"")
    with pooler.raw() as warm:
        send_batch(warm, [parse("known", "SELECT 7"), SYNC])  # now the server has it
        assert types_of(read_until_ready(warm)) == "1Z"
    with pooler.raw() as c:
        send_batch(c, [parse("", "SELECT 1 / 0"), bind(""), execute(), flush])
        kind, body = c.read_message()
        while kind in (b"S", b"N"):
            kind, body = c.read_message()
        assert kind == b"1"
        send_batch(c, [parse("known", "SELECT 7"), bind("known"), execute(), SYNC])
        replies = read_until_ready(c)
        # 1/0 of constants fails when the unnamed statement is planned, at Bind.
        assert types_of(replies) == "EZ", replies
        assert error_code(replies[0][1]) == "22012"
        send_batch(c, [parse("known", "SELECT 7"), bind("known"), execute(), SYNC])
        assert types_of(read_until_ready(c)) == "12DCZ"


def show_prepared(pooler) -> dict[str, str]:
    """SHOW PREPARED's first row (the only pool), by column name."""
    rc, out, err = pooler.psql("SHOW PREPARED", db="pgsluice",
                               args=["-P", "tuples_only=off", "-P", "footer=off"])
    assert rc == 0, err
    header, row = out.strip().splitlines()[:2]
    return dict(zip(header.split("|"), row.split("|")))


def warm_both_servers(pooler, sql: str):
    """Two psycopg connections that prepared `sql`, one on each server of a pool of 2 (two
    transactions held open at once). They stay connected: the pooler's statement lives while a
    client maps a name to it."""
    a = psycopg.connect(pooler.dsn())
    b = psycopg.connect(pooler.dsn())
    for conn in (a, b):
        conn.prepare_threshold = 0
        conn.execute(sql).fetchall()  # a transaction stays open: a server each
    pids = {conn.execute("SELECT pg_backend_pid()").fetchone()[0] for conn in (a, b)}
    assert len(pids) == 2
    a.commit()
    b.commit()
    return a, b


def make_table(pooler, name: str) -> None:
    with psycopg.connect(pooler.dsn(), autocommit=True) as ddl:
        ddl.execute(f"DROP TABLE IF EXISTS {name}")
        ddl.execute(f"CREATE TABLE {name} (a int)")
        ddl.execute(f"INSERT INTO {name} VALUES (1)")


def alter_table(pooler, name: str) -> None:
    with psycopg.connect(pooler.dsn(), autocommit=True) as ddl:
        ddl.execute(f"ALTER TABLE {name} ADD COLUMN b int DEFAULT 7")


def schema_change_outcomes(connect, ddl) -> list[str]:
    """Two psycopg clients that prepared and ran `SELECT * FROM stale_plan`; the table gains a
    column; each runs it three times more in autocommit, then once more in a transaction after
    a rollback. What each run gave, in order."""
    ddl("DROP TABLE IF EXISTS stale_plan; CREATE TABLE stale_plan (a int); "
        "INSERT INTO stale_plan VALUES (1)")
    a, b = connect(), connect()
    outcomes = []
    try:
        for conn in (a, b):
            conn.prepare_threshold = 0
            conn.execute("SELECT * FROM stale_plan").fetchall()
            conn.commit()
        ddl("ALTER TABLE stale_plan ADD COLUMN b int DEFAULT 7")
        for conn in (a, b):
            for autocommit in (True, True, True, False):
                conn.autocommit = autocommit
                try:
                    cur = conn.execute("SELECT * FROM stale_plan")
                    outcomes.append(f"{[d.name for d in cur.description]} {cur.fetchall()}")
                except psycopg.Error as e:
                    outcomes.append(f"{e.sqlstate} {e}")
                    conn.rollback()
    finally:
        a.close()
        b.close()
    return outcomes


def test_schema_change_between_executions_answers_as_postgresql(pg, make_pooler):
    # ALTER TABLE between two executions of a prepared SELECT *: PostgreSQL refuses the old plan
    # at every Bind ("cached plan must not change result type", 0A000); the client was told the
    # old row description at its first execution, so rows of the new shape would not be what
    # it was told (PHP PDO, on the same libpq calls, reads past its columns). Through the pool,
    # whichever server runs each execution (one prepared the statement before, the other
    # prepares it afresh), the client gets what it gets directly, and psycopg's own recovery
    # (after a failed transaction) works as directly.
    pooler = make_pooler(default_pool_size=2, admin_users="app")

    pg.psql("GRANT CREATE ON SCHEMA public TO app", db="app")
    direct = schema_change_outcomes(
        lambda: psycopg.connect(host=pg.socket_dir, port=pg.port, user="app", dbname="app"),
        lambda sql: pg.psql(sql, user="app", db="app"))
    pooled = schema_change_outcomes(lambda: psycopg.connect(pooler.dsn()),
                                    lambda sql: pg.psql(sql, user="app", db="app"))
    assert any("0A000" in o for o in direct), direct
    assert pooled == direct, (pooled, direct)
    # Never a retry with rows of a shape the client was not told.
    assert show_prepared(pooler)["stale_plan_retry_count"] == "0"


def test_schema_change_raw_batch_replies_in_order(make_pooler):
    # The exact replies of a retried batch: a client that was never told the statement's shape
    # (Parse, Bind, Execute: no Describe) describes the portal after the change; the pooler
    # prepares again and sends the batch again (PostgreSQL would answer 0A000 here: the client
    # gets the new shape with its description instead), with no trace of the hidden
    # Close/Parse.
    pooler = make_pooler(default_pool_size=1)
    with pooler.raw() as c:
        c.query("DROP TABLE IF EXISTS stale_raw")
        c.query("CREATE TABLE stale_raw (a int)")
        c.query("INSERT INTO stale_raw VALUES (3)")
        send_batch(c, [parse("s", "SELECT * FROM stale_raw"), bind("s"), execute(), SYNC])
        assert types_of(read_until_ready(c)) == "12DCZ"
        c.query("ALTER TABLE stale_raw ADD COLUMN b text DEFAULT 'new'")
        send_batch(c, [bind("s"), describe("P", ""), execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "2TDCZ", replies
        assert replies[2][1].endswith(b"new") and replies[-1][1] == b"I"
        # The retry told the client the two-column shape (its Describe of the portal): after
        # the next change the statement is stale for it, as in PostgreSQL, at every Bind, until
        # it prepares the statement again.
        c.query("ALTER TABLE stale_raw ADD COLUMN c int DEFAULT 5")
        send_batch(c, [parse("", "SELECT 1"), bind(""), execute(), bind("s"), execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "12DCEZ", replies
        assert error_code(replies[4][1]) == "0A000"
        send_batch(c, [bind("s"), execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "EZ", replies
        assert error_code(replies[0][1]) == "0A000"
        send_batch(c, [close("S", "s"), parse("s", "SELECT * FROM stale_raw"), bind("s"),
                       execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "312DCZ", replies
        assert replies[3][1].endswith(b"5")


def test_duplicate_parse_fails_the_transaction_like_postgresql(make_pooler):
    # PostgreSQL's 42P05 inside a transaction block fails the transaction: status 'E', and the
    # COMMIT that follows reports ROLLBACK (what was done before is gone).
    pooler = make_pooler(default_pool_size=1)
    with pooler.raw() as c:
        c.query("DROP TABLE IF EXISTS dup_tx")
        c.query("CREATE TABLE dup_tx (a int)")
        send_batch(c, [parse("dup", "SELECT 1"), SYNC])
        assert types_of(read_until_ready(c)) == "1Z"
        c.send_query("BEGIN")
        assert c.read_result()[2] == "T"
        c.send_query("INSERT INTO dup_tx VALUES (1)")
        assert c.read_result()[2] == "T"
        send_batch(c, [parse("dup", "SELECT 2"), bind("dup"), execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "EZ", replies
        assert error_code(replies[0][1]) == "42P05"
        assert b'prepared statement "dup" already exists' in replies[0][1]
        assert replies[-1][1] == b"E"
        send_batch(c, [bind("dup"), execute(), SYNC])  # refused in a failed transaction
        replies = read_until_ready(c)
        assert error_code(replies[0][1]) == "25P02" and replies[-1][1] == b"E"
        c.send_query("COMMIT")
        _, tag, status = c.read_result()
        assert (tag, status) == ("ROLLBACK", "I")
        assert c.scalar("SELECT count(*) FROM dup_tx") == "0"
        # A syntax error is what PostgreSQL reports first, before the name is checked.
        send_batch(c, [parse("dup", "SELEKT 3"), SYNC])
        replies = read_until_ready(c)
        assert error_code(replies[0][1]) == "42601", replies
        # And the name still means SELECT 1.
        send_batch(c, [bind("dup"), execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "2DCZ" and replies[1][1].endswith(b"1")


def test_psycopg_rollback_deallocate_all_keeps_other_clients_working(make_pooler):
    # psycopg follows every ROLLBACK with DEALLOCATE ALL through the extended protocol (an
    # unnamed Parse): it drops the pooler's statements on that server, which must be prepared
    # again for the other clients instead of failing with "PGSLUICE_n does not exist".
    pooler = make_pooler(default_pool_size=1)
    a = psycopg.connect(pooler.dsn())
    b = psycopg.connect(pooler.dsn())
    try:
        for conn in (a, b):
            conn.prepare_threshold = 0
            assert conn.execute("SELECT 40 + %s::int", (2,)).fetchone() == (42,)
            conn.commit()
        a.execute("SELECT 40 + %s::int", (2,))
        a.rollback()
        for conn in (b, a, b):
            assert conn.execute("SELECT 40 + %s::int", (3,)).fetchone() == (43,)
            conn.commit()
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_schema_change_asyncpg_prepares_again_itself(make_pooler, workers):
    # asyncpg binds with the row description it cached (Bind, Execute: no Describe), so the
    # pooler must not retry with rows of a new shape: asyncpg gets PostgreSQL's 0A000, prepares
    # again itself (outside a transaction), and that works, at one worker or two.
    import asyncpg

    pooler = make_pooler(default_pool_size=2, admin_users="app", workers=workers)
    make_table(pooler, "stale_asyncpg")

    async def main():
        c = await asyncpg.connect(host="127.0.0.1", port=pooler.port, user="app",
                                  password="app", database="app")
        try:
            assert [tuple(r) for r in await c.fetch("SELECT * FROM stale_asyncpg")] == [(1,)]
            alter_table(pooler, "stale_asyncpg")
            for _ in range(3):
                rows = await c.fetch("SELECT * FROM stale_asyncpg")
                assert [tuple(r) for r in rows] == [(1, 7)]
        finally:
            await c.close()

    asyncio.run(main())
    assert show_prepared(pooler)["stale_plan_retry_count"] == "0"


def show_prepared_statements(pooler) -> list[dict[str, str]]:
    """SHOW PREPARED_STATEMENTS: every row, by column name."""
    rc, out, err = pooler.psql("SHOW PREPARED_STATEMENTS", db="pgsluice",
                               args=["-P", "tuples_only=off", "-P", "footer=off"])
    assert rc == 0, err
    header, *rows = out.strip().splitlines()
    names = header.split("|")
    return [dict(zip(names, row.split("|", len(names) - 1))) for row in rows]


PGBENCH_SELECT = "SELECT abalance FROM pgbench_accounts WHERE aid = $1;"


def test_one_registry_entry_for_a_statement_used_on_two_workers(make_pooler):
    # The registry is one per process: two clients on different workers that prepare the same
    # text share one statement (one name on every server, one stale-plan generation).
    pooler = make_pooler(workers=2, default_pool_size=2, admin_users="app")
    query = "SELECT 42 AS across_workers"
    with pooler.raw() as a, pooler.raw() as b:  # accepted one after the other: round robin
        for i, c in enumerate((a, b)):
            send_batch(c, [parse(f"s{i}", query), SYNC])
            assert types_of(read_until_ready(c)) == "1Z"
        rc, out, err = pooler.psql("SHOW WORKERS", db="pgsluice")
        assert rc == 0, err
        # a, b and this psql, in turn: a's worker has a and psql, b's worker b.
        clients_per_worker = sorted(int(line.split("|")[1]) for line in out.strip().splitlines())
        assert clients_per_worker == [1, 2], out
        rows = [r for r in show_prepared_statements(pooler) if r["query"] == query]
        assert len(rows) == 1, show_prepared_statements(pooler)
        assert rows[0]["clients"] == "2" and rows[0]["client_parse_count"] == "2", rows[0]


def test_show_prepared_statements_after_pgbench(pgbench_data, make_pooler):
    # One row per statement: pgbench's 10 clients Parse its SELECT 10 times, the pool's two
    # servers prepare it at most twice each (a copy no client has described yet is prepared
    # again and described before a client told the statement's shape binds it: issue 42), and
    # every execution is one Bind. A raw client that prepared the same text keeps the entry
    # alive after pgbench's clients leave.
    pooler = make_pooler(default_pool_size=2, admin_users="app")
    with pooler.raw() as keeper:
        send_batch(keeper, [parse("keep", PGBENCH_SELECT), SYNC])
        assert types_of(read_until_ready(keeper)) == "1Z"
        rc, out, err = pooler.pgbench(["-M", "prepared", "-S", "-c", "10", "-j", "2", "-t", "100",
                                       "--no-vacuum"])
        assert rc == 0, err
        assert re.search(r"number of transactions actually processed: 1000/1000", out), out
        rows = [r for r in show_prepared_statements(pooler) if r["query"] == PGBENCH_SELECT]
        assert len(rows) == 1, show_prepared_statements(pooler)
        row = rows[0]
        assert row["name"].startswith("PGSLUICE_"), row
        assert row["clients"] == "1", row  # the keeper; pgbench's clients are gone
        assert int(row["client_parse_count"]) == 11, row
        assert 1 <= int(row["servers"]) <= 2, row
        assert int(row["servers"]) <= int(row["server_parse_count"]) <= 2 * int(row["servers"]), row
        assert row["bind_count"] == "1000", row
        assert row["generation"] == "0" and row["stale_plan_refusal_count"] == "0", row


def test_schema_change_asyncpg_other_connection_gets_0A000_not_new_rows(make_pooler):
    # Two asyncpg connections cached `SELECT *`'s row description. After ALTER TABLE, the first
    # one's 0A000 (from the server) makes the statement be prepared again with the new shape;
    # the second one binds its cached statement without a Describe: the pooler gives it
    # PostgreSQL's 0A000 (asyncpg's InvalidCachedStatementError, which it handles by preparing
    # again) instead of rows it would decode with the old description (ProtocolError).
    import asyncpg

    pooler = make_pooler(default_pool_size=1, admin_users="app")
    make_table(pooler, "stale_two")
    query = "SELECT * FROM stale_two"

    async def main():
        conns = [await asyncpg.connect(host="127.0.0.1", port=pooler.port, user="app",
                                       password="app", database="app") for _ in range(3)]
        try:
            for c in conns:
                assert [tuple(r) for r in await c.fetch(query)] == [(1,)]
            alter_table(pooler, "stale_two")
            for c in conns[:2]:
                for _ in range(2):
                    assert [tuple(r) for r in await c.fetch(query)] == [(1, 7)]
            # Inside a transaction asyncpg cannot prepare again by itself: it raises the error
            # as with PostgreSQL, and the transaction is failed; the next one works.
            tx = conns[2].transaction()
            await tx.start()
            with pytest.raises(asyncpg.exceptions.InvalidCachedStatementError):
                await conns[2].fetch(query)
            with pytest.raises(asyncpg.exceptions.InFailedSQLTransactionError):
                await conns[2].fetch("SELECT 1")
            await tx.rollback()
            # Every statement name is fine again: no refusal the second time round.
            for c in conns:
                assert [tuple(r) for r in await c.fetch(query)] == [(1, 7)]
        finally:
            for c in conns:
                await c.close()

    with pooler.raw() as keeper:  # keeps the registry entry for SHOW after asyncpg leaves
        send_batch(keeper, [parse("keep", query), SYNC])
        assert types_of(read_until_ready(keeper)) == "1Z"
        asyncio.run(main())
        row = next(r for r in show_prepared_statements(pooler) if r["query"] == query)
    assert row["generation"] == "1", row
    assert row["stale_plan_refusal_count"] == "2", row
    assert row["stale_plan_retry_count"] == "0", row


def test_schema_change_other_client_fails_like_postgresql_in_and_out_of_a_block(make_pooler):
    # Client b prepared the statement before the schema change and binds it without a Describe
    # after client a's 0A000 had it prepared again: b gets PostgreSQL's 0A000, and the server's
    # state agrees: a transaction block is failed, and what ran earlier in the batch is rolled
    # back with the implicit transaction. Each refusal counts once; the next Bind works.
    pooler = make_pooler(default_pool_size=1, admin_users="app")
    with pooler.raw() as a, pooler.raw() as b:
        a.query("DROP TABLE IF EXISTS stale_other")
        a.query("CREATE TABLE stale_other (a int)")
        a.query("INSERT INTO stale_other VALUES (1)")
        a.query("DROP TABLE IF EXISTS stale_log")
        a.query("CREATE TABLE stale_log (n int)")
        for c in (a, b):
            send_batch(c, [parse("s", "SELECT * FROM stale_other"), bind("s"), execute(), SYNC])
            assert types_of(read_until_ready(c)) == "12DCZ"
        a.query("ALTER TABLE stale_other ADD COLUMN b int DEFAULT 7")
        for expected in ("EZ", "2DCZ"):  # the server's own 0A000, then the new plan
            send_batch(a, [bind("s"), execute(), SYNC])
            assert types_of(read_until_ready(a)) == expected
        # b, in a transaction block: refused, and the block is failed.
        b.send_query("BEGIN")
        assert b.read_result()[2] == "T"
        send_batch(b, [bind("s"), execute(), SYNC])
        replies = read_until_ready(b)
        assert types_of(replies) == "EZ", replies
        assert error_code(replies[0][1]) == "0A000" and replies[-1][1] == b"E"
        assert b"cached plan must not change result type" in replies[0][1]
        assert b"RevalidateCachedQuery" in replies[0][1]
        b.send_query("COMMIT")
        assert b.read_result()[1:] == ("ROLLBACK", "I")
        send_batch(b, [bind("s"), execute(), SYNC])
        replies = read_until_ready(b)
        assert types_of(replies) == "2DCZ" and replies[1][1].endswith(b"7"), replies
        # Another round, with an INSERT run earlier in the batch: rolled back with the error.
        a.query("ALTER TABLE stale_other ADD COLUMN c int DEFAULT 5")
        send_batch(a, [bind("s"), execute(), SYNC])
        assert types_of(read_until_ready(a)) == "EZ"
        send_batch(b, [parse("", "INSERT INTO stale_log VALUES (1)"), bind(""), execute(),
                       bind("s"), execute(), SYNC])
        replies = read_until_ready(b)
        assert types_of(replies) == "12CEZ", replies
        assert error_code(replies[3][1]) == "0A000" and replies[-1][1] == b"I"
        assert b.scalar("SELECT count(*) FROM stale_log") == "0"
        send_batch(b, [bind("s"), execute(), SYNC])
        assert types_of(read_until_ready(b)) == "2DCZ"
        # An earlier error in the batch: the server skips the refusal, which comes next time.
        a.query("ALTER TABLE stale_other ADD COLUMN d int DEFAULT 9")
        send_batch(a, [bind("s"), execute(), SYNC])
        assert types_of(read_until_ready(a)) == "EZ"
        send_batch(b, [parse("", "SELEKT 1"), bind("s"), execute(), SYNC])
        replies = read_until_ready(b)
        assert types_of(replies) == "EZ" and error_code(replies[0][1]) == "42601", replies
        send_batch(b, [bind("s"), execute(), SYNC])
        replies = read_until_ready(b)
        assert types_of(replies) == "EZ" and error_code(replies[0][1]) == "0A000", replies
        # A client that describes the portal gets the new shape without an error.
        send_batch(a, [bind("s"), execute(), SYNC])  # the server prepares it (after d) again
        assert types_of(read_until_ready(a)) == "2DCZ"
        a.query("ALTER TABLE stale_other ADD COLUMN e int DEFAULT 11")
        send_batch(a, [bind("s"), execute(), SYNC])
        assert types_of(read_until_ready(a)) == "EZ"
        send_batch(b, [bind("s"), describe("P", ""), execute(), SYNC])
        replies = read_until_ready(b)
        assert types_of(replies) == "2TDCZ", replies
        assert replies[2][1].endswith(b"11")
        row = next(r for r in show_prepared_statements(pooler)
                   if r["query"] == "SELECT * FROM stale_other")
        # Counted when sent: the skipped one too.
        assert row["stale_plan_refusal_count"] == "4", row
        assert row["generation"] == "4" and row["clients"] == "2", row


def test_unnamed_statement_kept_across_transactions_and_servers(pg, make_pooler):
    # PostgreSQL keeps a session's unnamed statement until its next unnamed Parse, a Query or a
    # Close of it: a Describe or Bind of it in a later transaction (psql's \gdesc, pgx's
    # describe-exec mode) may run on the other server of a pool of 2 (B), or on the same one
    # after another client's unnamed Parse (A). Every reply is PostgreSQL's on a direct
    # connection, byte for byte.
    steps = [
        ("A", [parse("", "SELECT 1 AS a, 'x'::text AS b"), SYNC]),
        ("other", None),
        ("B", [describe("S", ""), SYNC]),
        ("A", [describe("S", ""), SYNC]),
        ("B", [bind(""), describe("P", ""), execute(), SYNC]),
        ("B", [bind(""), execute(), SYNC]),
        # A Parse that fails drops the statement first.
        ("A", [parse("", "SELEC 1"), SYNC]),
        ("B", [describe("S", ""), SYNC]),
        ("A", [bind(""), execute(), SYNC]),
        # A Close of it, and a Query, end it too.
        ("A", [parse("", "SELECT 2 AS c"), SYNC]),
        ("B", [close("S", ""), SYNC]),
        ("A", [describe("S", ""), SYNC]),
        ("A", [parse("", "SELECT 3 AS d"), SYNC]),
        ("B", "SELECT 4"),
        ("A", [describe("S", ""), SYNC]),
        # What drivers send per query; the statement stays for a later Bind, elsewhere too.
        ("A", [parse("", "SELECT $1::int + 1 AS e", (23,)), bind("", ("41",)), execute(), SYNC]),
        ("B", [bind("", ("1",)), execute(), SYNC]),
        ("A", [bind("", ("2",)), execute(), SYNC]),
        # In a transaction block, with the pooler's own unnamed statement in between (SQL
        # PREPARE kept: a statement that EXECUTEs q prepares q first on a server lacking it).
        ("B", "PREPARE q AS SELECT 'q' AS q"),
        ("A", "BEGIN"),
        ("A", [parse("", "SELECT 6 AS f"), SYNC]),
        ("A", [parse("g", "EXECUTE q"), bind("g"), execute(), SYNC]),
        ("A", [describe("S", ""), bind(""), execute(), SYNC]),
        ("A", "COMMIT"),
        ("B", "DEALLOCATE q"),
    ]

    def run(c, other, messages):
        if messages is None:
            send_batch(other, [parse("", "SELECT 'other' AS z"), bind(""), execute(), SYNC])
            return read_until_ready(other)
        if isinstance(messages, str):
            c.send(b"Q", messages.encode() + b"\0")
            return read_until_ready(c)
        send_batch(c, messages)
        return read_until_ready(c)

    def direct():
        return harness.RawClient(pg.host, pg.port, "app", "app", "app")

    with direct() as c, direct() as other:
        expected = [run(c, other, m) for _, m in steps]
    pooler = make_pooler(default_pool_size=2)
    holders = Holders(pooler)
    try:
        with pooler.raw() as c, pooler.raw() as other:
            a = int(c.scalar("SELECT pg_backend_pid()"))
            b = holders.hold_other_than(a)
            holders.release()
            got = []
            for where, messages in steps:
                with holders.holding(a if where == "B" else b):
                    got.append(run(c, other, messages))
    finally:
        holders.close()
    for (where, messages), want, have in zip(steps, expected, got):
        assert have == want, f"{where} {messages}: PostgreSQL {want}, through pgsluice {have}"
    assert types_of(expected[2]) == "tTZ" and types_of(expected[7]) == "EZ", expected


def test_psql_gdesc_among_other_clients(pg, make_pooler):
    # psql's \gdesc parses the unnamed statement in one exchange and describes it in the next;
    # between them other clients' unnamed statements take the pool's two servers.
    pooler = make_pooler(default_pool_size=2)
    script = "".join(f"SELECT {i} AS n{i}, 'x'::text AS t{i}, now() AS at \\gdesc\n"
                     for i in range(60))
    cmd = ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-At", "-h", pg.host, "-p", str(pg.port),
           "-U", "app", "-d", "app"]
    rc, want, err = harness.run(cmd, input=script, env=pooler.client_env("app"))
    assert rc == 0, err
    assert want.splitlines()[:3] == ["n0|integer", "t0|text", "at|timestamp with time zone"]
    stop = threading.Event()
    errors: list[BaseException] = []

    def noise(i: int) -> None:
        try:
            with pooler.connect(autocommit=True) as conn:
                while not stop.is_set():
                    conn.cursor(binary=True).execute(f"SELECT {i} AS noise{i}").fetchall()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=noise, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        rc, got, err = pooler.psql(input=script)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors, errors
    assert rc == 0, err
    assert got == want
