"""A statement never returns rows of a shape the client was not told (issue 42, part 2).

PostgreSQL fixes a named statement's result type at its Parse: after ALTER TABLE changes the
columns of a prepared `SELECT *`, its Bind gets 0A000 "cached plan must not change result type",
and drivers that cache the row description (pgx, PHP PDO, asyncpg, pgjdbc) recover from that.
Through a pool the statement may be prepared afresh on another server, which describes the new
shape and reports nothing stale: the pooler must give the client PostgreSQL's 0A000 there too.
The raw tests speak the protocol as pgx does (Parse + Describe 'S' at prepare, then Bind with one
result format per column and Execute, no Describe); the driver tests run pgx 4 (Go) and PHP PDO
through the pooler and directly, and compare what each saw."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import threading

import psycopg
import pytest

import harness
from test_prepared import SYNC, close, describe, error_code, execute, parse, read_until_ready, \
    send_batch, types_of


def bind_formats(stmt: str, formats: int) -> tuple[bytes, bytes]:
    """A Bind with no parameters and one (text) result format per column, as pgx sends."""
    body = b"\0" + stmt.encode() + b"\0" + struct.pack("!hh", 0, 0)
    body += struct.pack("!h", formats) + struct.pack("!h", 0) * formats
    return b"B", body


def flush_sql(pooler, sql: str) -> None:
    with psycopg.connect(pooler.dsn(), autocommit=True) as c:
        c.execute(sql)


class BusyServer:
    """Holds one server of the pool of 2 in an open transaction, so that the next link gets
    the other one: with `leave_free`, the server of that backend pid."""

    def __init__(self, pooler, leave_free: int | None = None):
        self.conn = psycopg.connect(pooler.dsn())
        self.pid = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        if leave_free is not None and self.pid == leave_free:
            other = psycopg.connect(pooler.dsn())
            pid = other.execute("SELECT pg_backend_pid()").fetchone()[0]
            assert pid != leave_free
            self.release()
            self.conn, self.pid = other, pid

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


def pid_of(c) -> int:
    send_batch(c, [(b"Q", b"SELECT pg_backend_pid()\0")])
    replies = read_until_ready(c)
    return int([b for k, b in replies if k == "D"][0][6:])


@pytest.fixture
def pooler(make_pooler):
    return make_pooler(default_pool_size=2, admin_users="app")


def prepare_told(c, name: str, sql: str) -> int:
    """pgx's prepare: Parse, Describe 'S', Sync; the number of columns it was told."""
    send_batch(c, [parse(name, sql), describe("S", name), SYNC])
    replies = read_until_ready(c)
    assert types_of(replies) == "1tTZ", replies
    return struct.unpack("!h", replies[2][1][:2])[0]


def run_told(c, name: str, columns: int):
    send_batch(c, [bind_formats(name, columns), execute(), SYNC])
    return read_until_ready(c)


def test_a_fresh_server_after_alter_gives_0A000_not_the_new_shape(pooler):
    flush_sql(pooler, "DROP TABLE IF EXISTS shape_t; CREATE TABLE shape_t (a int, b int); "
                      "INSERT INTO shape_t VALUES (1, 2)")
    with pooler.raw() as c:
        # Told 2 columns on one server; the other server never saw the statement.
        busy = BusyServer(pooler)
        try:
            told = prepare_told(c, "s1", "SELECT * FROM shape_t")
            assert told == 2
        finally:
            busy.release()
        flush_sql(pooler, "ALTER TABLE shape_t ADD COLUMN c int DEFAULT 3")
        # Each Bind lands on one server or the other: on both, PostgreSQL's 0A000, every time,
        # never the 08P01 of a format count that no longer fits, never three columns.
        pids = set()
        busy = BusyServer(pooler)
        pids.add(busy.pid)
        pids.add(pid_of(c))
        busy.release()
        assert len(pids) == 2
        seen_pids = set()
        for i in range(6):
            busy = BusyServer(pooler, leave_free=sorted(pids)[i % 2])
            try:
                replies = run_told(c, "s1", told)
                seen_pids.add(pid_of(c))
            finally:
                busy.release()
            assert types_of(replies) == "EZ", replies
            assert error_code(replies[0][1]) == "0A000", replies
            assert b"cached plan must not change result type" in replies[0][1]
        assert len(seen_pids) == 2, seen_pids
        # pgx's recovery: deallocate, prepare again, and the new shape comes, as told.
        send_batch(c, [close("S", "s1"), SYNC])
        assert types_of(read_until_ready(c)) == "3Z"
        told = prepare_told(c, "s1", "SELECT * FROM shape_t")
        assert told == 3
        for _ in range(4):
            replies = run_told(c, "s1", told)
            assert types_of(replies) == "2DCZ", replies
            assert struct.unpack("!h", replies[1][1][:2])[0] == 3


def test_a_server_prepared_after_alter_by_another_client_gives_0A000(pooler):
    flush_sql(pooler, "DROP TABLE IF EXISTS shape_u; CREATE TABLE shape_u (a int); "
                      "INSERT INTO shape_u VALUES (1)")
    with pooler.raw() as c, pooler.raw() as other:
        told = prepare_told(c, "mine", "SELECT * FROM shape_u")
        flush_sql(pooler, "ALTER TABLE shape_u ADD COLUMN b int DEFAULT 7")
        # Another client prepares the same text on both servers after the change: they describe
        # two columns and report nothing stale.
        for _ in range(2):
            busy = BusyServer(pooler)
            try:
                assert prepare_told(other, f"theirs{_}", "SELECT * FROM shape_u") == 2
            finally:
                busy.release()
        for _ in range(4):
            replies = run_told(c, "mine", told)
            assert types_of(replies) == "EZ", replies
            assert error_code(replies[0][1]) == "0A000"
        # The other client, told two columns, reads two columns.
        replies = run_told(other, "theirs0", 2)
        assert types_of(replies) == "2DCZ", replies


def test_a_client_never_told_a_shape_still_reads_the_new_one(pooler):
    # libpq's way (psycopg, PQexecPrepared): Bind, Describe the portal, Execute: every batch
    # brings its own row description, so the new shape is what the client is told.
    flush_sql(pooler, "DROP TABLE IF EXISTS shape_v; CREATE TABLE shape_v (a int); "
                      "INSERT INTO shape_v VALUES (1)")
    with pooler.raw() as c:
        send_batch(c, [parse("p", "SELECT * FROM shape_v"), SYNC])
        assert types_of(read_until_ready(c)) == "1Z"
        flush_sql(pooler, "ALTER TABLE shape_v ADD COLUMN b int DEFAULT 7")
        for _ in range(4):
            busy = BusyServer(pooler)
            try:
                send_batch(c, [bind_formats("p", 0), describe("P", ""), execute(), SYNC])
                replies = read_until_ready(c)
            finally:
                busy.release()
            assert types_of(replies) == "2TDCZ", replies
            assert struct.unpack("!h", replies[1][1][:2])[0] == 2


# --- real drivers, through the pooler and directly ---

PGX_PROGRAM = r'''
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v4"
)

// Runs SELECT * FROM <table> with pgx 4's default statement cache, then waits for a line on
// stdin (the test alters the table), then runs it 5 more times: one line per run.
func main() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Args[1])
	if err != nil {
		fmt.Println("connect:", err)
		os.Exit(1)
	}
	defer conn.Close(ctx)
	run := func() {
		rows, err := conn.Query(ctx, "SELECT * FROM "+os.Args[2])
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		n := 0
		for rows.Next() {
			n = len(rows.RawValues())
		}
		if err := rows.Err(); err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println("columns:", n)
	}
	run()
	fmt.Println("ready")
	var line string
	fmt.Scanln(&line)
	for i := 0; i < 5; i++ {
		run()
	}
}
'''

PHP_PROGRAM = r'''<?php
// PDO with server-side prepares: prepare once, execute before and after the table changes.
$pdo = new PDO($argv[1], $argv[2], $argv[3], [PDO::ATTR_EMULATE_PREPARES => false,
    PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
$st = $pdo->prepare("SELECT * FROM " . $argv[4]);
$run = function () use ($st) {
    try {
        $st->execute();
        $row = $st->fetch(PDO::FETCH_NUM);
        echo "columns: " . $st->columnCount() . " values: " . count($row) . "\n";
    } catch (PDOException $e) {
        echo "error: SQLSTATE " . $e->getCode() . "\n";
    }
};
$run();
echo "ready\n";
fgets(STDIN);
for ($i = 0; $i < 5; $i++) {
    $run();
}
'''


def go_pgx_available() -> bool:
    return shutil.which("go") is not None and \
        os.path.isdir("/usr/share/gocode/src/github.com/jackc/pgx/v4")


@pytest.fixture(scope="module")
def pgx_binary():
    if not go_pgx_available():
        pytest.skip("Go and Debian's golang-github-jackc-pgx-v4-dev are not installed "
                    "(scripts/install-deps installs them)")
    work = tempfile.mkdtemp(prefix="pgsluice-pgx-")
    with open(os.path.join(work, "main.go"), "w") as f:
        f.write(PGX_PROGRAM)
    # Debian's packaged Go sources, GOPATH mode, nothing fetched; the build cache is Go's own
    # (~/.cache/go-build), so the suite's later passes rebuild in seconds.
    env = dict(os.environ, GOPATH="/usr/share/gocode", GO111MODULE="off", GOPROXY="off")
    if not any(os.environ.get(v) for v in ("GOCACHE", "XDG_CACHE_HOME", "HOME")):
        env["GOCACHE"] = os.path.join(tempfile.gettempdir(), "pgsluice-go-build")
    out = subprocess.run(["go", "build", "-o", "pgxshape", "main.go"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    yield os.path.join(work, "pgxshape")
    shutil.rmtree(work, ignore_errors=True)


def run_driver(cmd: list[str], alter, hold_other_server=None) -> list[str]:
    """Starts the driver program, alters the table when it says ready, returns its lines."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    assert proc.stdout is not None and proc.stdin is not None
    for line in proc.stdout:
        lines.append(line.strip())
        if line.strip() == "ready":
            break
    alter()
    holder = hold_other_server() if hold_other_server else None
    try:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=120)
    finally:
        if holder is not None:
            holder()
    lines += out.strip().splitlines()
    assert proc.returncode == 0, lines
    return lines


def through_pool_and_directly(pg, pooler, table: str, command) -> tuple[list, list]:
    """The same driver run directly against PostgreSQL and through the pooler (whose other
    server is kept busy by a bystander looping short transactions): (direct, pooled)."""
    results = []
    for target in ("direct", "pooled"):
        pg.psql(f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (a int, b int); "
                f"INSERT INTO {table} VALUES (1, 2); GRANT ALL ON {table} TO app", db="app")

        def alter():
            pg.psql(f"ALTER TABLE {table} ADD COLUMN c int DEFAULT 3", db="app")

        stop = threading.Event()

        def bystanders():
            # Other clients: the statement's transactions land on both servers.
            def loop():
                with pooler.connect(autocommit=True) as c:
                    while not stop.is_set():
                        c.execute("SELECT pg_sleep(0.003)")
            threads = [threading.Thread(target=loop) for _ in range(2)]
            for t in threads:
                t.start()

            def end():
                stop.set()
                for t in threads:
                    t.join(timeout=30)
            return end

        results.append(run_driver(command(target), alter,
                                  bystanders if target == "pooled" else None))
    return results[0], results[1]


def test_pgx_after_alter_behaves_as_directly(pg, make_pooler, pgx_binary):
    pooler = make_pooler(default_pool_size=2)

    def command(target):
        port = pg.port if target == "direct" else pooler.port
        return [pgx_binary, f"postgres://app:app@127.0.0.1:{port}/app?sslmode=disable",
                "shape_pgx"]

    direct, pooled = through_pool_and_directly(pg, pooler, "shape_pgx", command)
    print("direct:", direct, "pooled:", pooled)
    assert not any("08P01" in line or "result formats" in line for line in pooled), pooled
    assert pooled == direct, (pooled, direct)


def test_pdo_after_alter_behaves_as_directly(pg, make_pooler):
    if shutil.which("php") is None or subprocess.run(
            ["php", "-r", "exit(in_array('pgsql', PDO::getAvailableDrivers()) ? 0 : 1);"]
    ).returncode != 0:
        pytest.skip("php-cli and php-pgsql are not installed (scripts/install-deps installs them)")
    pooler = make_pooler(default_pool_size=2)
    work = tempfile.mkdtemp(prefix="pgsluice-pdo-")
    script = os.path.join(work, "shape.php")
    with open(script, "w") as f:
        f.write(PHP_PROGRAM)

    def command(target):
        port = pg.port if target == "direct" else pooler.port
        return ["php", script, f"pgsql:host=127.0.0.1;port={port};dbname=app", "app", "app",
                "shape_pdo"]

    direct, pooled = through_pool_and_directly(pg, pooler, "shape_pdo", command)
    print("direct:", direct, "pooled:", pooled)
    assert pooled == direct, (pooled, direct)
