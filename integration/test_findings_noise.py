"""Findings without noise: PostgreSQL's built-in functions that cannot change session state are no
findings, and the list that says which they are is checked against this cluster's pg_proc
(scripts/pg-catalog-functions, protocol/src/pg_catalog_functions.inc); a call of a function that
does not exist is no finding once PostgreSQL has refused it; EXECUTE p counts in its PREPARE p's
row of SHOW LEAKS."""

from __future__ import annotations

import os
import struct
import subprocess
import time

import pytest

import harness

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "pg-catalog-functions")


def test_the_list_is_what_pg_proc_says(pg):
    # The rule and its reviewed exceptions, run against the real catalog: a name the list lacks
    # or has too many, a VOLATILE built-in nobody reviewed, or a reviewed name PostgreSQL no
    # longer has each fail here.
    major = int(pg.psql("SHOW server_version_num")) // 10000
    if major != 15:
        pytest.skip(f"the list describes PostgreSQL 15 (libpg_query's grammar); the cluster is "
                    f"{major}")
    p = subprocess.run(["/usr/bin/python3", SCRIPT, "--check", "--psql",
                        os.path.join(harness.PG_BIN, "psql"), "--", "-h", pg.socket_dir,
                        "-p", str(pg.port), "-U", "postgres", "-d", "postgres"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "names, as PostgreSQL 15" in p.stdout, p.stdout
    # What the list keeps out is what pg_proc marks as able to touch the session.
    props = dict(line.split("|", 1) for line in pg.psql(
        "SELECT proname, string_agg(DISTINCT provolatile::text || proparallel::text, ',') "
        "FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace AND proname IN "
        "('set_config', 'pg_advisory_lock', 'setseed', 'currval', 'inet_server_addr') "
        "GROUP BY proname").splitlines())
    assert props == {"set_config": "vu", "pg_advisory_lock": "vr", "setseed": "vr",
                     "currval": "vu", "inet_server_addr": "sr"}, props


def leaks(pooler) -> list[list[str]]:
    rc, out, err = pooler.psql("SHOW LEAKS", db="pgsluice")
    assert rc == 0, err
    return [line.split("|") for line in out.strip().splitlines()]


def opaque(pooler) -> dict[str, int]:
    """opaque_call rows: detail -> count."""
    return {r[1]: int(r[9]) for r in leaks(pooler) if r[0] == "opaque_call"}


def test_builtins_are_no_findings_and_session_ones_are(make_pooler):
    pooler = make_pooler(default_pool_size=1, session_state_action="warn", admin_users="app")
    c = pooler.raw()
    try:
        c.query("SELECT inet_server_addr(), inet_server_port(), pg_backend_pid()")
        c.query("SELECT pg_listening_channels(), clock_timestamp(), random(), txid_current()")
        c.query("SELECT lo_open(0, 262144) IS NULL FROM pg_class WHERE false")
        c.query("SELECT setseed(0.5)")
        c.query("SELECT set_config('app.x', 'y', false)")
        c.query("SELECT pg_advisory_lock(77), pg_advisory_unlock(77)")
    finally:
        c.close()
    rows = leaks(pooler)
    kinds = {(r[0], r[1]) for r in rows}
    assert ("seed", "setseed") in kinds, rows
    assert ("set_config", "app.x") in kinds, rows
    assert ("advisory_lock", "pg_advisory_lock") in kinds, rows
    assert opaque(pooler) == {}, rows
    # The hint column: setseed's own fix, not the generic one of an opaque call.
    hint = [r[14] for r in rows if (r[0], r[1]) == ("seed", "setseed")][0]
    assert "setseed()" in hint and "session-mode pool" in hint, hint


def test_a_function_that_does_not_exist_is_no_finding_until_it_does(pg, make_pooler):
    name = f"not_yet_{int(time.time() * 1000)}"
    pooler = make_pooler(default_pool_size=1, session_state_action="warn", admin_users="app")
    c = pooler.raw()
    try:
        for _ in range(2):
            with pytest.raises(harness.PgError) as e:
                c.query(f"SELECT {name}(1)")
            assert e.value.sqlstate == "42883"
        assert c.scalar("SELECT 1") == "1"
        assert name not in opaque(pooler)
        # Created in a schema on the search_path, the same text runs, and is a finding now.
        pg.psql(f"CREATE FUNCTION public.{name}(int) RETURNS int LANGUAGE sql AS 'SELECT $1'",
                db="app")
        assert c.scalar(f"SELECT {name}(1)") == "1"
        assert opaque(pooler).get(name) == 1
        # Raised inside a function body the statement called: that function ran up to there,
        # so its call stays a finding.
        inner = f"calls_missing_{int(time.time() * 1000)}"
        pg.psql(f"CREATE FUNCTION public.{inner}() RETURNS void LANGUAGE plpgsql AS "
                f"$$ BEGIN PERFORM pg_advisory_lock(91); PERFORM nowhere_{name}(); END $$",
                db="app")
        with pytest.raises(harness.PgError) as e:
            c.query(f"SELECT {inner}()")
        assert e.value.sqlstate == "42883"
        assert opaque(pooler).get(inner) == 1
        # Two statements: the first ran before the second failed, so both calls are counted.
        with pytest.raises(harness.PgError):
            c.query(f"SELECT {name}(2); SELECT missing_{name}()")
        assert opaque(pooler).get(name) == 2
        assert opaque(pooler).get(f"missing_{name}") == 1
        # Behind another request (two Queries in one write), the reply that comes first is not
        # this one's: the call is recorded as sent.
        def query(sql: str) -> bytes:
            body = sql.encode() + b"\0"
            return b"Q" + struct.pack("!i", len(body) + 4) + body

        c.sendall(query("SELECT pg_sleep(0.05)") + query(f"SELECT other_{name}()"))
        c.read_result()
        with pytest.raises(harness.PgError):
            c.read_result()
        assert opaque(pooler).get(f"other_{name}") == 1
    finally:
        c.close()


def test_execute_counts_in_its_prepares_row(make_pooler):
    pooler = make_pooler(default_pool_size=1, session_state_action="warn", admin_users="app")
    c = pooler.raw(params={"application_name": "preparer"})
    try:
        c.query("PREPARE noisy (int) AS SELECT $1 + 1")
        for n in range(3):
            assert c.scalar(f"EXECUTE noisy ({n})") == str(n + 1)
        c.query("DEALLOCATE noisy")
    finally:
        c.close()
    rows = [r for r in leaks(pooler) if r[0] == "prepare"]
    assert len(rows) == 1, rows
    assert rows[0][1] == "noisy" and rows[0][9] == "4", rows
    assert rows[0][13].startswith("PREPARE noisy"), rows
