"""max_prepared_statements changed on the console (SET) applies to the servers in use at their
next client, as PgBouncer reads it at each use: a lower value evicts at the next Parse, 0 passes
client names through, and a server opened at 0 rewrites once the value is raised. SHOW STATS
counts Binds of named statements only, as PgBouncer."""

from __future__ import annotations

import psycopg
import psycopg.errors
import pytest
from psycopg.rows import dict_row

ADMIN = {"admin_users": "app", "pool_mode": "transaction"}


def console_set(pooler, setting: str) -> None:
    with psycopg.connect(pooler.dsn(db="pgbouncer"), autocommit=True) as admin:
        admin.execute(f"SET {setting}")


def stats(pooler) -> dict:
    with psycopg.connect(pooler.dsn(db="pgbouncer"), autocommit=True,
                         row_factory=dict_row) as admin:
        return next(r for r in admin.execute("SHOW STATS").fetchall() if r["database"] == "app")


def on_server(cur) -> int:
    return cur.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]


def test_set_max_prepared_statements_applies_to_the_server_in_use(make_pooler):
    pooler = make_pooler(default_pool_size=1, max_prepared_statements=1, **ADMIN)
    with psycopg.connect(pooler.dsn(), autocommit=True) as conn:
        cur = conn.cursor()
        for i in range(3):
            assert cur.execute(f"SELECT {i}", prepare=True).fetchone()[0] == i
        assert on_server(cur) == 1
        console_set(pooler, "max_prepared_statements = 4")
        for i in range(3, 7):
            assert cur.execute(f"SELECT {i}", prepare=True).fetchone()[0] == i
        assert on_server(cur) == 4
        # Lowered: nothing is closed until the next statement is prepared.
        console_set(pooler, "max_prepared_statements = 2")
        assert on_server(cur) == 4
        assert cur.execute("SELECT 7", prepare=True).fetchone()[0] == 7
        assert on_server(cur) == 2
        # Off: the client's own name goes to the server, which never had it; the statements the
        # pooler prepared stay.
        console_set(pooler, "max_prepared_statements = 0")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            cur.execute("SELECT 7", prepare=True)
        assert on_server(cur) == 2


def test_a_server_opened_at_zero_rewrites_once_the_limit_is_raised(make_pooler):
    pooler = make_pooler(max_prepared_statements=0, **ADMIN)
    with psycopg.connect(pooler.dsn(), autocommit=True) as conn:
        with conn.transaction():
            conn.execute("SELECT 1")  # opens the server, at 0
    assert int(stats(pooler)["total_bind_count"]) == 0
    console_set(pooler, "max_prepared_statements = 10")
    with psycopg.connect(pooler.dsn(), autocommit=True) as c1, \
            psycopg.connect(pooler.dsn(), autocommit=True) as c2:
        cur1, cur2 = c1.cursor(), c2.cursor()
        cur1.execute("SELECT 1", prepare=True)  # on the server opened at 0
        cur1.execute("SELECT 1")
        with c2.transaction():
            cur2.execute("SELECT 2")  # holds that server
            cur1.execute("SELECT 1")  # prepared on a second server
            # The same psycopg name from another client, on the first server: had the first
            # client's name gone through as-is, this would be 42P05.
            assert cur2.execute("SELECT 1", prepare=True).fetchone()[0] == 1
    st = stats(pooler)
    assert int(st["total_client_parse_count"]) == 2
    assert int(st["total_server_parse_count"]) == 2
    # Named Binds only: the unnamed statement of SELECT 2 is not counted.
    assert int(st["total_bind_count"]) == 4
