"""Session state set inside a function body, at pgsluice's defaults in transaction mode: a call of
a function the SQL checks cannot see into (opaque_call) has its server verified at the release,
strictly (values compared with what the pooler believes the server carries), and what nobody
tracked is cleaned with DISCARD ALL and reported as a `hidden` finding naming the call. Pool of 2,
noise clients that must never see another client's settings, and a client whose transactions run
on both servers (hopping.py)."""

from __future__ import annotations

import re
import time

import psycopg
import pytest

from test_keep_settings import client, noise

FUNCTIONS = """
CREATE OR REPLACE FUNCTION wm_by_set_config() RETURNS int LANGUAGE plpgsql
  AS $$ BEGIN PERFORM set_config('work_mem', '3MB', false); RETURN 1; END $$;
CREATE OR REPLACE FUNCTION wm_by_set() RETURNS int LANGUAGE plpgsql
  AS $$ BEGIN SET work_mem = '3MB'; RETURN 1; END $$;
CREATE OR REPLACE FUNCTION wm_with_set_clause() RETURNS text LANGUAGE plpgsql
  SET work_mem = '5MB' AS $$ BEGIN RETURN current_setting('work_mem'); END $$;
CREATE OR REPLACE FUNCTION wm_set_clause_and_set() RETURNS int LANGUAGE plpgsql
  SET work_mem = '5MB' AS $$ BEGIN SET work_mem = '3MB'; RETURN 1; END $$;
CREATE OR REPLACE FUNCTION wm_computed() RETURNS int LANGUAGE plpgsql
  AS $$ BEGIN PERFORM set_config('work' || '_mem', '3MB', false); RETURN 1; END $$;
CREATE OR REPLACE FUNCTION read_only(a int) RETURNS int LANGUAGE plpgsql
  AS $$ BEGIN RETURN (SELECT count(*) FROM pg_class WHERE oid = a); END $$;
CREATE OR REPLACE FUNCTION read_only_sql(a int) RETURNS int LANGUAGE sql AS 'SELECT $1 + 1';
CREATE OR REPLACE FUNCTION hidden_lock() RETURNS void LANGUAGE plpgsql
  AS $$ BEGIN PERFORM pg_advisory_lock(4711); END $$;
CREATE OR REPLACE FUNCTION hidden_setting() RETURNS void LANGUAGE plpgsql
  AS $$ BEGIN PERFORM set_config('statement_timeout', '4242ms', false); END $$;
"""


@pytest.fixture(scope="module", autouse=True)
def functions(pg):
    pg.psql(FUNCTIONS, db="app")


@pytest.fixture
def pooler(make_pooler):
    return make_pooler(default_pool_size=2, admin_users="app")


def leaks(pooler) -> list[list[str]]:
    rc, out, err = pooler.psql("SHOW LEAKS", db="pgsluice")
    assert rc == 0, err
    return [line.split("|") for line in out.strip().splitlines()]


def hidden(pooler) -> dict[str, list[str]]:
    return {r[1]: r for r in leaks(pooler) if r[0] == "hidden"}


@pytest.mark.parametrize("function", ["wm_by_set_config", "wm_by_set"])
def test_a_setting_made_in_a_function_reaches_no_other_client(pooler, function):
    with noise(pooler), client(pooler) as a:
        for _ in range(6):
            assert a.hopper.run(a, f"SELECT {function}(), pg_backend_pid()")[0] == 1
            # What the caller sees afterwards: the setting lasted for its transaction only (the
            # server was cleaned before anyone got it), as if it had been SET LOCAL.
            value, _ = a.hopper.run(a, "SELECT current_setting('work_mem'), pg_backend_pid()")
            assert value == "4MB"
        assert a.hopper.hops >= 6
    row = hidden(pooler).get(f"set: work_mem (after {function})")
    assert row is not None, leaks(pooler)
    assert row[3] == "reset" and row[8] == "server", row
    opaque = [r for r in leaks(pooler) if r[0] == "opaque_call" and r[1] == function]
    assert opaque and opaque[0][3] == "reset", leaks(pooler)


def test_inside_its_transaction_the_caller_sees_the_function_setting(pooler):
    with noise(pooler), pooler.connect() as a:
        a.execute("SELECT wm_by_set()")
        assert a.execute("SHOW work_mem").fetchone()[0] == "3MB"
        a.commit()
        assert a.execute("SHOW work_mem").fetchone()[0] == "4MB"
        a.commit()


def test_a_kept_setting_a_function_changes_is_put_back(pooler):
    # The client SET work_mem itself (kept: it follows the client); the function changes it
    # behind the pooler's back. The check compares values, not only names: the server is
    # cleaned, and the client's next transaction gets its own value again.
    with noise(pooler), client(pooler) as a:
        a.execute("SET work_mem = '64MB'")
        assert a.execute("SELECT wm_by_set()").fetchone()[0] == 1
        for _ in range(6):
            value, _ = a.hopper.run(a, "SELECT current_setting('work_mem'), pg_backend_pid()")
            assert value == "64MB"
        a.execute("RESET work_mem")
    assert "set: work_mem (after wm_by_set)" in hidden(pooler), leaks(pooler)


def test_a_set_clause_restores_the_setting_itself(pooler):
    # SET work_mem = '5MB' on the function: PostgreSQL restores work_mem at its exit. Nothing
    # leaks, nothing is hidden.
    with noise(pooler), client(pooler) as a:
        for _ in range(4):
            assert a.hopper.run(a, "SELECT wm_with_set_clause(), pg_backend_pid()")[0] == "5MB"
            value, _ = a.hopper.run(a, "SELECT current_setting('work_mem'), pg_backend_pid()")
            assert value == "4MB"
    assert not hidden(pooler), leaks(pooler)


def test_a_plain_set_under_a_set_clause_persists_and_is_cleaned(pooler):
    # PostgreSQL's rule (CREATE FUNCTION, "SET clause"): a plain SET in the body overrides the
    # clause and persists after the function exits. So the server is cleaned.
    with noise(pooler), client(pooler) as a:
        for _ in range(3):
            assert a.hopper.run(a, "SELECT wm_set_clause_and_set(), pg_backend_pid()")[0] == 1
    assert "set: work_mem (after wm_set_clause_and_set)" in hidden(pooler), leaks(pooler)


def test_a_lock_and_a_setting_left_by_functions_are_cleaned(pooler):
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        for _ in range(3):
            a.execute("SELECT hidden_lock()")
            a.execute("SELECT hidden_setting()")
            assert b.execute("SHOW statement_timeout").fetchone()[0] == "0"
            assert b.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                             "AND pid = pg_backend_pid()").fetchone()[0] == 0
    found = hidden(pooler)
    assert "advisory_lock: 1 lock (after hidden_lock)" in found, leaks(pooler)
    assert "set: statement_timeout (after hidden_setting)" in found, leaks(pooler)


def test_opaque_call_warn_is_the_old_behaviour(make_pooler):
    # For those who want it: the call is counted ("possible", warn) and the state it leaves
    # reaches the next client, as before.
    pooler = make_pooler(default_pool_size=1, admin_users="app",
                         session_state_action="pin,set:keep,set_config:keep,role:keep,"
                                              "listen:relay,prepare:keep,opaque_call:warn")
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        a.execute("SELECT wm_by_set()")
        assert b.execute("SHOW work_mem").fetchone()[0] == "3MB"
        b.execute("RESET work_mem")
    rows = leaks(pooler)
    assert any(r[0] == "opaque_call" and r[1] == "wm_by_set" and r[3] == "warn" for r in rows)
    assert not [r for r in rows if r[0] == "hidden"], rows


def test_off_does_not_look_at_calls(make_pooler):
    pooler = make_pooler(default_pool_size=1, admin_users="app", session_state_action="off",
                         verbose=2)
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        a.execute("SELECT wm_by_set()")
        assert b.execute("SHOW work_mem").fetchone()[0] == "3MB"
        b.execute("RESET work_mem")
    assert not leaks(pooler)
    assert "pg_listening_channels" not in pooler.log()


def test_an_error_in_the_function_still_checks_the_server(pooler):
    # The function set work_mem and then failed: in an implicit transaction the SET is rolled
    # back with it; in a block that the client commits after a savepoint, it stays.
    with noise(pooler), pooler.connect() as a:
        a.execute("SAVEPOINT s")
        with pytest.raises(psycopg.errors.DivisionByZero):
            a.execute("SELECT wm_by_set() / 0")
        a.execute("ROLLBACK TO SAVEPOINT s")
        a.execute("SELECT wm_by_set()")
        a.commit()
        assert a.execute("SHOW work_mem").fetchone()[0] == "4MB"
        a.commit()


# --- a verdict per function: what cannot change session state costs no check ------------------

VERIFY = "internal query: SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_listening_channels"
LOOKUP = "internal query: SELECT c.i, l.lanname, p.prosrc"


def count(pooler, what: str) -> int:
    return pooler.log().count(what)


def test_a_function_that_only_reads_costs_no_check(make_pooler):
    pooler = make_pooler(default_pool_size=2, admin_users="app", verbose=2)
    calls = 0
    started = time.monotonic()
    with noise(pooler), client(pooler) as a:
        for n in range(30):
            for function in ("read_only", "read_only_sql", "wm_with_set_clause"):
                a.hopper.run(a, f"SELECT {function}({n if function != 'wm_with_set_clause' else ''}),"
                                " pg_backend_pid()")
                calls += 1
    elapsed = time.monotonic() - started
    verifies, lookups = count(pooler, VERIFY), count(pooler, LOOKUP)
    # A verdict lasts 1 s; each of the two servers may miss it once per second at most.
    bound = 2 * 3 * (int(elapsed) + 2)
    assert 1 <= lookups <= bound and verifies <= bound, (verifies, lookups, calls, elapsed)
    assert verifies < calls / 3, (verifies, calls)
    assert not hidden(pooler), leaks(pooler)
    # Judged, the calls are no findings either: at most the ones made before the verdict.
    opaque = {r[1]: int(r[9]) for r in leaks(pooler) if r[0] == "opaque_call"}
    assert sum(opaque.values()) <= bound, opaque


def test_a_function_that_sets_a_named_setting_costs_a_reset_not_a_check(make_pooler):
    # The body names work_mem: once judged, each call has the server RESET work_mem at the
    # release, as the reset action does, without the check.
    pooler = make_pooler(default_pool_size=2, admin_users="app", verbose=2)
    with noise(pooler), client(pooler) as a:
        a.execute("SET work_mem = '64MB'")  # kept: the next link gives it back
        for _ in range(12):
            assert a.hopper.run(a, "SELECT wm_by_set_config(), pg_backend_pid()")[0] == 1
            value, _ = a.hopper.run(a, "SELECT current_setting('work_mem'), pg_backend_pid()")
            assert value == "64MB"
        a.execute("RESET work_mem")
    verifies, resets = count(pooler, VERIFY), count(pooler, "internal query: RESET work_mem")
    assert 1 <= count(pooler, LOOKUP) < 12 and verifies < 12 and resets >= 12 - verifies, \
        (count(pooler, LOOKUP), verifies, resets)


def test_a_function_with_a_computed_setting_name_is_checked_every_time(make_pooler):
    pooler = make_pooler(default_pool_size=2, admin_users="app", verbose=2)
    with noise(pooler), client(pooler) as a:
        for _ in range(10):
            a.hopper.run(a, "SELECT wm_computed(), pg_backend_pid()")
    assert count(pooler, VERIFY) >= 10, count(pooler, VERIFY)
    # Looked up once per verdict's life, not at every call.
    assert 1 <= count(pooler, LOOKUP) < 10, count(pooler, LOOKUP)
    assert "set: work_mem (after wm_computed)" in hidden(pooler), leaks(pooler)


def test_a_prepared_call_is_checked_at_every_execution(pooler):
    # psycopg prepares the statement on its fifth execution (or at once with prepare=True) and
    # binds it in later transactions, on whichever server the client has.
    with noise(pooler), client(pooler) as a:
        for _ in range(8):
            a.execute("SELECT wm_by_set_config()", prepare=True)
            value, _ = a.hopper.run(a, "SELECT current_setting('work_mem'), pg_backend_pid()")
            assert value == "4MB"


def test_a_function_replaced_through_the_pooler_is_judged_again(pg, pooler):
    pg.psql("CREATE OR REPLACE FUNCTION flip() RETURNS int LANGUAGE plpgsql "
            "AS $$ BEGIN RETURN 1; END $$; ALTER FUNCTION flip() OWNER TO app", db="app")
    with noise(pooler), client(pooler) as a:
        for _ in range(4):
            a.hopper.run(a, "SELECT flip(), pg_backend_pid()")
        a.execute("CREATE OR REPLACE FUNCTION flip() RETURNS int LANGUAGE plpgsql "
                  "AS $$ BEGIN SET work_mem = '3MB'; RETURN 2; END $$")
        for _ in range(4):
            assert a.hopper.run(a, "SELECT flip(), pg_backend_pid()")[0] == 2
    assert "set: work_mem (after flip)" in hidden(pooler), leaks(pooler)


def test_a_function_replaced_behind_the_pooler_is_judged_again_within_a_second(pg, pooler):
    pg.psql("CREATE OR REPLACE FUNCTION flop() RETURNS int LANGUAGE plpgsql "
            "AS $$ BEGIN RETURN 1; END $$", db="app")
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        for _ in range(4):
            a.execute("SELECT flop()")
        pg.psql("CREATE OR REPLACE FUNCTION flop() RETURNS int LANGUAGE plpgsql "
                "AS $$ BEGIN SET work_mem = '3MB'; RETURN 2; END $$", db="app")
        time.sleep(1.2)  # kFunctionVerdictTtlMs
        for _ in range(4):
            assert a.execute("SELECT flop()").fetchone()[0] == 2
            assert b.execute("SHOW work_mem").fetchone()[0] == "4MB"
    assert "set: work_mem (after flop)" in hidden(pooler), leaks(pooler)


def test_another_search_path_has_its_own_verdict(pg, pooler):
    # shadow() reads in public; in schema other, first on the client's path, it sets.
    pg.psql("CREATE SCHEMA IF NOT EXISTS other AUTHORIZATION app; "
            "CREATE OR REPLACE FUNCTION public.shadow() RETURNS int LANGUAGE sql AS 'SELECT 1'; "
            "CREATE OR REPLACE FUNCTION other.shadow() RETURNS int LANGUAGE plpgsql "
            "AS $$ BEGIN SET work_mem = '3MB'; RETURN 2; END $$", db="app")
    with noise(pooler), client(pooler) as a, pooler.connect(autocommit=True) as b:
        for _ in range(4):
            assert b.execute("SELECT shadow()").fetchone()[0] == 1
        a.execute("SET search_path = other, public")
        for _ in range(4):
            assert a.hopper.run(a, "SELECT shadow(), pg_backend_pid()")[0] == 2
            assert b.execute("SHOW work_mem").fetchone()[0] == "4MB"
        a.execute("RESET search_path")
    assert "set: work_mem (after shadow)" in hidden(pooler), leaks(pooler)
