"""SQL PREPARE kept, the default in transaction mode: a client's PREPARE/EXECUTE/DEALLOCATE work
on whichever server its transactions run (pool of 2; holders make them run on both, hopping.py),
two clients' statements of the same name never meet, and what the client sees (results, errors,
their SQLSTATEs, messages and positions, transaction states) is what PostgreSQL shows on a direct
connection: each scenario is run both ways and compared."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import psycopg
import psycopg.errors
import pytest

import harness
from hopping import Holders, Hopper, Rotator
from test_keep_settings import admin
from test_prepared import SYNC, bind, error_code, execute, parse, read_until_ready, send_batch, \
    types_of


@contextlib.contextmanager
def noise(pooler, clients: int = 3):
    """Clients running short transactions on the pool's servers; none may reach another
    client's statement by its name."""
    stop = threading.Event()
    errors: list[BaseException] = []
    wrong: list[str] = []

    def run() -> None:
        try:
            with pooler.connect(autocommit=True) as c:
                while not stop.is_set():
                    c.execute("SELECT pg_sleep(0.002)")
                    try:
                        c.execute("EXECUTE p")
                        wrong.append("EXECUTE p ran for a client that never prepared it")
                    except psycopg.errors.InvalidSqlStatementName:
                        pass
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors, errors
    assert not wrong, wrong[:3]


@pytest.fixture
def pooler(make_pooler):
    return make_pooler(default_pool_size=2, admin_users="app")


def outcome(conn, sql: str):
    """What a client sees of one Query: its rows or its error (SQLSTATE, message, position)."""
    try:
        cur = conn.execute(sql)
        return ("ok", cur.statusmessage, cur.fetchall() if cur.description else None)
    except psycopg.Error as e:
        return ("error", e.sqlstate, e.diag.message_primary, e.diag.statement_position,
                str(conn.info.transaction_status))


def compare_with_postgres(pg, pooler, script: list[str]):
    """Runs `script` directly on PostgreSQL and through the pooler: the same outcomes."""
    with pg.connect(user="app", db="app") as direct:
        expected = [outcome(direct, sql) for sql in script]
    with pooler.connect(autocommit=True) as through:
        got = [outcome(through, sql) for sql in script]
    for sql, want, have in zip(script, expected, got):
        assert have == want, f"{sql!r}: PostgreSQL {want}, through pgsluice {have}"
    return got


def test_two_clients_same_name_on_both_servers(pooler):
    with noise(pooler):
        a = pooler.connect(autocommit=True)
        b = pooler.connect(autocommit=True)
        hop = Hopper(pooler)
        try:
            a.execute("PREPARE p (text) AS SELECT 'a:' || $1, pg_backend_pid()")
            b.execute("PREPARE p (text) AS SELECT 'b:' || $1, pg_backend_pid()")
            seen = {"a": set(), "b": set()}
            pids = {"a": set(), "b": set()}
            for i in range(16):
                for name, conn in (("a", a), ("b", b)):
                    value, pid = hop.run(conn, f"EXECUTE p('{i}')")
                    seen[name].add(value.split(":")[0])
                    pids[name].add(pid)
            assert seen == {"a": {"a"}, "b": {"b"}}
            assert len(pids["a"]) == 2 and len(pids["b"]) == 2, pids
        finally:
            hop.close()
            a.close()
            b.close()
    leaks = admin(pooler, "SHOW LEAKS")
    assert "prepare|p|definite|keep" in leaks, leaks


class Extended:
    """A connection whose execute(sql) goes as an unnamed Parse, Bind, Describe, Execute (psycopg
    does so for binary results; PostgreSQL refuses parameters in EXECUTE's arguments, 42P02)."""

    def __init__(self, conn):
        self.conn = conn

    def execute(self, sql):
        return self.conn.cursor(binary=True).execute(sql)


def test_execute_through_the_extended_protocol(pooler):
    with noise(pooler):
        a = pooler.connect(autocommit=True)
        b = pooler.connect(autocommit=True)
        hop = Hopper(pooler)
        try:
            a.execute("PREPARE p (int) AS SELECT 'a' || $1, pg_backend_pid()")
            b.execute("PREPARE p (int) AS SELECT 'b' || $1, pg_backend_pid()")
            pids = {"a": set(), "b": set()}
            for i in range(16):
                for name, conn in (("a", a), ("b", b)):
                    value, pid = hop.run(Extended(conn), f"EXECUTE p({i})")
                    assert value == f"{name}{i}"
                    pids[name].add(pid)
            assert len(pids["a"]) == 2 and len(pids["b"]) == 2, pids
            with pytest.raises(psycopg.errors.InvalidSqlStatementName) as e:
                Extended(a).execute("EXECUTE nope(1)")
            assert e.value.diag.message_primary == 'prepared statement "nope" does not exist'
        finally:
            hop.close()
            a.close()
            b.close()


def test_prepare_in_a_parse_byte_by_byte(pooler):
    # An unnamed Parse whose text is PREPARE or EXECUTE (pgjdbc's default): the replies are
    # exactly PostgreSQL's, message by message.
    with noise(pooler), pooler.raw() as c:
        send_batch(c, [parse("", "PREPARE x (int) AS SELECT $1 + 1"), bind(""), execute(), SYNC])
        assert types_of(read_until_ready(c)) == "12CZ"
        for i in range(6):
            send_batch(c, [parse("", f"EXECUTE x({i})"), bind(""), execute(), SYNC])
            replies = read_until_ready(c)
            assert types_of(replies) == "12DCZ", replies
        # A second PREPARE of the name: 42P05 under the client's name, the batch skipped.
        send_batch(c, [parse("", "PREPARE x AS SELECT 2"), bind(""), execute(), SYNC])
        replies = read_until_ready(c)
        assert types_of(replies) == "12EZ", replies
        assert error_code(replies[2][1]) == "42P05"
        assert b'prepared statement "x" already exists' in replies[2][1]
        # Parsed and never executed: it did not happen.
        send_batch(c, [parse("", "PREPARE y AS SELECT 3"), SYNC])
        assert types_of(read_until_ready(c)) == "1Z"
        with pytest.raises(harness.PgError) as e:
            c.query("EXECUTE y")
        assert e.value.sqlstate == "26000"
        send_batch(c, [parse("", "DEALLOCATE x"), bind(""), execute(), SYNC])
        assert types_of(read_until_ready(c)) == "12CZ"
        with pytest.raises(harness.PgError) as e:
            c.query("EXECUTE x(1)")
        assert e.value.sqlstate == "26000"


def test_errors_are_postgresqls(pg, pooler):
    with noise(pooler):
        compare_with_postgres(pg, pooler, [
            "EXECUTE nope",                               # 26000
            "DEALLOCATE nope",                            # 26000
            "PREPARE q (int) AS SELECT $1 * 2",
            "PREPARE q AS SELECT 3",                      # 42P05, under the client's name
            "EXECUTE q(21)",
            "PREPARE bad AS SELEC 1",                     # a syntax error does not stick
            "EXECUTE bad",
            "PREPARE bad AS SELECT nosuchcolumn",         # nor an analysis error: its position
            "EXECUTE bad",
            "SELECT 1; EXECUTE q(1); SELECT nosuch",      # a position after the renamed name
            "BEGIN",
            "PREPARE q AS SELECT 4",                      # 42P05 fails the block
            "EXECUTE q(1)",                               # 25P02
            "ROLLBACK",
            "EXECUTE q(5)",
            "DEALLOCATE PREPARE q",
            "EXECUTE q(5)",                               # 26000
            "DEALLOCATE q",
        ])


def test_rollback_and_transactions_are_postgresqls(pg, pooler):
    with noise(pooler):
        got = compare_with_postgres(pg, pooler, [
            # Prepared statements are not transactional in PostgreSQL: this one stays.
            "BEGIN",
            "PREPARE r AS SELECT 'r'",
            "ROLLBACK",
            "EXECUTE r",
            # An error later in the same Query does not undo a PREPARE either.
            "PREPARE s AS SELECT 's'; SELECT 1/0",
            "EXECUTE s",
            # A DEALLOCATE in a block that rolls back stays done.
            "BEGIN",
            "DEALLOCATE r",
            "ROLLBACK",
            "EXECUTE r",
            # In a failed block nothing runs, the statement stays.
            "BEGIN",
            "SELECT 1/0",
            "DEALLOCATE s",
            "ROLLBACK",
            "EXECUTE s",
            "DEALLOCATE ALL",
            "EXECUTE s",
        ])
    assert got[3] == ("ok", "SELECT 1", [("r",)]), got[3]  # PREPARE r survived its ROLLBACK
    assert got[9][0] == "error" and got[9][1] == "26000", got[9]  # so did DEALLOCATE r


def test_quoting_explain_and_create_table_as(pg, pooler):
    pg.psql("DROP TABLE IF EXISTS ctas_direct, ctas_pooled", user="app", db="app")
    with noise(pooler):
        compare_with_postgres(pg, pooler, [
            'PREPARE "MyStmt" AS SELECT \'quoted\'',
            "PREPARE MyStmt AS SELECT 'folded'",
            'EXECUTE "MyStmt"',
            "EXECUTE mystmt",
            "EXECUTE MYSTMT",
            "EXPLAIN (COSTS off) EXECUTE mystmt",
            # EXPLAIN plans a CREATE TABLE … AS EXECUTE without making the table.
            "EXPLAIN (COSTS off) CREATE TABLE never_made AS EXECUTE mystmt",
            "EXPLAIN (ANALYZE false, COSTS off) CREATE TABLE IF NOT EXISTS never_made AS "
            "EXECUTE \"MyStmt\"",
            'DEALLOCATE "MyStmt"',
            "EXECUTE mystmt",
            'EXECUTE "MyStmt"',
            'PREPARE "a""b" AS SELECT 1',
            'EXECUTE "a""b"',
            "PREPARE c AS SELECT 'c' -- a comment to the end of the text",
            "SELECT 0; EXECUTE c",
            'PREPARE "é" AS SELECT \'é\'',
            'EXECUTE "é"; SELECT nosuch',  # the position counts "é" as one character
            "DEALLOCATE ALL",
            "EXECUTE c",
        ])
        for table, conn in (("ctas_direct", pg.connect(user="app", db="app")),
                            ("ctas_pooled", pooler.connect(autocommit=True))):
            with conn:
                conn.execute("PREPARE src (int) AS SELECT g FROM generate_series(1, $1) g")
                conn.execute(f"EXPLAIN (ANALYZE, COSTS off, TIMING off, SUMMARY off) "
                             f"CREATE TABLE {table} AS EXECUTE src(7)")
                conn.execute(f"CREATE TABLE IF NOT EXISTS {table} AS EXECUTE src(7)")
    assert pg.psql("SELECT count(*) FROM ctas_pooled", user="app", db="app") == "7"
    pg.psql("DROP TABLE ctas_direct, ctas_pooled", user="app", db="app")


def test_an_error_in_a_changed_definition_has_postgresqls_position(pg, pooler):
    # A statement whose table changed fails at EXECUTE. PostgreSQL analyses its query again and
    # counts the error's position in the text the PREPARE came in (psql draws no caret under a
    # shorter EXECUTE): so must the pooler, whether the server analyses it again (A) or the
    # pooler prepares it again on another server (B), in a Query or before a Parse.
    steps = [
        ("A", "CREATE TABLE changed_def (id int PRIMARY KEY, x text)"),
        ("A", "SELECT 0; PREPARE foo AS\n  SELECT id, x\n  FROM changed_def GROUP BY id"),
        ("A", "EXECUTE foo"),
        ("A", "ALTER TABLE changed_def DROP CONSTRAINT changed_def_pkey"),
        ("A", "EXECUTE foo"),
        ("B", "EXECUTE foo"),
        ("B", "SELECT 1; EXECUTE foo; SELECT 2"),
        ("B", "EXPLAIN EXECUTE foo"),
        ("B", Extended),
        ("A", "DROP TABLE changed_def"),
        ("A", "EXECUTE foo"),
        ("B", "EXECUTE foo"),
        ("A", "DEALLOCATE foo"),
    ]

    def run(conn, step):
        if step is Extended:
            try:
                Extended(conn).execute("EXECUTE foo")
                return ("ok",)
            except psycopg.Error as e:
                return ("error", e.sqlstate, e.diag.message_primary, e.diag.statement_position)
        return outcome(conn, step)

    with pg.connect(user="app", db="app") as direct:
        expected = [run(direct, sql) for _, sql in steps]
    holders = Holders(pooler)
    try:
        with pooler.connect(autocommit=True) as conn:
            a = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            b = holders.hold_other_than(a)
            holders.release()
            got = []
            for where, sql in steps:
                with holders.holding(b if where == "A" else a):
                    got.append(run(conn, sql))
    finally:
        holders.close()
    for (_, sql), want, have in zip(steps, expected, got):
        assert have == want, f"{sql!r}: PostgreSQL {want}, through pgsluice {have}"
    # The errors did have positions (in the PREPARE's text, past the EXECUTE's end).
    assert expected[4][0] == "error" and int(expected[4][3]) > len("EXECUTE foo"), expected[4]


def test_statements_of_a_client_that_left_are_deallocated(pooler):
    def on_both_servers(sql: str) -> list:
        # c1 holds one server in a transaction, so c2's transaction runs on the other.
        c1.execute("BEGIN")
        first = c1.execute(sql).fetchone()[0]
        second = c2.execute(sql).fetchone()[0]
        c1.execute("COMMIT")
        return [first, second]

    count = "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'pgsluice_s%'"
    with pooler.connect(autocommit=True) as c1, pooler.connect(autocommit=True) as c2:
        b = pooler.connect(autocommit=True)
        b.execute("PREPARE gone AS SELECT 1")
        assert len(set(on_both_servers("SELECT pg_backend_pid()"))) == 2
        c1.execute("BEGIN")
        c1.execute("SELECT 1")
        b.execute("EXECUTE gone")  # now on both servers
        c1.execute("COMMIT")
        assert sorted(on_both_servers(count)) == [1, 1]
        b.close()
        # b has left: its statement goes at each server's next release.
        on_both_servers("SELECT 1")
        assert on_both_servers(count) == [0, 0]


def test_prepare_pin_still_pins(make_pooler):
    pooler = make_pooler(default_pool_size=2, session_state_action="warn,prepare:pin")
    with pooler.connect(autocommit=True) as a:
        a.execute("PREPARE pinned AS SELECT pg_backend_pid()")
        pids = {a.execute("EXECUTE pinned").fetchone()[0] for _ in range(5)}
        assert len(pids) == 1
        # Under pin the statement runs under the client's own name.
        assert a.execute("SELECT name FROM pg_prepared_statements").fetchone()[0] == "pinned"


def test_asyncpg_two_clients_same_name(pooler):
    import asyncpg

    async def one(tag: str) -> int:
        conn = await asyncpg.connect(host="127.0.0.1", port=pooler.port, user="app",
                                     password="app", database="app")
        try:
            # execute() without arguments is a simple-protocol Query.
            await conn.execute(f"PREPARE p AS INSERT INTO sqlprep_async "
                               f"VALUES ('{tag}', pg_backend_pid())")
            rounds = 0
            while rounds < 20 or rounds < 400 and await conn.fetchval(
                    "SELECT count(DISTINCT pid) FROM sqlprep_async WHERE tag = $1", tag) < 2:
                assert await conn.execute("EXECUTE p") == "INSERT 0 1"
                rounds += 1
            with pytest.raises(asyncpg.exceptions.InvalidSQLStatementNameError):
                await conn.execute("EXECUTE never_prepared")
            with pytest.raises(asyncpg.exceptions.DuplicatePreparedStatementError):
                await conn.execute("PREPARE p AS SELECT 1")
            await conn.execute("DEALLOCATE p")
            with pytest.raises(asyncpg.exceptions.InvalidSQLStatementNameError):
                await conn.execute("EXECUTE p")
            return rounds
        finally:
            await conn.close()

    async def both():
        return await asyncio.gather(one("x"), one("y"))

    with pooler.connect(autocommit=True) as setup:
        setup.execute("DROP TABLE IF EXISTS sqlprep_async")
        setup.execute("CREATE TABLE sqlprep_async (tag text, pid int)")
    with noise(pooler), Rotator(pooler):
        rounds = asyncio.run(both())
    with pooler.connect(autocommit=True) as check:
        rows = check.execute("SELECT tag, count(*), count(DISTINCT pid) FROM sqlprep_async "
                             "GROUP BY tag ORDER BY tag").fetchall()
        check.execute("DROP TABLE sqlprep_async")
    assert rows == [("x", rounds[0], 2), ("y", rounds[1], 2)], rows


def test_asyncpg_fetch_of_execute_through_its_named_statements(pooler):
    # asyncpg's fetch() prepares every text as a named protocol-level statement (cached, bound
    # again later on whichever server): "EXECUTE q(…)" is renamed there too, and the SQL
    # statement prepared before it on every server it is bound on.
    import asyncpg

    async def one(tag: str) -> set:
        conn = await asyncpg.connect(host="127.0.0.1", port=pooler.port, user="app",
                                     password="app", database="app")
        pids = set()
        try:
            await conn.execute(f"PREPARE q (int) AS SELECT '{tag}' || $1, pg_backend_pid(), "
                               "pg_sleep(0.002)")
            for i in range(400):
                n = i % 3  # texts cached by asyncpg, bound again on any server
                value, pid, _ = await conn.fetchrow(f"EXECUTE q({n})")
                assert value == f"{tag}{n}", value
                pids.add(pid)
                if i >= 20 and len(pids) == 2:
                    break
        finally:
            await conn.close()
        return pids

    async def both():
        return await asyncio.gather(one("x"), one("y"))

    with noise(pooler), Rotator(pooler):
        seen = asyncio.run(both())
    assert [len(p) for p in seen] == [2, 2], seen


def test_node_postgres_two_clients_same_name(pooler):
    with noise(pooler), Rotator(pooler):
        rc, out, err = harness.run_node("sql_prepare.js", str(pooler.port), "3", "400")
    assert rc == 0, out + err
    assert out.strip() == "ok 3 2", f"every client should have run on both servers: {out}"


@pytest.mark.parametrize("mode", ["extended", "simple"])
def test_pgjdbc_two_clients_same_name(pooler, tmp_path, mode):
    # pgjdbc's default sends every statement as an unnamed Parse; preferQueryMode=simple as a
    # Query.
    with noise(pooler, clients=2), Rotator(pooler):
        rc, out, err = harness.run_java("SqlPrepareThroughPool", str(tmp_path), str(pooler.port),
                                        "2", "400", mode, timeout=240)
    assert rc == 0, out + err
    assert out.strip() == "ok 2 2", f"every connection should have run on both servers: {out}"
