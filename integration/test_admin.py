"""The admin console (database pgsluice, alias pgbouncer) and the Prometheus endpoint: PgBouncer
1.25's SHOW columns, numbers that move under pgbench, PAUSE/RESUME, RELOAD, KILL_CLIENT, roles,
the extended protocol through psycopg, and /metrics parsed back against SHOW STATS."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request

import psycopg
import pytest

import harness

# PgBouncer 1.25.2's SHOW columns (its header says where they come from).
REFERENCE = os.path.join(harness.DATA_DIR, "pgbouncer-1.25-show-columns.txt")
ADMIN = {"admin_users": "app", "stats_users": "md5user"}

# pgsluice's own columns, allowed only after PgBouncer's.
EXTRA_COLUMNS = {"POOLS": ["sv_pinned", "sv_dirty", "pool_size", "paused",
                           "target_session_attrs", "sv_primary", "sv_standby", "hosts",
                           "usable_hosts"],
                 "CLIENTS": ["pinned_for"],
                 "SERVERS": ["pinned_for", "host", "role", "protocol", "listener"],
                 "DATABASES": ["hosts", "target_session_attrs"]}
IMPLEMENTED = ["POOLS", "STATS", "STATS_TOTALS", "STATS_AVERAGES", "TOTALS", "CLIENTS",
               "SERVERS", "DATABASES", "USERS", "LISTS", "MEM", "STATE", "VERSION", "CONFIG",
               "PEERS", "PEER_POOLS", "SOCKETS", "ACTIVE_SOCKETS", "DNS_HOSTS",
               "DNS_ZONES"]



def wait_until(predicate, timeout: float, interval: float = 0.05):
    return harness.wait_until(predicate, timeout, interval)


# PgBouncer 1.26's columns that the 1.25 reference lacks: client_login_count (#1457), after
# bind_count's column in each stats command (PgBouncer's src/stats.c), as (after, column).
COLUMNS_SINCE_1_25 = {"STATS": [("total_bind_count", "total_client_login_count"),
                                ("avg_bind_count", "avg_client_login_count")],
                      "STATS_TOTALS": [("bind_count", "client_login_count")],
                      "STATS_AVERAGES": [("avg_bind_count", "avg_client_login_count")]}


def pgbouncer_1_25_columns() -> dict[str, list[str]]:
    """PgBouncer 1.25's SHOW columns, as the reference data has them."""
    cols, lines = {}, open(REFERENCE).read().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("SHOW ") and not line.endswith("rows:") and i + 1 < len(lines):
            cols[line[5:].strip()] = lines[i + 1].split("|")
    return cols


def reference_columns() -> dict[str, list[str]]:
    """PgBouncer's SHOW columns: the 1.25 reference, with 1.26's additions."""
    cols = pgbouncer_1_25_columns()
    for command, added in COLUMNS_SINCE_1_25.items():
        for after, column in added:
            cols[command].insert(cols[command].index(after) + 1, column)
    return cols


def reference_rows(command: str) -> list[str]:
    lines = open(REFERENCE).read().splitlines()
    for i, line in enumerate(lines):
        if line == f"SHOW {command} rows:":
            return lines[i + 1].split()
    raise KeyError(command)


class Admin:
    """A console session over the raw protocol: columns, rows and tag of each command."""

    def __init__(self, pooler, user="app", password="app", db="pgsluice"):
        self.c = pooler.raw(user=user, password=password, db=db)

    def send(self, sql: str) -> None:
        self.c.send_query(sql)

    def result(self):
        cols, rows, tag, error = [], [], None, None
        while True:
            kind, body = self.c.read_message()
            if kind == b"T":
                cols = harness.parse_row_description(body)
            elif kind == b"D":
                rows.append(harness.parse_data_row(body))
            elif kind == b"C":
                tag = body.rstrip(b"\0").decode()
            elif kind == b"E":
                error = harness.PgError(self.c._fields(body))
            elif kind == b"Z":
                if error:
                    raise error
                return cols, rows, tag

    def run(self, sql: str):
        self.send(sql)
        return self.result()

    def dicts(self, sql: str) -> list[dict]:
        cols, rows, _ = self.run(sql)
        return [dict(zip(cols, r)) for r in rows]

    def close(self):
        self.c.close()


def pool_row(admin: Admin, db="app", user="app") -> dict:
    for r in admin.dicts("SHOW POOLS"):
        if r["database"] == db and r["user"] == user:
            return r
    return {}


def stats_row(admin: Admin, db="app") -> dict:
    for r in admin.dicts("SHOW STATS"):
        if r["database"] == db:
            return r
    return {}


# --------------------------------------------------------------------------------------------
# The console itself


def test_show_columns_match_pgbouncer(make_pooler):
    pooler = make_pooler(**ADMIN)
    with pooler.raw() as c:
        c.query("SELECT 1")  # a pool, so that per-pool commands have rows
    expected = reference_columns()
    admin = Admin(pooler)
    try:
        for command in IMPLEMENTED:
            cols, _, tag = admin.run(f"SHOW {command}")
            want = expected[command] + EXTRA_COLUMNS.get(command, [])
            assert cols == want, f"SHOW {command}: {cols} != {want}"
            assert tag == "SHOW"
        # psql (simple protocol), through the pgbouncer alias, prints the same header.
        rc, out, err = pooler.psql("SHOW POOLS", db="pgbouncer", args=["-F", "|", "-t", "-P",
                                                                        "tuples_only=off"])
        assert rc == 0, err
        assert out.splitlines()[0].split("|") == expected["POOLS"] + EXTRA_COLUMNS["POOLS"]
        lists = [r[0] for r in admin.run("SHOW LISTS")[1]]
        assert lists == reference_rows("LISTS")
        state = dict(admin.run("SHOW STATE")[1])
        assert state == {"active": "yes", "paused": "no", "suspended": "no"}
        # PgBouncer's SHOW VERSION is the first line of its --version; so is pgsluice's.
        version = harness.run([pooler.binary, "--version"])[1].splitlines()[0]
        assert admin.run("SHOW VERSION")[1][0][0] == version
        # One row per worker thread; the console's own client is on one of them.
        workers = admin.dicts("SHOW WORKERS")
        assert [w["id"] for w in workers] == [str(i) for i in range(harness.DEFAULT_WORKERS)]
        assert sum(int(w["clients"]) for w in workers) >= 1
    finally:
        admin.close()


def test_reference_data_is_what_pgbouncer_1_25_shows(make_pooler):
    # The data above is checked against PgBouncer 1.25.2 itself when that build is beside the
    # repository (harness.PGBOUNCER_ANCHOR); a clone has none, and then says so (pytest -rs).
    anchor = harness.pgbouncer_anchor()
    if anchor is None:
        pytest.skip(f"no PgBouncer 1.25.2 at {harness.PGBOUNCER_ANCHOR}: pgsluice's SHOW columns "
                    f"were compared against integration/data/{os.path.basename(REFERENCE)} only "
                    "(Debian's 1.18 lacks 1.25's columns)")
    pooler = make_pooler(binary=anchor, admin_users="app")
    with pooler.raw() as c:
        c.query("SELECT 1")
    expected = pgbouncer_1_25_columns()
    admin = Admin(pooler, db="pgbouncer")
    try:
        assert admin.run("SHOW VERSION")[1][0][0].startswith("PgBouncer 1.25.")
        for command, want in expected.items():
            cols, _, _ = admin.run(f"SHOW {command}")
            assert cols == want, f"{anchor}: SHOW {command}: {cols} != {want}"
        for command in ("LISTS", "MEM"):
            assert [r[0] for r in admin.run(f"SHOW {command}")[1]] == reference_rows(command)
    finally:
        admin.close()
    print(f"{REFERENCE} matches {anchor}")


def test_extended_protocol_psycopg(make_pooler):
    pooler = make_pooler(**ADMIN)
    expected = reference_columns()
    with psycopg.connect(pooler.dsn(db="pgbouncer"), autocommit=True) as conn:
        cur = conn.execute("SHOW POOLS")  # Parse/Bind/Describe/Execute/Sync
        assert [d.name for d in cur.description] == expected["POOLS"] + EXTRA_COLUMNS["POOLS"]
        cur.fetchall()
        cur = conn.execute("SHOW STATS_TOTALS")
        assert [d.name for d in cur.description] == expected["STATS_TOTALS"]
        conn.execute("PAUSE")
        conn.execute("RESUME")
        with pytest.raises(psycopg.errors.ProtocolViolation):  # 08P01, as PgBouncer
            conn.execute("SHOW NOTHING")
        # The session survives the error.
        assert conn.execute("SHOW STATE").fetchall()[0] == ("active", "yes")


def test_roles_and_errors(make_pooler):
    pooler = make_pooler(**ADMIN)
    # A user in neither list authenticates, then is refused, like PgBouncer ("not allowed").
    with pytest.raises(harness.PgError) as e:
        harness.RawClient(harness.HOST, pooler.port, "scramuser", "pgsluice", "scrampass")
    assert e.value.message == "not allowed" and e.value.sqlstate == "28000"
    # A wrong password stays a password failure.
    with pytest.raises(harness.PgError) as e:
        harness.RawClient(harness.HOST, pooler.port, "app", "pgsluice", "wrong")
    assert e.value.sqlstate == "28P01"
    stats = Admin(pooler, user="md5user", password="md5pass")
    try:
        assert stats.run("SHOW POOLS")[2] == "SHOW"
        for command in ("PAUSE", "RESUME", "RELOAD", "KILL app", "SHUTDOWN", "DISABLE app",
                        "SET default_pool_size = 3"):
            with pytest.raises(harness.PgError) as e:
                stats.run(command)
            assert e.value.sqlstate == "08P01" and e.value.message == "admin access needed"
        # Driver noise is accepted from anyone, as PgBouncer does.
        assert stats.run("SET client_encoding = 'UTF8'")[2] == "SET"
        # Unknown commands and bad arguments: an ErrorResponse naming them, not a disconnect.
        with pytest.raises(harness.PgError) as e:
            stats.run("FROBNICATE now")
        assert e.value.sqlstate == "08P01"
        assert "FROBNICATE now" in e.value.message
        assert stats.run("show version;")[2] == "SHOW"
    finally:
        stats.close()
    admin = Admin(pooler)
    try:
        with pytest.raises(harness.PgError) as e:
            admin.run("PAUSE nosuchdb")
        assert e.value.sqlstate == "08P01" and e.value.message == "no such database: nosuchdb"
        with pytest.raises(harness.PgError) as e:
            admin.run("KILL_CLIENT x1")
        assert e.value.sqlstate == "08P01"
        assert e.value.message.startswith("invalid client pointer supplied")
        with pytest.raises(harness.PgError) as e:
            admin.run("KILL_CLIENT 987654")
        assert (e.value.sqlstate, e.value.message) == ("08P01", "client not found: 987654")
        with pytest.raises(harness.PgError) as e:
            admin.run("RESUME")  # not paused: an error, the session goes on
        assert e.value.sqlstate == "08P01"
        assert admin.run("SHOW VERSION")[2] == "SHOW"
    finally:
        admin.close()
    assert pooler.alive()


def test_pgbouncer_from_the_pooler_own_os_user_over_the_unix_socket(make_pooler):
    """PgBouncer admits `pgbouncer` to the console with no password and no admin_users line when
    the connecting process runs as the pooler's own OS user, over the Unix socket (the kernel
    names the uid); its tools and its own test suite log in so. Over TCP, under another user
    name or from another OS user it is an ordinary login, and fails without a password."""
    pooler = make_pooler(unix_socket_dir="{dir}", **ADMIN)

    def psql(host, user, sql, as_postgres=False):
        cmd = ["psql", "-X", "-w", "-At", "-h", host, "-p", str(pooler.port), "-U", user,
               "-d", "pgbouncer", "-c", sql]
        return harness.run(harness.as_postgres(cmd) if as_postgres else cmd,
                           env=pooler.client_env(None))

    # An admin: RELOAD needs admin_users, where pgbouncer is not.
    rc, out, err = psql(pooler.dir, "pgbouncer", "RELOAD")
    assert rc == 0, err
    rc, out, err = psql(pooler.dir, "pgbouncer", "SHOW VERSION")
    assert rc == 0 and out.strip(), err
    rc, _, err = psql(harness.HOST, "pgbouncer", "SHOW VERSION")
    assert rc != 0 and "password" in err, err
    rc, _, err = psql(pooler.dir, "app", "SHOW VERSION")
    assert rc != 0 and "password" in err, err
    if harness.is_root():
        rc, _, err = psql(pooler.dir, "pgbouncer", "SHOW VERSION", as_postgres=True)
        assert rc != 0 and "password" in err, err


# PgBouncer 1.25.2's console greeting, in order (its src/admin.c, admin_setup(); then
# welcome_client() adds the client's own startup values of the parameters it tracks, here
# application_name). pgsluice's server_version keeps PgBouncer's form and adds its own name.
PGBOUNCER_GREETING = [("server_version", "1.25.2/bouncer"), ("client_encoding", "UTF8"),
                      ("server_encoding", "UTF8"), ("DateStyle", "ISO"), ("TimeZone", "GMT"),
                      ("standard_conforming_strings", "on"), ("is_superuser", "on"),
                      ("application_name", "greeted")]
# Its admin database's rows for this test's pooler (listen_port PORT, one console session):
# SHOW DATABASES and SHOW POOLS (PgBouncer's columns).
PGBOUNCER_CONSOLE_ROWS = {
    "DATABASES": ["pgbouncer", None, "PORT", "pgbouncer", "pgbouncer", "2", "0", "0", "3600",
                  "statement", None, "0", "0", "0", "1", "0", "0"],
    "POOLS": ["pgbouncer", "pgbouncer", "1", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0",
              "0", "0", "statement", None],
}


class GreetedClient(harness.RawClient):
    """A RawClient that keeps the ParameterStatus messages of its login, in order."""

    def __init__(self, *args, **kwargs):
        self.greeting: list[tuple[str, str]] = []
        super().__init__(*args, **kwargs)

    def read_message(self):
        kind, body = super().read_message()
        if kind == b"S":
            name, value = body.split(b"\0")[:2]
            self.greeting.append((name.decode(), value.decode()))
        return kind, body


def console_as_pgbouncer(pooler) -> tuple[list, dict]:
    """The greeting of a console login (user app, then the stats user md5user: the same) and
    the admin database's rows, with the port as PORT."""
    greetings = []
    for user, password in (("app", "app"), ("md5user", "md5pass")):
        c = GreetedClient(harness.HOST, pooler.port, user, "pgbouncer", password,
                          params={"application_name": "greeted"})
        c.close()
        greetings.append(c.greeting)
    assert greetings[0] == greetings[1], greetings
    admin = Admin(pooler, db="pgbouncer")
    try:
        # The two sessions above have left once only this one is counted.
        assert wait_until(lambda: pool_row(admin, "pgbouncer", "pgbouncer").get("cl_active")
                          == "1", 5), admin.dicts("SHOW POOLS")
        rows = {}
        for command in ("DATABASES", "POOLS"):
            cols, all_rows, _ = admin.run(f"SHOW {command}")
            row = [r for r in all_rows if r[0] == "pgbouncer"]
            assert len(row) == 1, all_rows
            width = len(reference_columns()[command])
            rows[command] = ["PORT" if v == str(pooler.port) else v for v in row[0][:width]]
    finally:
        admin.close()
    return greetings[0], rows


def test_console_greeting_and_own_rows_are_pgbouncers(make_pooler):
    """Issue 44: the console greets as PgBouncer's (a server_version DBD::Pg accepts, with
    pgsluice's name in it) and lists its own database as PgBouncer lists `pgbouncer`, the asking
    session counted; compared with PgBouncer 1.25.2 itself when its build is there."""
    pooler = make_pooler(**ADMIN)
    greeting, rows = console_as_pgbouncer(pooler)
    version = dict(greeting)["server_version"]
    assert re.fullmatch(r"1\.25\.2/bouncer \(pgsluice \S+\)", version), version
    assert [(k, "1.25.2/bouncer" if k == "server_version" else v) for k, v in greeting] \
        == PGBOUNCER_GREETING
    assert rows == PGBOUNCER_CONSOLE_ROWS, rows
    # pgsluice's own name is listed (and counts its session) while a session is connected.
    own = Admin(pooler)
    try:
        pools = {(r["database"], r["user"]): r for r in own.dicts("SHOW POOLS")}
        assert pools[("pgsluice", "pgsluice")]["cl_active"] == "1", pools
        assert pools[("pgbouncer", "pgbouncer")]["cl_active"] == "0", pools
        lists = dict(own.run("SHOW LISTS")[1])
        # app, pgbouncer and pgsluice; their pools; the auth file's 4 users and the two forced.
        assert (lists["databases"], lists["pools"], lists["users"]) == ("3", "2", "6"), lists
    finally:
        own.close()
    anchor = harness.pgbouncer_anchor()
    if anchor is None:
        print(f"compared with PgBouncer 1.25.2's recorded greeting and rows (no build at "
              f"{harness.PGBOUNCER_ANCHOR})")
        return
    bouncer = make_pooler(binary=anchor, **ADMIN)
    assert console_as_pgbouncer(bouncer) == (PGBOUNCER_GREETING, PGBOUNCER_CONSOLE_ROWS)
    print(f"compared with {anchor}")


def test_console_sessions_count_against_the_client_limits(make_pooler):
    """As PgBouncer 1.25: console sessions count against max_db_client_connections (and
    max_user_client_connections), one over a limit is refused unless its user is in admin_users,
    and SHOW DATABASES lists the console's databases with the sessions counted."""
    pooler = make_pooler(max_db_client_connections=2, **ADMIN)
    stats = [Admin(pooler, user="md5user", password="md5pass", db="pgbouncer") for _ in range(2)]
    admin = None
    try:
        with pytest.raises(harness.PgError) as e:
            Admin(pooler, user="md5user", password="md5pass", db="pgbouncer")
        assert e.value.message == "client connections exceeded (max_db_client_connections)"
        assert e.value.sqlstate == "53300"
        admin = Admin(pooler, db="pgbouncer")  # an admin gets in past the limit
        dbs = {r["name"]: r for r in admin.dicts("SHOW DATABASES")}
        assert dbs["pgbouncer"]["max_client_connections"] == "2"
        assert dbs["pgbouncer"]["current_client_connections"] == "3"
        # pgsluice's own name is listed only while a session is connected to it.
        assert "pgsluice" not in dbs, dbs
        assert dbs["pgbouncer"]["current_connections"] == "0"  # the console has no servers
    finally:
        for s in stats:
            s.close()
        if admin is not None:
            admin.close()


def console_stats(pooler) -> dict:
    """The console's row of SHOW STATS and SHOW STATS_TOTALS (PgBouncer 1.25's columns) after
    three console sessions: one runs three commands, one logs in and leaves without a message,
    and the one that asks, whose SHOW STATS is its first message."""
    busy = Admin(pooler, db="pgbouncer")
    for command in ("SHOW VERSION", "SHOW LISTS", "SHOW POOLS"):
        busy.run(command)
    busy.close()
    Admin(pooler, db="pgbouncer").close()
    asking = Admin(pooler, db="pgbouncer")
    try:
        columns = pgbouncer_1_25_columns()
        got = {}
        for command in ("STATS", "STATS_TOTALS"):
            row = [r for r in asking.dicts(f"SHOW {command}") if r["database"] == "pgbouncer"]
            assert len(row) == 1, row
            # The averages move with stats_period; the totals are what the sessions did.
            got[command] = {c: row[0][c] for c in columns[command]
                            if c != "database" and not c.startswith("avg_")}
    finally:
        asking.close()
    return got


def test_console_counts_a_query_and_a_transaction_per_session(make_pooler):
    """As PgBouncer 1.25.2 counts its admin database: a session's first message starts a query
    and a transaction that no server ever ends, so each session that sent something counts one
    of each, however many commands it ran, and no bytes or times. Compared with PgBouncer itself
    when its build is there."""
    want = {"STATS": {c: "0" for c in pgbouncer_1_25_columns()["STATS"]
                      if c != "database" and not c.startswith("avg_")},
            "STATS_TOTALS": {c: "0" for c in pgbouncer_1_25_columns()["STATS_TOTALS"]
                             if c != "database"}}
    want["STATS"].update(total_xact_count="2", total_query_count="2")
    want["STATS_TOTALS"].update(xact_count="2", query_count="2")
    assert console_stats(make_pooler(**ADMIN)) == want
    anchor = harness.pgbouncer_anchor()
    if anchor is None:
        print(f"compared with PgBouncer 1.25.2's counting (no build at {harness.PGBOUNCER_ANCHOR})")
        return
    assert console_stats(make_pooler(binary=anchor, **ADMIN)) == want
    print(f"compared with {anchor}")


# --------------------------------------------------------------------------------------------
# Numbers under load


def test_counts_move_under_pgbench(pgbench_data, make_pooler):
    pooler = make_pooler(default_pool_size=5, max_client_conn=2000, **ADMIN)
    admin = Admin(pooler)
    samples, done = [], threading.Event()
    result = {}

    def load():
        result["pgbench"] = pooler.pgbench(["-c", "200", "-j", "2", "-S", "-T", "8",
                                            "--no-vacuum"], timeout=240)
        done.set()

    t = threading.Thread(target=load, daemon=True)
    t.start()
    try:
        while not done.is_set():
            r = pool_row(admin)
            if r:
                samples.append(r)
            time.sleep(0.1)
    finally:
        t.join(260)
    rc, out, err = result["pgbench"]
    assert rc == 0, out + err[-2000:]
    m = re.search(r"number of transactions actually processed: (\d+)", out)
    processed = int(m.group(1))
    assert samples, "no SHOW POOLS sample"
    assert max(int(s["cl_waiting"]) for s in samples) > 0, samples[-3:]
    assert max(int(s["sv_active"]) for s in samples) <= 5
    assert max(int(s["sv_active"]) + int(s["sv_idle"]) + int(s["sv_used"]) + int(s["sv_login"])
               for s in samples) <= 5
    assert max(int(s["cl_active"]) + int(s["cl_waiting"]) for s in samples) >= 150
    assert max(int(s["maxwait_us"]) + 1_000_000 * int(s["maxwait"]) for s in samples) > 0
    # After the run: nobody left, and the totals cover what pgbench did.
    assert wait_until(lambda: int(pool_row(admin)["cl_active"]) == 0, 10)
    st = stats_row(admin)
    assert int(st["total_xact_count"]) >= processed
    assert int(st["total_query_count"]) >= int(st["total_xact_count"])
    assert int(st["total_server_assignment_count"]) >= processed
    assert int(st["total_wait_time"]) > 0
    assert int(st["total_xact_time"]) > 0 and int(st["total_query_time"]) > 0
    assert int(st["total_received"]) > 0 and int(st["total_sent"]) > int(st["total_received"])
    # SHOW TOTALS adds the console's row "pgbouncer": one transaction per console session.
    console = int(stats_row(admin, "pgbouncer")["total_xact_count"])
    totals = dict(admin.run("SHOW TOTALS")[1])
    assert int(totals["total_xact_count"]) == int(st["total_xact_count"]) + console
    # Averages (stats_period 60 s: the run is in the current window) are real numbers.
    assert int(st["avg_xact_count"]) > 0
    assert 0 < int(st["avg_xact_time"]) < 10_000_000
    print(f"pgbench: {processed} transactions; last SHOW POOLS under load: {samples[len(samples)//2]}")
    print(f"SHOW STATS: {st}")
    admin.close()


def test_query_and_transaction_times_are_the_time_the_server_took(make_pooler):
    # The stats clock is read once per loop turn (PgBouncer's cached time): a 300 ms query still
    # counts 300 ms, not 0 and not the time the pooler waited for something else.
    pooler = make_pooler(**ADMIN)
    with pooler.raw() as c:
        c.query("BEGIN")
        c.query("SELECT pg_sleep(0.3)")
        c.query("COMMIT")
    admin = Admin(pooler)
    st = stats_row(admin)
    assert int(st["total_xact_count"]) == 1, st
    assert 300_000 <= int(st["total_query_time"]) < 3_000_000, st
    assert int(st["total_query_time"]) <= int(st["total_xact_time"]) < 3_000_000, st
    admin.close()


def test_show_clients_and_servers_rows(make_pooler):
    pooler = make_pooler(default_pool_size=2, **ADMIN)
    c1 = pooler.raw(params={"application_name": "cli-one"})
    c1.send_query("BEGIN")
    c1.read_result()
    admin = Admin(pooler)
    try:
        clients = [r for r in admin.dicts("SHOW CLIENTS") if r["database"] == "app"]
        assert len(clients) == 1
        cl = clients[0]
        assert cl["type"] == "C" and cl["user"] == "app" and cl["state"] == "active"
        assert cl["application_name"] == "cli-one" and cl["addr"] == "127.0.0.1"
        assert int(cl["local_port"]) == pooler.port and cl["link"]
        assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", cl["connect_time"])
        servers = admin.dicts("SHOW SERVERS")
        assert len(servers) == 1
        sv = servers[0]
        assert sv["type"] == "S" and sv["state"] == "active" and sv["link"] == cl["ptr"]
        assert int(sv["remote_pid"]) > 0 and sv["database"] == "app"
        c1.query("COMMIT")
        sv = admin.dicts("SHOW SERVERS")[0]
        assert sv["state"] == "idle" and sv["link"] == ""
        assert [r["state"] for r in admin.dicts("SHOW CLIENTS") if r["database"] == "app"] == \
            ["idle"]
        dbs = {r["name"]: r for r in admin.dicts("SHOW DATABASES")}
        assert dbs["app"]["pool_size"] == "2" and dbs["app"]["current_connections"] == "1"
    finally:
        admin.close()
        c1.close()


# --------------------------------------------------------------------------------------------
# Commands


def test_pause_holds_transactions_and_resume_releases(make_pooler):
    pooler = make_pooler(default_pool_size=2, **ADMIN)
    admin = Admin(pooler)
    busy = pooler.raw()
    try:
        busy.send_query("BEGIN")
        busy.read_result()
        # PAUSE waits for the open transaction.
        admin.send("PAUSE app")
        admin.c.sock.settimeout(1.0)
        with pytest.raises(socket.timeout):
            admin.c.read_message()
        admin.c.sock.settimeout(15)
        busy.query("COMMIT")
        assert admin.result()[2] == "PAUSE"
        assert pool_row(admin)["paused"] == "1"
        # New transactions queue while paused.
        late = pooler.raw()
        late.send_query("SELECT 42")
        late.sock.settimeout(1.0)
        with pytest.raises(socket.timeout):
            late.read_message()
        late.sock.settimeout(15)
        assert int(pool_row(admin)["cl_waiting"]) == 1
        assert admin.dicts("SHOW DATABASES")[0]["paused"] == "1"
        assert admin.run("RESUME app")[2] == "RESUME"
        rows, _, _ = late.read_result()
        assert rows == [["42"]]
        late.close()
        assert pool_row(admin)["paused"] == "0"
        # PAUSE of everything, SHOW STATE, RESUME.
        assert admin.run("PAUSE")[2] == "PAUSE"
        assert dict(admin.run("SHOW STATE")[1])["paused"] == "yes"
        assert admin.run("RESUME")[2] == "RESUME"
        assert busy.query("SELECT 1") == [["1"]]
    finally:
        busy.close()
        admin.close()


def test_reload_picks_up_pool_size(make_pooler):
    pooler = make_pooler(default_pool_size=2, **ADMIN)
    admin = Admin(pooler)

    def busy_servers(clients: int) -> int:
        conns = [pooler.raw() for _ in range(clients)]
        try:
            for c in conns:
                c.send_query("SELECT pg_sleep(0.5)")
            peak = 0
            deadline = time.monotonic() + 0.4
            while time.monotonic() < deadline:
                r = pool_row(admin)
                peak = max(peak, int(r["sv_active"]) + int(r["sv_idle"]) + int(r["sv_login"]))
                time.sleep(0.05)
            for c in conns:
                c.read_result()
            return peak
        finally:
            for c in conns:
                c.close()

    try:
        assert busy_servers(6) <= 2
        with open(pooler.config_path) as f:
            text = f.read()
        with open(pooler.config_path, "w") as f:
            f.write(text.replace("default_pool_size = 2", "default_pool_size = 4"))
        assert admin.run("RELOAD")[2] == "RELOAD"
        assert pool_row(admin)["pool_size"] == "4"
        assert any(r["key"] == "default_pool_size" and r["value"] == "4"
                   for r in admin.dicts("SHOW CONFIG"))
        assert wait_until(lambda: busy_servers(6) > 2, 10)
        # A broken file: RELOAD fails with the reason, the running configuration stays.
        with open(pooler.config_path, "w") as f:
            f.write(text.replace("default_pool_size = 2", "default_pool_size = lots"))
        with pytest.raises(harness.PgError) as e:
            admin.run("RELOAD")
        assert "default_pool_size" in e.value.message and e.value.sqlstate == "F0000"
        # PgBouncer's words lead the message: scripts (and PgBouncer's own tests) match them.
        assert e.value.message.startswith("RELOAD failed, see logs for additional details")
        assert pool_row(admin)["pool_size"] == "4"
        # SET changes an online setting; a fixed one is refused.
        assert admin.run("SET default_pool_size = 3")[2] == "SET"
        assert pool_row(admin)["pool_size"] == "3"
        with pytest.raises(harness.PgError):
            admin.run("SET listen_port = 1")
    finally:
        admin.close()


def test_kill_client_drops_one_client(make_pooler):
    pooler = make_pooler(**ADMIN)
    a = pooler.raw(params={"application_name": "victim"})
    b = pooler.raw(params={"application_name": "bystander"})
    admin = Admin(pooler)
    try:
        a.query("SELECT 1")
        clients = {r["application_name"]: r for r in admin.dicts("SHOW CLIENTS")}
        victim = clients["victim"]["id"]
        assert admin.run(f"KILL_CLIENT {victim}")[2] == "KILL_CLIENT"
        with pytest.raises((harness.PgError, ConnectionError, OSError)) as e:
            a.query("SELECT 1")
        if isinstance(e.value, harness.PgError):
            assert e.value.sqlstate == "57P01"
        assert b.query("SELECT 2") == [["2"]]
        names = [r["application_name"] for r in admin.dicts("SHOW CLIENTS")]
        assert "victim" not in names and "bystander" in names
        with pytest.raises(harness.PgError) as e:
            admin.run(f"KILL_CLIENT {victim}")
        assert (e.value.sqlstate, e.value.message) == ("08P01", f"client not found: {victim}")
    finally:
        a.close()
        b.close()
        admin.close()


def test_disable_enable_reconnect_kill(make_pooler):
    pooler = make_pooler(**ADMIN)
    admin = Admin(pooler)
    try:
        with pooler.raw() as c:
            backend = c.scalar("SELECT pg_backend_pid()")
        assert admin.run("DISABLE app")[2] == "DISABLE"
        with pytest.raises(harness.PgError) as e:
            pooler.raw()
        assert e.value.sqlstate == "57P03"
        assert e.value.message == 'database "app" is disabled'  # PgBouncer's words
        assert admin.run("ENABLE app")[2] == "ENABLE"
        # RECONNECT: the idle server goes; the next client gets a new backend.
        assert admin.run("RECONNECT app")[2] == "RECONNECT"
        assert admin.run("WAIT_CLOSE app")[2] == "WAIT_CLOSE"
        with pooler.raw() as c:
            assert c.scalar("SELECT pg_backend_pid()") != backend
        # KILL: clients and servers go, and the database is paused until RESUME.
        victim = pooler.raw()
        victim.query("SELECT 1")
        assert admin.run("KILL app")[2] == "KILL"
        with pytest.raises((harness.PgError, ConnectionError, OSError)):
            victim.query("SELECT 1")
        assert pool_row(admin)["paused"] == "1"
        assert admin.run("RESUME app")[2] == "RESUME"
        with pooler.raw() as c:
            assert c.scalar("SELECT 3") == "3"
    finally:
        admin.close()


def test_kill_without_a_database_kills_every_database(make_pooler):
    # PgBouncer 1.25: KILL alone kills every pool's database (pausing each); refused while the
    # pooler is paused or suspended. (Before, pgsluice required a database.)
    pooler = make_pooler(databases={"app": "host=127.0.0.1 port={pg_port} dbname=app",
                                    "app2": "host=127.0.0.1 port={pg_port} dbname=app"},
                         **ADMIN)
    admin = Admin(pooler)
    try:
        victims = [pooler.raw(), pooler.raw(db="app2")]
        for v in victims:
            v.query("SELECT 1")
        assert admin.run("KILL")[2] == "KILL"
        for v in victims:
            with pytest.raises((harness.PgError, ConnectionError, OSError)):
                v.query("SELECT 1")
        paused = {r["name"]: r["paused"] for r in admin.dicts("SHOW DATABASES")}
        assert paused["app"] == "1" and paused["app2"] == "1", paused
        assert admin.run("RESUME")[2] == "RESUME"
        with pooler.raw(db="app2") as c:
            assert c.scalar("SELECT 7") == "7"
        assert admin.run("PAUSE")[2] == "PAUSE"
        with pytest.raises(harness.PgError) as e:
            admin.run("KILL app")
        assert e.value.message == "already suspended/paused", e.value.message
        assert admin.run("RESUME")[2] == "RESUME"
    finally:
        admin.close()


def test_shutdown_wait_for_clients(make_pooler):
    pooler = make_pooler(**ADMIN)
    c = pooler.raw()
    admin = Admin(pooler)
    assert admin.run("SHUTDOWN WAIT_FOR_CLIENTS")[2] == "SHUTDOWN"
    # No new connections; the existing client keeps working.
    with pytest.raises(OSError):
        socket.create_connection((harness.HOST, pooler.port), timeout=2).close()
    assert c.query("SELECT 5") == [["5"]]
    assert pooler.alive()
    c.close()
    assert wait_until(lambda: not pooler.alive(), 10), "pooler did not exit after the last client"
    assert pooler.proc.returncode == 0
    admin.close()
    pooler.proc = None  # already exited: nothing for the fixture to stop


# --------------------------------------------------------------------------------------------
# Prometheus

SAMPLE_RE = re.compile(
    r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\\\|\\"|\\n)*",?)*\})? '
    r'-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$')
COMMENT_RE = re.compile(r"^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$")


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{harness.HOST}:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def parse_metrics(text: str) -> dict[str, dict[str, float]]:
    values: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert COMMENT_RE.match(line), line
            continue
        assert SAMPLE_RE.match(line), line
        name_labels, value = line.rsplit(" ", 1)
        name, _, labels = name_labels.partition("{")
        values.setdefault(name, {})[labels.rstrip("}")] = float(value)
    return values


def test_metrics_endpoint_matches_show_stats(pgbench_data, make_pooler):
    mport = harness.free_port()
    pooler = make_pooler(default_pool_size=5, metrics_port=mport, **ADMIN)
    rc, out, err = pooler.pgbench(["-c", "20", "-j", "2", "-S", "-T", "3", "--no-vacuum"])
    assert rc == 0, out + err[-2000:]
    admin = Admin(pooler)
    try:
        st = stats_row(admin)
        pr = pool_row(admin)
        status, text = scrape(mport)
        assert status == 200
        m = parse_metrics(text)
        key = 'database="app",user="app"'
        assert m["pgsluice_up"][""] == 1
        assert m["pgsluice_transactions_total"][key] == int(st["total_xact_count"])
        assert m["pgsluice_queries_total"][key] == int(st["total_query_count"])
        assert m["pgsluice_server_assignments_total"][key] == \
            int(st["total_server_assignment_count"])
        assert m["pgsluice_received_bytes_total"][key] == int(st["total_received"])
        assert m["pgsluice_sent_bytes_total"][key] == int(st["total_sent"])
        assert round(m["pgsluice_xact_time_seconds_total"][key] * 1e6) == \
            int(st["total_xact_time"])
        assert round(m["pgsluice_wait_time_seconds_total"][key] * 1e6) == \
            int(st["total_wait_time"])
        assert m["pgsluice_pool_sv_idle"][key] == int(pr["sv_idle"])
        assert m["pgsluice_pool_size"][key] == 5
        # Histograms: cumulative, +Inf == _count == the transaction count.
        buckets = sorted(((float(re.search(r'le="([^"]+)"', k).group(1)), v)
                          for k, v in m["pgsluice_transaction_duration_seconds_bucket"].items()
                          if k.startswith(key)))
        counts = [v for _, v in buckets]
        assert counts == sorted(counts)
        assert buckets[-1][0] == float("inf")
        assert buckets[-1][1] == m["pgsluice_transaction_duration_seconds_count"][key] == \
            int(st["total_xact_count"])
        assert m["pgsluice_query_duration_seconds_count"][key] > 0
        assert m["pgsluice_client_wait_seconds_count"][key] > 0
        # Other paths and methods.
        assert scrape(mport, "/nothing")[0] == 404
        # Many scrapes, some concurrent, some abandoned half-way: it keeps answering.
        for _ in range(100):
            assert scrape(mport)[0] == 200
        idle = [socket.create_connection((harness.HOST, mport)) for _ in range(10)]
        results = []
        threads = [threading.Thread(target=lambda: results.append(scrape(mport)[0]))
                   for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results == [200] * 20
        for s in idle:
            s.close()
        # It answers while everything is paused, too.
        assert admin.run("PAUSE")[2] == "PAUSE"
        status, text = scrape(mport)
        assert status == 200 and parse_metrics(text)["pgsluice_paused"][""] == 1
        admin.run("RESUME")
        print("\n".join(l for l in text.splitlines() if 'database="app"' in l and
                        "_bucket" not in l)[:3000])
    finally:
        admin.close()


def test_a_multi_host_entry_shows_its_hosts_and_roles(pg, make_pooler):
    """SHOW SERVERS, SHOW POOLS, SHOW DATABASES and /metrics for an entry of three hosts: one
    that refuses connections, PostgreSQL over TCP and PostgreSQL over its Unix socket."""
    mport, dead = harness.free_port(), harness.free_port()
    sock = f"{pg.socket_dir}/.s.PGSQL.{pg.port}"
    # The two clients are on different workers: the hosts' round-robin turn is the pool's, so
    # their servers still go to different hosts (each worker's own turn sent both to the first).
    pooler = make_pooler(
        databases={"multi": f"host=127.0.0.1,127.0.0.1,{pg.socket_dir} "
                            f"port={dead},{pg.port},{pg.port} dbname=app "
                            "target_session_attrs=read-write"},
        default_pool_size=4, server_login_retry=30, metrics_port=mport, **ADMIN)
    clients = [pooler.raw(db="multi") for _ in range(2)]
    admin = Admin(pooler)
    try:
        for c in clients:
            c.query("BEGIN")  # each holds its server
        servers = [r for r in admin.dicts("SHOW SERVERS") if r["database"] == "multi"]
        # The refusing host is skipped: one server on each of the others, each row naming the
        # host it logged in to, the address it reached and the role it reported.
        assert sorted(r["host"] for r in servers) == sorted([f"127.0.0.1:{pg.port}", sock])
        for r in servers:
            assert r["role"] == "primary", r
            if r["host"] == sock:
                assert r["addr"] == "unix" and int(r["port"]) == pg.port, r
            else:
                assert r["addr"] == "127.0.0.1" and int(r["port"]) == pg.port, r
        db = {r["name"]: r for r in admin.dicts("SHOW DATABASES")}["multi"]
        assert db["hosts"] == f"127.0.0.1:{dead},127.0.0.1:{pg.port},{sock}", db
        assert db["target_session_attrs"] == "read-write"
        pool = [r for r in admin.dicts("SHOW POOLS") if r["database"] == "multi"][0]
        assert (pool["target_session_attrs"], pool["sv_primary"], pool["sv_standby"],
                pool["hosts"], pool["usable_hosts"]) == ("read-write", "2", "0", "3", "2"), pool
        status, text = scrape(mport)
        assert status == 200
        m = parse_metrics(text)
        key = 'database="multi",user="app"'
        assert m["pgsluice_pool_sv_primary"][key] == 2
        assert m["pgsluice_pool_usable_hosts"][key] == 2
        by_host = m["pgsluice_pool_host_servers"]
        assert by_host[f'{key},host="127.0.0.1:{pg.port}",role="primary"'] == 1
        assert by_host[f'{key},host="{sock}",role="primary"'] == 1
        assert pooler.wait_for_log(r"app@multi: host 127\.0\.0\.1:%d unusable: " % dead)
    finally:
        admin.close()
        for c in clients:
            c.close()
