"""Experiment 3: what transaction pooling breaks, and what pgsluice does about it.

Two clients, A and B (psycopg, autocommit), run each case three times: directly against
PostgreSQL (the expected behaviour), through pgsluice's `one` database (pool_size=1, so both share
one server connection; session_state_action = warn: the breakage happens and SHOW LEAKS names
it), and through `two_default`, pgsluice at its defaults (no session_state_action, pool_size=2:
settings kept, what cannot move pinned, never the last server; stand/pgsluice.ini).
Protocol-level prepared statements run against a pgsluice with max_prepared_statements = 0 and
then against the default one.

Each case decides from what the clients saw whether it broke; the checks require the breakage
under warn (with a SHOW LEAKS row) and its absence under the defaults (with a row of the
default's action).
"""

from __future__ import annotations

import time

import charts
import seed
import stand as st
from stand import log

LOCK_KEY = 42
CHANNEL = "jobs"


class Phase:
    def __init__(self, name: str, target: st.Target, db: str, title: str, action: str = ""):
        self.name = name      # direct, warn, default
        self.target = target
        self.db = db
        self.title = title
        self.action = action  # the session_state_action in force ("" for direct)


class Session:
    """One client (A, B, …) whose every statement and result goes into the transcript."""

    def __init__(self, phase: Phase, who: str, lines: list[str]):
        self.who = who
        self.lines = lines
        self.conn = phase.target.connect(phase.db, application_name=who)
        self.notifications: list[str] = []
        self.conn.add_notify_handler(lambda n: self.notifications.append(n.payload))

    def run(self, sql: str, params=None, prepare: bool | None = None, show: str | None = None,
            quiet: bool = False):
        """Runs sql; returns the first column of the first row, None, or an Error."""
        started = time.monotonic()
        try:
            cur = self.conn.execute(sql, params, prepare=prepare)
            value = cur.fetchone()[0] if cur.description else cur.statusmessage
            shown = fmt(value)
        except Exception as e:  # noqa: BLE001  (an error is a result here)
            value = Error(e)
            shown = str(value)
        waited = time.monotonic() - started
        if waited >= 2:  # a wait the reader should see: for a pin, up to query_wait_timeout
            shown += f"\n     (answered after {waited:.0f} s)"
        if not quiet:
            self.lines.append(f"{self.who}> {show or sql}")
            self.lines.append(f"     {shown}")
        return value

    def close(self) -> None:
        self.conn.close()


class Error:
    def __init__(self, e: Exception):
        diag = getattr(e, "diag", None)
        self.sqlstate = getattr(diag, "sqlstate", None) or getattr(e, "sqlstate", None)
        self.message = (getattr(diag, "message_primary", None) or str(e)).strip()
        self.hint = getattr(diag, "message_hint", None)

    def __str__(self) -> str:
        s = f"ERROR {self.sqlstate}: {self.message}"
        if self.hint:
            s += f"\n     HINT: {self.hint}"
        return s


def fmt(v) -> str:
    if v is None or v == "":
        return "(empty)"
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


def is_err(v, sqlstate: str | None = None) -> bool:
    return isinstance(v, Error) and (sqlstate is None or v.sqlstate == sqlstate)


# --------------------------------------------------------------------------------------------
# The cases: each runs in one phase and returns (broken, what broke).


def backends_line(a: Session, b: Session, lines: list[str]) -> None:
    pa = a.run("SELECT pg_backend_pid()", quiet=True)
    pb = b.run("SELECT pg_backend_pid()", quiet=True)
    lines.append(f"-- {a.who} is on backend {pa}, {b.who} on backend {pb}"
                 + (" (the same server connection)" if pa == pb else ""))


def case_set(ctx, ph: Phase, lines: list[str]):
    a, b = Session(ph, "A", lines), Session(ph, "B", lines)
    try:
        a.run("SET app.tenant = 'A'")
        backends_line(a, b, lines)
        q = "SELECT current_setting('app.tenant', true)"
        a1 = a.run(q)
        b1 = b.run(q)
        b.run("SET app.tenant = 'B'")
        a2 = a.run(q)
    finally:
        a.close()
        b.close()
    broken = []
    if b1 == "A":
        broken.append("B saw A's value")
    if a2 == "B":
        broken.append("A then saw B's value")
    if ph.action == "reset" and a1 in (None, ""):
        lines.append("-- reset: a plain SET now lasts until the end of its transaction (what SET "
                     "LOCAL says); a setting for the whole session belongs in the startup "
                     "packet (options=-c …) or ALTER ROLE … SET")
    return broken


def advisory_locks(ctx) -> int:
    with ctx.stand.superuser() as c:
        return c.execute("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = "
                         "l.database WHERE l.locktype = 'advisory' AND d.datname = 'app' AND "
                         "l.objid = %s AND l.granted", (LOCK_KEY,)).fetchone()[0]


def case_advisory_lock(ctx, ph: Phase, lines: list[str]):
    a, b = Session(ph, "A", lines), Session(ph, "B", lines)
    try:
        a.run(f"SELECT 'locked' FROM pg_advisory_lock({LOCK_KEY})")
        backends_line(a, b, lines)
        b1 = b.run(f"SELECT pg_try_advisory_lock({LOCK_KEY})")
        a.run(f"SELECT pg_advisory_unlock({LOCK_KEY})")
        n1 = advisory_locks(ctx)
        lines.append(f"-- after A's unlock: advisory locks {LOCK_KEY} in pg_locks = {n1}")
    finally:
        a.close()
        b.close()
    # A pinned server is cleaned when its client leaves: give that a moment.
    st.wait_until(lambda: advisory_locks(ctx) == 0, 2)
    n2 = advisory_locks(ctx)
    lines.append(f"-- after both clients left: advisory locks {LOCK_KEY} in pg_locks = {n2}")
    broken = []
    if b1 is True:
        broken.append(f"B got lock {LOCK_KEY} while A held it")
    if n1:
        broken.append("the lock outlived A's unlock")
    if n2:
        broken.append("the lock outlived both clients")
    return broken


def listening(s: Session):
    return s.run("SELECT string_agg(c, ',') FROM pg_listening_channels() c")


def case_listen(ctx, ph: Phase, lines: list[str]):
    a, c = Session(ph, "A", lines), Session(ph, "C", lines)
    try:
        a.run(f"LISTEN {CHANNEL}")
        backends_line(a, c, lines)
        c1 = listening(c)
        with ctx.stand.superuser() as o:
            o.execute(f"NOTIFY {CHANNEL}, 'hello'")
        lines.append(f"-- NOTIFY {CHANNEL}, 'hello' from a direct connection")
        time.sleep(0.5)  # delivered now: to A's backend, which (pooled) sits idle in the pool
        deadline = time.monotonic() + 1.5
        while not a.notifications and time.monotonic() < deadline:
            a.run("SELECT 1", quiet=True)  # a notification comes with a reply
            time.sleep(0.1)
        got = list(a.notifications)
        lines.append(f"-- A received: {', '.join(got) if got else 'nothing'}")
    finally:
        a.close()
        c.close()
    time.sleep(0.3)
    d = Session(ph, "D", lines)
    try:
        lines.append("-- A has left; a new client D connects")
        d1 = listening(d)
    finally:
        d.close()
    broken = []
    if c1 and CHANNEL in str(c1):
        broken.append(f"C, which never listened, listens on {CHANNEL}")
    if not got:
        broken.append("A's notification was lost")
    if d1 and CHANNEL in str(d1):
        broken.append(f"a new client after A left still listens on {CHANNEL}")
    return broken


def case_prepare(ctx, ph: Phase, lines: list[str]):
    a, b = Session(ph, "A", lines), Session(ph, "B", lines)
    try:
        a.run("PREPARE q AS SELECT 'A'")
        backends_line(a, b, lines)
        b0 = b.run("PREPARE q AS SELECT 'B'")
        b1 = b.run("EXECUTE q")
        a.run("EXECUTE q")
    finally:
        a.close()
        b.close()
    broken = []
    if is_err(b0, "42P05"):
        broken.append("B's PREPARE q found A's q")
    if b1 == "A":
        broken.append("B's EXECUTE q ran A's statement")
    return broken


def case_temp_table(ctx, ph: Phase, lines: list[str]):
    a, b = Session(ph, "A", lines), Session(ph, "B", lines)
    try:
        a.run("CREATE TEMP TABLE scratch (who text); INSERT INTO scratch VALUES ('A')")
        backends_line(a, b, lines)
        b1 = b.run("SELECT to_regclass('pg_temp.scratch')::text")
        b2 = b.run("CREATE TEMP TABLE scratch (who text)")
        a1 = a.run("SELECT who FROM scratch")
    finally:
        a.close()
        b.close()
    broken = []
    if b1 not in (None, "") and not is_err(b1):
        broken.append("B sees A's temp table")
    if is_err(b2, "42P07"):
        broken.append("B cannot create its own")
    if ph.action == "reset" and is_err(a1, "42P01"):
        lines.append("-- reset: the temp table lived until the end of A's transaction; keep "
                     "one inside a transaction (ON COMMIT DROP)")
    return broken


PREPARED_SQL = ("SELECT %s::text AS who", "SELECT upper(%s::text) AS who")


def case_protocol_prepared(ctx, ph: Phase, lines: list[str]):
    a, b = Session(ph, "A", lines), Session(ph, "B", lines)
    # prepare=True prepares only when automatic preparing is on at all (threshold not None);
    # 100 keeps the backend-pid queries unprepared.
    a.conn.prepare_threshold = b.conn.prepare_threshold = 100
    try:
        show = "{} with prepare=True ({}; psycopg names it _pg3_0)"
        a.run(PREPARED_SQL[0], ["A"], prepare=True,
              show=show.format(PREPARED_SQL[0] % "'A'", "Parse, Bind, Execute"))
        backends_line(a, b, lines)
        b1 = b.run(PREPARED_SQL[1], ["b"], prepare=True,
                   show=show.format(PREPARED_SQL[1] % "'b'", "Parse, Bind, Execute"))
        a2 = a.run(PREPARED_SQL[0], ["A"], prepare=True,
                   show=f"{PREPARED_SQL[0] % repr('A')} again (Bind _pg3_0, Execute)")
    finally:
        a.close()
        b.close()
    # The article's form of it: pgbench -M prepared, several clients over one server.
    r = st.run_pgbench(ph.target, ["-n", "-M", "prepared", "-S", "-c", "4", "-j", "2", "-T", "1"],
                       timeout=120, db=ph.db)
    errs = r["errors"]
    lines.append(f"$ pgbench -M prepared -S -c 4 -T 1 (db {ph.db})")
    for e, n in list(errs.items())[:3]:
        lines.append(f"     {n:>5} {e}")
    if r["status"] == "ok":
        lines.append(f"     tps = {r['tps']:.0f}, {'no errors' if not errs else 'run not aborted'}")
    else:
        lines.append("     Run was aborted")
    broken = []
    if is_err(b1):
        broken.append(f"B's prepared statement failed ({b1.sqlstate})")
    if is_err(a2):
        broken.append("A's prepared statement failed")
    if r["status"] != "ok" or errs:
        broken.append("pgbench -M prepared: " + "; ".join(errs) if errs else "failed")
    return broken


# (name, title, leak kind in SHOW LEAKS, database of the default phase, what the defaults do)
CASES = [
    ("set", "A plain SET", "set", "two_default", "keep", case_set),
    ("advisory_lock", "A session advisory lock", "advisory_lock", "two_default", "pin",
     case_advisory_lock),
    ("listen", "LISTEN", "listen", "two_default", "relay", case_listen),
    ("prepare", "SQL PREPARE", "prepare", "two_default", "keep", case_prepare),
    ("temp_table", "A temp table", "temp_object", "two_default", "pin", case_temp_table),
    ("protocol_prepared", "Protocol-level prepared statements", None, "one",
     "max_prepared_statements = 200", case_protocol_prepared),
]
POOL_SIZE = {"one": 1, "one_reset": 1, "one_reject": 1, "two_pin": 2, "two_default": 2}


# --------------------------------------------------------------------------------------------


class Ctx:
    def __init__(self, stand):
        self.stand = stand
        self.main = stand.pgsluice(200)
        self.noprep = stand.pgsluice(0)
        self.consoles = {self.main.name: st.Console(self.main),
                         self.noprep.name: st.Console(self.noprep)}

    def leaks(self, target: st.Target) -> dict:
        rows = self.consoles[target.name].query("SHOW LEAKS")
        return {(r["kind"], r["detail"], r["action"], r["database"], r["application_name"],
                 r["source"]): int(r["count"]) for r in rows}

    def prepared(self, target: st.Target, db: str) -> dict | None:
        for r in self.consoles[target.name].query("SHOW PREPARED"):
            if r["database"] == db:
                return {k: r[k] for k in ("client_parse_count", "server_parse_count",
                                          "bind_count", "max_prepared_statements")}
        return None

    def clean(self, target: st.Target, db: str) -> None:
        """Closes the database's servers (and whatever state they still carry) before the next
        case: RECONNECT, then WAIT_CLOSE until they are gone."""
        c = self.consoles[target.name]
        c.query(f"RECONNECT {db}")
        c.query(f"WAIT_CLOSE {db}")

    def close(self) -> None:
        for c in self.consoles.values():
            c.close()


def run_phase(ctx: Ctx, case, ph: Phase) -> dict:
    name, title, kind, _, _, fn = case
    lines: list[str] = []
    before = ctx.leaks(ph.target) if ph.target.console else {}
    broken = fn(ctx, ph, lines)
    res = {"phase": ph.name, "title": ph.title, "db": ph.db, "action": ph.action,
           "broken": broken, "transcript": lines}
    if ph.target.console:
        if kind:
            def new_rows():
                return {k: v - before.get(k, 0) for k, v in ctx.leaks(ph.target).items()
                        if k[0] == kind and k[3] == ph.db and v > before.get(k, 0)}
            rows = st.wait_until(new_rows, 2)
            res["leaks"] = [{"kind": k[0], "detail": k[1], "action": k[2], "database": k[3],
                             "application_name": k[4], "source": k[5], "count": v}
                            for k, v in rows.items()]
        else:
            res["prepared"] = ctx.prepared(ph.target, ph.db)
        ctx.clean(ph.target, ph.db)
    log(f"  {name:<17} {ph.name:<7} broken: {'; '.join(broken) or 'no'}")
    return res


def run(stand, args) -> dict:
    stand.pgbench_init(1)
    ctx = Ctx(stand)
    direct = stand.targets["direct"]
    results = []
    try:
        for case in CASES:
            name, title, kind, pdb, paction, _ = case
            phases = [Phase("direct", direct, st.DB, "directly (each client has its own backend)")]
            if name == "protocol_prepared":
                phases.append(Phase("warn", ctx.noprep, "one",
                                    "through pgsluice with max_prepared_statements = 0, "
                                    "pool_size = 1", "warn"))
                phases.append(Phase("default", ctx.main, "one",
                                    "through pgsluice with max_prepared_statements = 200 (the "
                                    "default), pool_size = 1", paction))
            else:
                phases.append(Phase("warn", ctx.main, "one",
                                    "through pgsluice, session_state_action = warn, "
                                    "pool_size = 1", "warn"))
                phases.append(Phase("default", ctx.main, pdb,
                                    "through pgsluice at its defaults (no "
                                    "session_state_action: here " + paction + "), "
                                    f"pool_size = {POOL_SIZE[pdb]}", paction))
            results.append({"case": name, "title": title, "kind": kind,
                            "default_action": paction, "seed": seed.BREAKAGE.get(name),
                            "phases": [run_phase(ctx, case, ph) for ph in phases]})
    finally:
        ctx.close()
    return {"experiment": "breakage", "targets": ["direct", "pgsluice", "pgsluice_noprep"],
            "cases": results}


def check(res: dict) -> list[str]:
    problems = []
    for c in res["cases"]:
        ph = {p["phase"]: p for p in c["phases"]}
        if ph["direct"]["broken"]:
            problems.append(f"{c['case']}: broken even directly: {ph['direct']['broken']}")
        if not ph["warn"]["broken"]:
            problems.append(f"{c['case']}: the breakage did not show under {ph['warn']['title']}")
        if ph["default"]["broken"]:
            problems.append(f"{c['case']}: still broken {ph['default']['title']}: "
                            f"{'; '.join(ph['default']['broken'])}")
        if c["kind"]:
            for p, action in (("warn", "warn"), ("default", c["default_action"])):
                if not any(x["action"] == action for x in ph[p].get("leaks", [])):
                    problems.append(f"{c['case']}: SHOW LEAKS has no {c['kind']} row with "
                                    f"action {action} for database {ph[p]['db']}")
        else:
            prep = ph["default"].get("prepared") or {}
            if int(prep.get("client_parse_count") or 0) < 2:
                problems.append(f"{c['case']}: SHOW PREPARED counted no client Parse under "
                                f"the default max_prepared_statements: {prep}")
    return problems


def recorded(p: dict) -> str:
    if "leaks" in p:
        if not p["leaks"]:
            return "nothing"
        parts = []
        for x in p["leaks"]:
            if x["source"] == "query":
                who = f"by {x['application_name']}"
            else:  # seen on the server (a NOTIFY reaching it idle, or session_state_verify)
                who = (f"found on the {x['source']}"
                       + (f" after {x['application_name']}" if x["application_name"] else ""))
            parts.append(f"{x['kind']} {x['detail']}, action {x['action']}, {x['count']}× {who}")
        return "; ".join(parts)
    if "prepared" in p and p["prepared"]:
        q = p["prepared"]
        return (f"SHOW PREPARED: client_parse_count {q['client_parse_count']}, "
                f"server_parse_count {q['server_parse_count']}, bind_count {q['bind_count']}, "
                f"max_prepared_statements {q['max_prepared_statements']}")
    return ""


def markdown(res: dict) -> str:
    out = ["## Experiment 3: what transaction pooling breaks", "",
           "Clients A and B (psycopg, autocommit: every statement is its own transaction) run "
           "each case directly, through pgsluice under `session_state_action = warn` with "
           "pool_size = 1 (both share one server connection, as the article's database `one`), "
           "and "
           "through pgsluice at its defaults (no `session_state_action`; pool_size = 2: a pinned "
           "client keeps its server, the others get the other one). `-- ` lines are the "
           "observer's; SHOW LEAKS is pgsluice's admin console. PgBouncer does not run here: "
           f"its column is what the article showed through {seed.ARTICLE_PGBOUNCER}.", "",
           seed.article_note(), "",
           f"| case | direct | *article*: {seed.ARTICLE_PGBOUNCER} | pgsluice, warn | pgsluice recorded "
           "(warn) | pgsluice at its defaults | broken then? |",
           "|---|---|---|---|---|---|---|"]
    for c in res["cases"]:
        ph = {p["phase"]: p for p in c["phases"]}
        warn = "; ".join(ph["warn"]["broken"]) or "not broken"
        direct = "; ".join(ph["direct"]["broken"]) or "works"
        out.append(f"| {c['title']} | {direct} | {c['seed']} | {warn} | "
                   f"{recorded(ph['warn'])} | {c['default_action']} | "
                   f"{'; '.join(ph['default']['broken']) or 'no'} |")
    for i, c in enumerate(res["cases"], 1):
        out += ["", f"### {i}. {c['title']}", ""]
        for p in c["phases"]:
            verdict = ("broken: " + "; ".join(p["broken"])) if p["broken"] else "not broken"
            out += [f"**{p['title']}** — {verdict}", "", "```"]
            out += [line for line in p["transcript"] if line != ""]
            rec = recorded(p)
            if rec:
                out.append(f"-- pgsluice recorded: {rec}")
            out += ["```", ""]
    return "\n".join(out) + "\n"


def svg(res: dict) -> str:
    """Each case in each phase: broken (red) or not (green), with what broke or what pgsluice
    did about it."""
    columns = ["directly", "pgsluice, warn, pool_size 1", "pgsluice at its defaults"]
    rows = []
    for c in res["cases"]:
        ph = {p["phase"]: p for p in c["phases"]}
        cells = []
        for name in ("direct", "warn", "default"):
            p = ph[name]
            if p["broken"]:
                how = "max_prepared_statements = 0: " if c["kind"] is None else ""
                cells.append(("bad", how + "broken: " + "; ".join(p["broken"])))
            elif name == "default":
                cells.append(("good", f"works ({c['default_action']})"))
            else:
                cells.append(("good", "works"))
        rows.append((c["title"], cells))
    what = ["Two clients, A and B, run each case directly, then through pgsluice with one shared "
            "server connection under session_state_action = warn",
            "(the breakage happens, and SHOW LEAKS records it), then through pgsluice at its "
            "defaults (keep settings, pin what cannot move, pool_size 2)."]
    return charts.grid("Experiment 3: what transaction pooling breaks", columns, rows,
                       width=1100, what=what, res=res)
