"""Protocol-level prepared statements through pgsluice in transaction mode: named statements are
rewritten per server and prepared on a server once, so drivers that prepare (pgbench -M prepared,
psycopg, asyncpg) work with few servers and many clients; max_prepared_statements = 0 lets the
classic breakage through (seed 002)."""

from __future__ import annotations

import asyncio
import os
import re
import struct
import threading

import psycopg
import psycopg.errors
import pytest

from harness import run


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
    rc, out, err = pooler.pgbench(["-M", "prepared", "-c", "20", "-j", "20", "-T", "5",
                                   "--no-vacuum"])
    assert rc == 0, err
    assert re.search(r"number of failed transactions: 0 ", out), out


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
    pooler = make_pooler(default_pool_size=1, max_prepared_statements=2)
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


def test_sql_deallocate_acts_on_the_client_mapping(make_pooler):
    # PHP PDO prepares at protocol level and deallocates with SQL.
    pooler = make_pooler(default_pool_size=1)
    with pooler.raw() as c:
        send_batch(c, [parse("pdo_stmt_1", "SELECT 1"), SYNC])
        assert types_of(read_until_ready(c)) == "1Z"
        rows, tag, status = (c.query("DEALLOCATE pdo_stmt_1"), None, None)
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


NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")
JAVA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java")
PGJDBC_JAR = "/usr/share/java/postgresql.jar"


def test_node_postgres_named_queries(make_pooler):
    assert os.path.isdir(os.path.join(NODE_DIR, "node_modules", "pg")), \
        "node-postgres missing: scripts/install-deps installs it (npm ci in integration/node)"
    pooler = make_pooler(default_pool_size=2)
    rc, out, err = run(["node", os.path.join(NODE_DIR, "named_queries.js"), str(pooler.port),
                        "10", "20"], timeout=120)
    assert rc == 0 and out.strip() == "ok 10", out + err


def test_pgjdbc_prepare_threshold_1(make_pooler, tmp_path):
    assert os.path.exists(PGJDBC_JAR), "pgjdbc missing: scripts/install-deps installs it"
    rc, out, err = run(["javac", "-d", str(tmp_path),
                        os.path.join(JAVA_DIR, "PreparedThroughPool.java")], timeout=120)
    assert rc == 0, err
    pooler = make_pooler(default_pool_size=2)
    rc, out, err = run(["java", "-cp", f"{tmp_path}:{PGJDBC_JAR}", "PreparedThroughPool",
                        str(pooler.port), "8", "15"], timeout=180)
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
