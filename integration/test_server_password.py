"""A server password changed under a running pool (PgBouncer's test_change_server_password_*):
the pool's next login fails, and then the clients waiting for it hear PostgreSQL's error at once
and the login is not retried before server_login_retry — also while a client still holds a
server that RECONNECT marked to close, which serves nobody else."""

from __future__ import annotations

import re
import threading
import time

import psycopg
import pytest

import harness


@pytest.fixture
def rotor(pg):
    pg.psql("DROP ROLE IF EXISTS rotor; "
            "CREATE ROLE rotor LOGIN PASSWORD 'foo'; GRANT ALL ON DATABASE app TO rotor")
    yield "rotor"
    pg.psql("ALTER ROLE rotor PASSWORD 'foo'")


def admin(pooler, command: str) -> None:
    rc, _, err = pooler.psql(command, db="pgsluice")
    assert rc == 0, err


def test_reconnect_with_a_held_server_does_not_storm(pg, make_pooler, rotor):
    p = make_pooler(databases={"rot": "host=127.0.0.1 port={pg_port} dbname=app user=rotor "
                                      "password=foo"},
                    pool_mode="transaction", default_pool_size=1, admin_users="app",
                    server_login_retry=10)
    with p.raw(db="rot") as c:
        assert c.scalar("SELECT current_user") == "rotor"
    pg.psql("ALTER ROLE rotor PASSWORD 'bar'")
    # The holder and the waiters are spread over the workers: one failed login holds back every
    # worker's share (server_login_retry is the pool's).
    holder = p.raw(db="rot")
    holder.query("BEGIN")
    holder.query("SELECT 1")  # holds the pool's one server
    errors: list[str] = []

    def waiter():
        try:
            with p.connect(db="rot", autocommit=True) as conn:
                conn.execute("SELECT 1")
            errors.append("no error")
        except psycopg.OperationalError as e:
            errors.append(str(e))

    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(1)  # the three are waiting for the held server
    admin(p, "RECONNECT rot")
    admin(p, "SET default_pool_size = 2")  # room for a new server: its login fails
    for t in threads:
        t.join(20)
    assert len(errors) == 3, (errors, p.log())
    for e in errors:
        assert 'password authentication failed for user "rotor"' in e, (errors, p.log())
    time.sleep(2)
    # One failed login, not one per few milliseconds while the holder keeps its server.
    assert len(re.findall(r"S-\d+ rotor@rot \S+ server login failed", p.log())) == 1, p.log()
    holder.query("COMMIT")
    holder.close()
