"""A statement name whose Parse did not run (it failed, or an earlier error in its pipeline made
the server skip it): PostgreSQL answers a later Bind of it with 26000; pgsluice, as PgBouncer,
keeps the name and prepares the statement where the Bind runs. psycopg 3.1 (Debian 12's) reuses
such names after a failed pipeline (PgBouncer's test_prepared_failed_prepare_pipeline)."""

from __future__ import annotations

import psycopg
from psycopg import pq


def drain_to_sync(pgconn) -> list:
    statuses = []
    while True:
        res = pgconn.get_result()
        if res is None:
            continue
        statuses.append((res.status, res.error_field(psycopg.pq.DiagnosticField.SQLSTATE)))
        if res.status == pq.ExecStatus.PIPELINE_SYNC:
            return statuses


def test_a_name_whose_parse_did_not_run_is_prepared_at_its_bind(make_pooler):
    pooler = make_pooler()
    with psycopg.connect(pooler.dsn(), autocommit=True) as conn:
        pgconn = conn.pgconn
        pgconn.enter_pipeline_mode()
        pgconn.send_prepare(b"one", b"SELECT 1")
        pgconn.send_prepare(b"missing", b"SELECT count(*) FROM unrun_later")
        pgconn.send_prepare(b"two", b"SELECT 2")  # skipped by the server after the error
        pgconn.pipeline_sync()
        statuses = drain_to_sync(pgconn)
        pgconn.exit_pipeline_mode()
        assert statuses == [(pq.ExecStatus.COMMAND_OK, None), (pq.ExecStatus.FATAL_ERROR, b"42P01"),
                            (pq.ExecStatus.PIPELINE_ABORTED, None),
                            (pq.ExecStatus.PIPELINE_SYNC, None)]
        res = pgconn.exec_prepared(b"two", [])
        assert res.status == pq.ExecStatus.TUPLES_OK, res.error_message
        assert res.get_value(0, 0) == b"2"
        # Still failing where it runs: PostgreSQL's error for the statement itself.
        res = pgconn.exec_prepared(b"missing", [])
        assert res.error_field(pq.DiagnosticField.SQLSTATE) == b"42P01"
        conn.execute("CREATE TABLE unrun_later ()")
        try:
            assert pgconn.describe_prepared(b"missing").status == pq.ExecStatus.COMMAND_OK
            res = pgconn.exec_prepared(b"missing", [])
            assert res.status == pq.ExecStatus.TUPLES_OK, res.error_message
            assert res.get_value(0, 0) == b"0"
        finally:
            conn.execute("DROP TABLE unrun_later")
        # Made the client's by its Bind: a second Parse of the name is PostgreSQL's 42P05.
        res = pgconn.prepare(b"two", b"SELECT 2")
        assert res.error_field(pq.DiagnosticField.SQLSTATE) == b"42P05"


def test_a_new_parse_or_deallocate_all_replaces_an_unrun_name(make_pooler):
    pooler = make_pooler()
    with psycopg.connect(pooler.dsn(), autocommit=True) as conn:
        pgconn = conn.pgconn
        res = pgconn.prepare(b"s", b"SELECT nosuchcolumn")
        assert res.error_field(pq.DiagnosticField.SQLSTATE) == b"42703"
        # The name is free for a new Parse (PostgreSQL's), which replaces what did not run.
        assert pgconn.prepare(b"s", b"SELECT 3").status == pq.ExecStatus.COMMAND_OK
        assert pgconn.exec_prepared(b"s", []).get_value(0, 0) == b"3"
        res = pgconn.prepare(b"t", b"SELECT nosuchcolumn")
        conn.execute("DEALLOCATE ALL")
        res = pgconn.exec_prepared(b"t", [])
        assert res.error_field(pq.DiagnosticField.SQLSTATE) == b"26000"
