"""SUSPEND, RESUME and the waiting shutdowns (SIGINT / SHUTDOWN WAIT_FOR_SERVERS, SIGTERM /
SHUTDOWN WAIT_FOR_CLIENTS) as PgBouncer 1.25 behaves, with real clients (psycopg, the raw
protocol client): during SUSPEND new connections wait instead of being refused; during a waiting
shutdown the TCP port is closed but the Unix socket serves the admin console; SIGINT lets a client
that holds a server (a transaction, or in session mode its session) go on, and closes one without
a server only when it starts its next transaction."""
from __future__ import annotations

import os
import signal
import socket
import struct
import threading
import time

import psycopg
import pytest

import harness
from test_ops_lifecycle import read_error, wait_exit

ADMIN = {"admin_users": "app"}


def unix_connect(pooler: harness.Pooler, db: str = "app") -> psycopg.Connection:
    return pooler.connect(db=db, autocommit=True, host=pooler.dir)


def unix_login_error(pooler: harness.Pooler, db: str = "app") -> harness.PgError | None:
    """A StartupMessage over the Unix socket; the ErrorResponse it gets (None: none)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(os.path.join(pooler.dir, f".s.PGSQL.{pooler.port}"))
        body = struct.pack("!i", 196608) + b"user\0app\0database\0" + db.encode() + b"\0\0"
        s.sendall(struct.pack("!i", len(body) + 4) + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
            if len(data) >= 5 and len(data) >= 1 + struct.unpack("!i", data[1:5])[0]:
                break
    if not data.startswith(b"E"):
        return None
    fields = {}
    for part in data[5:1 + struct.unpack("!i", data[1:5])[0]].split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode()
    return harness.PgError(fields)


def tcp_refused(pooler: harness.Pooler) -> bool:
    try:
        socket.create_connection((harness.HOST, pooler.port), timeout=2).close()
    except OSError:
        return True
    return False


def test_suspend_holds_new_connections_until_resume(make_pooler):
    """PgBouncer keeps its listening sockets during SUSPEND: a client connecting then waits for
    RESUME and is served, instead of being refused (PgBouncer's test_suspend_resume)."""
    pooler = make_pooler(**ADMIN)
    with pooler.connect(autocommit=True) as warm:  # the pool has a server
        assert warm.execute("SELECT 1").fetchone() == (1,)
    admin = pooler.raw(db="pgsluice")
    admin.query("SUSPEND")
    results: list = []

    def client() -> None:
        try:
            with pooler.connect(autocommit=True) as conn:
                results.append(conn.execute("SELECT 42").fetchone()[0])
        except Exception as e:  # noqa: BLE001 - reported below
            results.append(e)

    thread = threading.Thread(target=client)
    thread.start()
    time.sleep(1.0)
    assert results == [], results  # neither refused nor served while suspended
    admin.query("RESUME")
    thread.join(10)
    assert results == [42], results
    admin.close()


@pytest.mark.parametrize("mode", ["WAIT_FOR_CLIENTS", "WAIT_FOR_SERVERS"])
def test_waiting_shutdown_keeps_the_unix_socket_for_the_console(make_pooler, mode):
    """The TCP port closes; the Unix socket stays until the exit, for the console only: other
    logins on it get 57P03 'pooler is shutting down' (PgBouncer's words)."""
    pooler = make_pooler(unix_socket_dir="{dir}", **ADMIN)
    path = os.path.join(pooler.dir, f".s.PGSQL.{pooler.port}")
    c = pooler.raw()
    c.query("BEGIN")  # holds its server: both modes wait for it
    with unix_connect(pooler, db="pgsluice") as admin:
        admin.execute(f"SHUTDOWN {mode}")
    time.sleep(0.5)
    assert tcp_refused(pooler)
    err = unix_login_error(pooler)
    assert err is not None and err.sqlstate == "57P03", err
    assert err.message == "pooler is shutting down", err
    with unix_connect(pooler, db="pgsluice") as admin:
        assert admin.execute("SHOW VERSION").fetchone()[0]
    assert pooler.alive()
    c.query("COMMIT")
    c.close()
    assert wait_exit(pooler, 10) == 0
    assert not os.path.exists(path)  # removed at the exit


def test_resume_is_refused_during_a_shutdown(make_pooler):
    pooler = make_pooler(**ADMIN)
    c = pooler.raw()
    assert c.scalar("SELECT 1") == "1"
    admin = pooler.raw(db="pgsluice")
    admin.query("PAUSE")
    admin.query("SHUTDOWN WAIT_FOR_CLIENTS")
    with pytest.raises(harness.PgError) as e:
        admin.query("RESUME")
    assert e.value.message == "pooler is shutting down" and e.value.sqlstate == "08P01", e.value
    admin.close()
    c.close()
    assert wait_exit(pooler, 10) == 0


def test_sigint_lets_a_session_mode_client_finish(make_pooler):
    """Session mode: the client holds its server between transactions; SIGINT waits for it to
    leave (PgBouncer's test_repeated_sigint); a second SIGINT exits at once."""
    pooler = make_pooler(pool_mode="session")
    c = pooler.raw()
    assert c.scalar("SELECT 1") == "1"
    pooler.proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert c.scalar("SELECT 2") == "2"
    assert pooler.alive()
    assert tcp_refused(pooler)
    pooler.proc.send_signal(signal.SIGINT)
    assert wait_exit(pooler, 10) == 0
    err = read_error(c, timeout=5)
    assert err is not None and err.sqlstate == "57P01", err


def test_wait_for_servers_closes_a_client_at_its_next_transaction(make_pooler):
    """Transaction mode: a client without a server stays connected until it starts a
    transaction, which is refused (57P01, logged 'server shutting down'); the one inside a
    transaction finishes it."""
    pooler = make_pooler(**ADMIN)
    inside = pooler.raw()
    inside.query("BEGIN")
    idle = pooler.raw()
    assert idle.scalar("SELECT 1") == "1"
    admin = pooler.raw(db="pgsluice")
    admin.query("SHUTDOWN WAIT_FOR_SERVERS")
    time.sleep(0.6)  # a few janitor rounds
    assert "server shutting down" not in pooler.log(), pooler.log()[-3000:]
    assert inside.scalar("SELECT 3") == "3"
    idle.send_query("SELECT 4")
    err = read_error(idle, timeout=5)
    assert err is not None and err.sqlstate == "57P01", err
    assert pooler.wait_for_log(r"server shutting down", 5), pooler.log()[-3000:]
    assert pooler.alive()
    inside.query("COMMIT")
    assert wait_exit(pooler, 10) == 0
    assert "server connections dropped, exiting" in pooler.log()
