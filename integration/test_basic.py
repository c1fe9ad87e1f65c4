"""Basic protocol behaviour through pgsluice in transaction mode: simple and extended query
protocols, COPY in and out, errors and rollbacks, NOTICE, cancel, pipelining and startup
parameters."""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from decimal import Decimal

import psycopg
import psycopg.errors
import pytest

import harness
from hopping import Rotator


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def pooler(pgbench_data):
    p = harness.Pooler(pgbench_data, pool_mode="transaction", default_pool_size=5)
    yield p
    p.stop()


def test_simple_query_psql(pooler):
    rc, out, err = pooler.psql("SELECT 1 + 41, current_user, current_database()")
    assert rc == 0, err
    assert out.strip() == "42|app|app"


def test_multi_statement_simple_query(pooler):
    rc, out, err = pooler.psql("SELECT 1; SELECT 2; SELECT 'three'")
    assert rc == 0, err
    assert out.split() == ["1", "2", "three"]


def test_ssl_request_answered_n(pooler):
    with pooler.raw(ssl_request=True) as c:
        assert c.ssl_response == b"N"
        assert c.scalar("SELECT 7") == "7"
        # The client gets the server's parameter set and a BackendKeyData.
        for name in ("server_version", "client_encoding", "DateStyle", "TimeZone",
                     "standard_conforming_strings", "integer_datetimes"):
            assert name in c.parameters, c.parameters
        assert c.backend_key is not None


def test_extended_protocol_psycopg(pooler):
    with pooler.connect(autocommit=True) as conn:
        rows = conn.execute("SELECT %s::int + %s::int, %s::text, %s::numeric * 2",
                            (40, 2, "héllo wörld", "1.25")).fetchall()
        assert rows == [(42, "héllo wörld", Decimal("2.50"))]
        # Binary results and a NULL parameter.
        with conn.cursor(binary=True) as cur:
            cur.execute("SELECT %s::bigint, %s::text IS NULL", (2**40, None))
            assert cur.fetchone() == (2**40, True)
        # Many rows through one Execute.
        total = conn.execute("SELECT sum(g) FROM generate_series(1, %s) g",
                             (100000,)).fetchone()[0]
        assert total == 100000 * 100001 // 2
        # Execute with several parameter sets (executemany pipelines Bind/Execute).
        t = unique("ext")
        conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {t} VALUES (%s, %s)",
                            [(i, f"v{i}") for i in range(200)])
        assert conn.execute(f"SELECT count(*), sum(id) FROM {t}").fetchone() == (200, 19900)
        conn.execute(f"DROP TABLE {t}")


def test_pgbench_extended(pooler):
    # The TPC-B-like script: BEGIN; 3 UPDATEs, SELECT, INSERT; END, in extended protocol.
    rc, out, err = pooler.pgbench(["-M", "extended", "-c", "4", "-j", "1", "-t", "100",
                                   "--no-vacuum"])
    assert rc == 0, out + err
    assert "number of transactions actually processed: 400/400" in out, out
    m = re.search(r"number of failed transactions: (\d+)", out)
    assert m and m.group(1) == "0", out


def test_copy_in_and_out_psql(pooler):
    t = unique("copy")
    n = 20000
    rows = "".join(f"{i}\tname {i}\t{'x' * (i % 50)}\n" for i in range(n))
    script = (f"CREATE TABLE {t} (id int, name text, pad text);\n"
              f"COPY {t} FROM STDIN;\n{rows}\\.\n"
              f"SELECT count(*), sum(id) FROM {t};\n")
    rc, out, err = pooler.psql(input=script, args=["-f", "-"])
    assert rc == 0, err
    assert out.strip().splitlines()[-1] == f"{n}|{n * (n - 1) // 2}"

    rc, out, err = pooler.psql(f"COPY (SELECT * FROM {t} ORDER BY id) TO STDOUT")
    assert rc == 0, err
    assert out == rows

    # A COPY that fails halfway (bad row) is an error; the next statement works.
    bad = f"COPY {t} FROM STDIN;\n1\ta\tb\nnot-a-number\tb\tc\n\\.\n"
    rc, out, err = pooler.psql(input=bad, args=["-f", "-"])
    assert rc != 0
    assert "invalid input syntax for type integer" in err
    rc, out, err = pooler.psql(f"SELECT count(*) FROM {t}")
    assert rc == 0, err
    assert out.strip() == str(n)
    assert pooler.psql(f"DROP TABLE {t}")[0] == 0


def test_copy_psycopg(pooler):
    t = unique("copyp")
    with pooler.connect(autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {t} (id int, v text)")
        with conn.cursor() as cur:
            with cur.copy(f"COPY {t} FROM STDIN") as copy:
                for i in range(5000):
                    copy.write_row((i, f"row{i}"))
            assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 5000
            with cur.copy(f"COPY (SELECT id, v FROM {t} ORDER BY id) TO STDOUT") as copy:
                out = list(copy.rows())
            assert len(out) == 5000 and out[-1] == ("4999", "row4999")
        conn.execute(f"DROP TABLE {t}")


def test_error_in_transaction_then_rollback(pooler):
    t = unique("err")
    with pooler.connect() as conn:  # not autocommit: psycopg opens transactions
        conn.execute(f"CREATE TABLE {t} (id int)")
        conn.commit()
        conn.execute(f"INSERT INTO {t} VALUES (1)")
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")
        # Still the same (failed) transaction: the server was not released at the error.
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == 0
        conn.execute(f"INSERT INTO {t} VALUES (2)")
        conn.commit()
        assert conn.execute(f"SELECT array_agg(id) FROM {t}").fetchone()[0] == [2]
        conn.rollback()

    # The same through psql's simple protocol, without ON_ERROR_STOP.
    script = (f"BEGIN;\nINSERT INTO {t} VALUES (3);\nSELECT * FROM no_such_table;\n"
              f"SELECT 'after error';\nROLLBACK;\nSELECT 'next', count(*) FROM {t};\n"
              f"DROP TABLE {t};\n")
    rc, out, err = pooler.psql(input=script, args=["-v", "ON_ERROR_STOP=0", "-f", "-"])
    assert 'relation "no_such_table" does not exist' in err
    assert "current transaction is aborted" in err
    assert "next|1" in out.splitlines(), out


def test_error_outside_transaction(pooler):
    with pooler.connect(autocommit=True) as conn:
        for _ in range(20):
            with pytest.raises(psycopg.errors.UndefinedColumn):
                conn.execute("SELECT no_such_column")
            assert conn.execute("SELECT 5").fetchone()[0] == 5


def test_notice_reaches_client(pooler):
    notices = []
    with pooler.connect(autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append((d.severity, d.message_primary)))
        conn.execute("DO $$BEGIN RAISE NOTICE 'hello'; END$$")
        conn.execute("DO $$BEGIN RAISE WARNING 'careful %', 42; END$$")
    assert ("NOTICE", "hello") in notices
    assert ("WARNING", "careful 42") in notices

    rc, out, err = pooler.psql("DO $$BEGIN RAISE NOTICE 'hello from psql'; END$$")
    assert rc == 0, err
    assert "NOTICE:  hello from psql" in err


def test_cancel_pg_sleep(pooler):
    with pooler.connect(autocommit=True) as conn:
        timer = threading.Timer(0.5, conn.cancel)
        start = time.monotonic()
        timer.start()
        try:
            with pytest.raises(psycopg.errors.QueryCanceled) as info:
                conn.execute("SELECT pg_sleep(10)")
        finally:
            timer.cancel()
        elapsed = time.monotonic() - start
        assert info.value.sqlstate == "57014"
        # Documented bound: cancelled at 0.5 s; allow a few seconds on a loaded machine.
        assert elapsed < 5, f"cancel took {elapsed:.1f} s"
        # The connection stays usable.
        assert conn.execute("SELECT 'alive'").fetchone()[0] == "alive"


def test_cancel_reaches_a_server_named_by_host_name(pg, make_pooler):
    # The [databases] host is a name: the cancel goes to the address the server's connection
    # reached (it was logged "not an IP address" and never sent).
    p = make_pooler(databases={"app": "host=localhost port={pg_port} dbname=app"})
    with p.connect(autocommit=True) as conn:
        timer = threading.Timer(0.5, conn.cancel)
        timer.start()
        try:
            with pytest.raises(psycopg.errors.QueryCanceled):
                conn.execute("SELECT pg_sleep(10)")
        finally:
            timer.cancel()
    assert "not an IP address" not in p.log(), p.log()


def test_cancel_of_idle_client_is_harmless(pooler):
    with pooler.connect(autocommit=True) as idle, pooler.connect(autocommit=True) as busy:
        idle.execute("SELECT 1")
        idle.cancel()  # nothing runs for it: must not cancel anybody else's query
        assert busy.execute("SELECT pg_sleep(1.5), 'done'").fetchone()[1] == "done"
        assert idle.execute("SELECT 2").fetchone()[0] == 2


def test_pipeline_mode(pooler):
    t = unique("pipe")
    with pooler.connect(autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {t} (id int, v text)")
        with conn.pipeline():
            cursors = []
            for i in range(50):
                conn.execute(f"INSERT INTO {t} VALUES (%s, %s)", (i, f"v{i}"))
                cursors.append(conn.execute("SELECT %s::int * 2", (i,)))
        assert [c.fetchone()[0] for c in cursors] == [2 * i for i in range(50)]
        assert conn.execute(f"SELECT count(*), sum(id) FROM {t}").fetchone() == (50, 1225)

        # An error inside a pipeline aborts what follows up to the next Sync; then it works.
        with pytest.raises(psycopg.errors.DivisionByZero):
            with conn.pipeline():
                conn.execute("SELECT 1")
                conn.execute("SELECT 1 / 0")
                conn.execute(f"INSERT INTO {t} VALUES (999, 'never')")
        assert conn.execute(f"SELECT count(*) FROM {t} WHERE id = 999").fetchone()[0] == 0

    # A transaction inside a pipeline (not autocommit).
    with pooler.connect() as conn:
        with conn.pipeline():
            with conn.transaction():
                for i in range(100, 110):
                    conn.execute(f"INSERT INTO {t} VALUES (%s, 'tx')", (i,))
            cur = conn.execute(f"SELECT count(*) FROM {t} WHERE v = 'tx'")
        assert cur.fetchone()[0] == 10
        conn.execute(f"DROP TABLE {t}")
        conn.commit()


def test_startup_parameters_kept_across_servers(pgbench_data, make_pooler):
    """Startup parameters (options -c, search_path, extra_float_digits, application_name) are
    accepted without configuration and in effect in every transaction, though only 2 servers
    serve 6 clients with different settings."""
    # Each worker's share of the pool tends to keep one server (servers move between workers
    # only when a worker's clients wait): a rotator holds the two servers in turn, so that every
    # client's transactions run on both, and each client goes on until they have.
    pooler = make_pooler(pool_mode="transaction", default_pool_size=2)
    pgbench_data.psql("CREATE SCHEMA IF NOT EXISTS foo AUTHORIZATION app; "
                      "CREATE SCHEMA IF NOT EXISTS bar AUTHORIZATION app", db="app")
    iterations = 60
    errors: list[str] = []
    servers_seen: list[set] = []

    def rounds(seen: set):
        """`iterations` transactions, and on until both servers served the client."""
        n = 0
        while n < iterations or (len(seen) < 2 and n < 10 * iterations):
            n += 1
            yield n

    def check_psycopg(search_path: str, app_name: str) -> None:
        try:
            seen = set()
            with pooler.connect(autocommit=True, options=f"-c search_path={search_path}",
                                application_name=app_name) as conn:
                for _ in rounds(seen):
                    row = conn.execute("SELECT current_setting('search_path'), "
                                       "current_setting('application_name'), "
                                       "pg_backend_pid()").fetchone()
                    if row[:2] != (search_path, app_name):
                        errors.append(f"{app_name}: got {row[:2]}")
                        return
                    seen.add(row[2])
                    time.sleep(random.random() * 0.01)
            servers_seen.append(seen)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{app_name}: {e!r}")

    def check_raw(params: dict[str, str]) -> None:
        try:
            seen = set()
            with pooler.raw(params=params) as c:
                for _ in rounds(seen):
                    row = c.query("SELECT current_setting('search_path'), "
                                  "current_setting('extra_float_digits'), "
                                  "current_setting('application_name'), pg_backend_pid()")[0]
                    want = [params["search_path"], params["extra_float_digits"],
                            params["application_name"]]
                    if row[:3] != want:
                        errors.append(f"{params}: got {row[:3]}")
                        return
                    seen.add(int(row[3]))
                    time.sleep(random.random() * 0.01)
            servers_seen.append(seen)
        except Exception as e:  # noqa: BLE001
            errors.append(f"{params}: {e!r}")

    raw_params = [
        {"search_path": "bar", "extra_float_digits": "2", "application_name": "raw_two"},
        {"search_path": "foo", "extra_float_digits": "0", "application_name": "raw_zero"},
        {"search_path": "public", "extra_float_digits": "-3", "application_name": "raw_minus"},
    ]
    threads = [threading.Thread(target=check_psycopg, args=(sp, name))
               for sp, name in (("foo", "client_foo"), ("bar", "client_bar"),
                                ("public", "client_public"))]
    threads += [threading.Thread(target=check_raw, args=(p,)) for p in raw_params]
    with Rotator(pooler):
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
    assert not errors, errors
    assert len(servers_seen) == 6
    all_servers = set().union(*servers_seen)
    assert len(all_servers) <= 2, f"more server connections than the pool size: {all_servers}"
    # The check means something only if clients really moved between servers: every one did.
    assert all(len(s) == 2 for s in servers_seen), servers_seen


def test_a_value_the_server_spells_otherwise_is_set_once(make_pooler):
    # DateStyle=ISO is 'ISO, MDY' on the server, and PostgreSQL reports no change: the client's
    # value takes the server's spelling (as PgBouncer's canonical value), so that the next
    # transaction on the same server does not set it again.
    pooler = make_pooler(pool_mode="transaction", default_pool_size=1, verbose=2)
    with pooler.connect(autocommit=True, options="-c DateStyle=ISO") as conn:
        for _ in range(3):
            assert conn.execute("SHOW DateStyle").fetchone()[0] == "ISO, MDY"
        assert conn.info.parameter_status("DateStyle") == "ISO, MDY"
    assert pooler.log().count("SET DateStyle='ISO';") == 1, pooler.log()


def test_ignore_startup_parameters_drops_them_inside_options_too(make_pooler):
    # A name in ignore_startup_parameters never reaches the server from a client, whether sent
    # as a parameter or as a -c setting of `options` (PgBouncer 1.25 drops both; its suite's
    # test_options_startup_param and test_startup_packet_larger_than_pktbuf send them there).
    pooler = make_pooler(pool_mode="transaction", default_pool_size=1,
                         ignore_startup_parameters="extra_float_digits")
    with pooler.connect(autocommit=True, options="-c extra_float_digits=2 -c work_mem=3MB") as c:
        assert c.execute("SHOW extra_float_digits").fetchone()[0] == "1"
        # What the list does not name is kept as always.
        assert c.execute("SHOW work_mem").fetchone()[0] == "3MB"
    # A value PostgreSQL would refuse is no trouble when it is ignored.
    with pooler.connect(autocommit=True, options="-c extra_float_digits=" + "1" * 4096) as c:
        assert c.execute("SELECT 1").fetchone()[0] == 1


def test_connect_query_runs_once_per_server(make_pooler):
    pooler = make_pooler(
        databases={"app": "host=127.0.0.1 port={pg_port} dbname=app "
                          "connect_query='CREATE TEMP TABLE cq_marker AS SELECT 42 AS v'"},
        default_pool_size=1)
    with pooler.connect(autocommit=True) as a:
        assert a.execute("SELECT v FROM pg_temp.cq_marker").fetchone()[0] == 42
    with pooler.connect(autocommit=True) as b:
        assert b.execute("SELECT count(*) FROM pg_temp.cq_marker").fetchone()[0] == 1


def test_failing_connect_query_is_a_login_error(make_pooler):
    pooler = make_pooler(
        databases={"app": "host=127.0.0.1 port={pg_port} dbname=app "
                          "connect_query='SELECT no_such_function()'"},
        default_pool_size=1)
    with pytest.raises(psycopg.OperationalError) as e:
        pooler.connect(autocommit=True)
    assert "connect_query failed" in str(e.value)
