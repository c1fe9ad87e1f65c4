"""Findings without noise: PostgreSQL's built-in functions that cannot change session state are no
findings, and the list that says which they are is checked against this cluster's pg_proc
(scripts/pg-catalog-functions, protocol/src/pg_catalog_functions.inc); EXECUTE p counts in its
PREPARE p's row of SHOW LEAKS."""

from __future__ import annotations

import os
import subprocess

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
    assert ("opaque_call", "setseed") in kinds, rows
    assert ("set_config", "app.x") in kinds, rows
    assert ("advisory_lock", "pg_advisory_lock") in kinds, rows
    assert opaque(pooler) == {"setseed": 1}, rows


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
