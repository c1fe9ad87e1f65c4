"""SHOW STATS counts queries as PgBouncer 1.25 does: a query is what a client sends up to the
next ReadyForQuery, whatever the protocol. So psycopg's way of preparing (Parse + Sync, then
Bind/Describe/Execute + Sync) is two queries, and a pipeline up to its Sync is one."""

from __future__ import annotations

import psycopg
from psycopg import pq
from psycopg.rows import dict_row

ADMIN = {"admin_users": "app"}


def query_count(pooler) -> int:
    with psycopg.connect(pooler.dsn(db="pgbouncer"), autocommit=True,
                         row_factory=dict_row) as admin:
        for row in admin.execute("SHOW STATS").fetchall():
            if row["database"] == "app":
                return int(row["total_query_count"])
    return 0


def test_a_prepare_round_trip_is_a_query_and_a_pipeline_is_one(make_pooler):
    pooler = make_pooler(pool_mode="session", **ADMIN)
    with psycopg.connect(pooler.dsn(), autocommit=True) as conn:
        conn.execute("SELECT 1")
        assert query_count(pooler) == 1
        pgconn = conn.pgconn
        # Parse + Sync on its own: a round trip to a ReadyForQuery, as PgBouncer counts it.
        assert pgconn.prepare(b"s1", b"SELECT 2").status == pq.ExecStatus.COMMAND_OK
        assert pgconn.exec_prepared(b"s1", []).status == pq.ExecStatus.TUPLES_OK
        assert query_count(pooler) == 3
        # Three Executes before one Sync: one query.
        pgconn.enter_pipeline_mode()
        for _ in range(3):
            pgconn.send_query_prepared(b"s1", [])
        pgconn.pipeline_sync()
        statuses = []
        while len(statuses) < 4:
            res = pgconn.get_result()
            if res is not None:
                statuses.append(res.status)
        pgconn.exit_pipeline_mode()
        assert statuses[-1] == pq.ExecStatus.PIPELINE_SYNC
        assert query_count(pooler) == 4


def test_console_commands_count_in_a_row_of_their_own(make_pooler):
    # As PgBouncer 1.25's admin database: a console session that sent a command counts one query
    # and one transaction (not one per command), in a SHOW STATS row "pgbouncer", and SHOW TOTALS
    # sums it with the databases (test_admin compares it with PgBouncer itself when its build
    # is beside the repository).
    pooler = make_pooler(**ADMIN)
    with psycopg.connect(pooler.dsn(), autocommit=True) as conn:
        conn.execute("SELECT 1")
    with psycopg.connect(pooler.dsn(db="pgbouncer"), autocommit=True) as first:
        first.execute("SHOW VERSION")
        first.execute("SHOW POOLS")
    with psycopg.connect(pooler.dsn(db="pgbouncer"), autocommit=True,
                         row_factory=dict_row) as admin:
        rows = {r["database"]: r for r in admin.execute("SHOW STATS").fetchall()}
        assert list(rows) == sorted(rows)
        # The first session and this one, whatever each sent.
        assert int(rows["pgbouncer"]["total_query_count"]) == 2
        assert int(rows["pgbouncer"]["total_xact_count"]) == 2
        assert int(rows["pgbouncer"]["total_server_assignment_count"]) == 0
        assert int(rows["app"]["total_query_count"]) == 1
        totals = {r["name"]: r["value"] for r in admin.execute("SHOW TOTALS").fetchall()}
        assert int(totals["total_query_count"]) == 1 + 2
        assert int(totals["total_xact_count"]) == 1 + 2
