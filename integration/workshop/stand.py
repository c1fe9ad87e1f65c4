"""The workshop stand: PostgreSQL, pgsluice (and PgBouncer) for the article's experiments.

Two kinds of stand, the same experiments on both:
- LocalStand (the default, what CI runs): a throwaway PostgreSQL 15 cluster started by
  integration/harness.py on 127.0.0.1 with stand/postgresql.conf included, pgsluice started from
  stand/pgsluice.ini, PgBouncer from Debian when installed. Everything is stopped by its PID.
- ExternalStand (`--stand external`, the client container of docker/compose.yaml): the services
  already run; their addresses come from WORKSHOP_* variables, and the processes are found in the
  PID namespace the client shares with them (compose `pid: service:postgres`).
"""

from __future__ import annotations

import datetime
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
INTEGRATION = os.path.dirname(HERE)
REPO = os.path.dirname(INTEGRATION)
STAND_DIR = os.path.join(HERE, "stand")
sys.path.insert(0, INTEGRATION)
sys.path.insert(0, os.path.join(INTEGRATION, "bench"))
import harness  # noqa: E402
import measure  # noqa: E402

USER = PASSWORD = DB = "app"
# The current PgBouncer (1.25.2, harness.PGBOUNCER_ANCHOR) when its build is beside the
# repository, as the benchmark uses (integration/bench/run); else Debian's 1.18, which is history
# rather than the bar. The reports say which (pgbouncer_version()).
PGBOUNCER = harness.pgbouncer_anchor() or "/usr/sbin/pgbouncer"
PG_BIN = harness.PG_BIN


def pgbouncer_version() -> str | None:
    """`PgBouncer 1.25.2`: what PGBOUNCER says it is (None when it is not there)."""
    if not os.access(PGBOUNCER, os.X_OK):
        return None
    rc, out, _ = harness.run([PGBOUNCER, "--version"])
    return out.splitlines()[0].strip() if rc == 0 and out else None


def machine() -> dict:
    """The machine the numbers come from, for the reports and the charts."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "kernel": os.uname().release,
            "mem_total_gb": round(measure.meminfo_kb("MemTotal") / 1048576, 1),
            "loadavg_at_end": os.getloadavg()[0]}


def log(msg: str) -> None:
    """Progress goes to stderr: stdout is the Markdown report."""
    print(f"[{datetime.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


ENTRYPOINT = os.path.join(REPO, "docker", "workshop-entrypoint")


def render_pgsluice_ini(pg_host: str, listen_addr: str, max_prepared_statements: int) -> str:
    """stand/pgsluice.ini rendered by the compose stand's own entrypoint script, so that the
    local stand runs the same configuration the containers do. {pg_port}, {port} and
    {auth_file} are left for harness.Pooler to fill in."""
    env = harness.clean_env(PG_HOST=pg_host, PG_PORT="{pg_port}", LISTEN_ADDR=listen_addr,
                            LISTEN_PORT="{port}", AUTH_FILE="{auth_file}",
                            MAX_PREPARED_STATEMENTS=str(max_prepared_statements),
                            WORKSHOP_STAND_DIR=STAND_DIR)
    rc, out, err = harness.run(["sh", ENTRYPOINT, "render-pgsluice"], env=env, timeout=30)
    if rc != 0 or "[databases]" not in out:
        raise RuntimeError(f"{ENTRYPOINT} render-pgsluice failed ({rc}): {err}")
    return out


class Target:
    """Something pgbench and psql connect to: PostgreSQL itself or a pooler."""

    def __init__(self, name: str, host: str, port: int, pid: int | None, console: str | None,
                 label: str):
        self.name = name          # direct, pgsluice, pgsluice_noprep, pgbouncer
        self.host = host
        self.port = port
        self.pid = pid            # the pooler's PID when visible (None for direct)
        self.console = console    # the admin console's virtual database
        self.label = label

    def conninfo(self, db: str = DB, application_name: str = "") -> str:
        parts = [f"host={self.host}", f"port={self.port}", f"dbname={db}", f"user={USER}",
                 f"password={PASSWORD}", "connect_timeout=10"]
        if application_name:
            parts.append(f"application_name={application_name}")
        return " ".join(parts)

    def connect(self, db: str = DB, application_name: str = ""):
        """A psycopg connection (autocommit; no automatic server-side prepares, which would not
        survive transaction pooling and are experiment 3's last case on purpose)."""
        import psycopg
        conn = psycopg.connect(self.conninfo(db, application_name), autocommit=True)
        conn.prepare_threshold = None
        return conn

    def pgbench_cmd(self, args: list[str], db: str = DB) -> list[str]:
        return [os.path.join(PG_BIN, "pgbench"), "-h", self.host, "-p", str(self.port),
                "-U", USER] + args + [db]


class Console:
    """The admin console over one persistent connection (simple query protocol, as PgBouncer's
    console requires): SHOW commands as lists of dicts."""

    def __init__(self, target: Target):
        self.target = target
        self.client = harness.RawClient(target.host, target.port, USER, target.console, PASSWORD)

    def query(self, sql: str) -> list[dict]:
        c = self.client
        c.send_query(sql)
        cols: list[str] = []
        rows: list[dict] = []
        error = None
        while True:
            kind, body = c.read_message()
            if kind == b"T":
                cols = harness.parse_row_description(body)
            elif kind == b"D":
                rows.append(dict(zip(cols, harness.parse_data_row(body))))
            elif kind == b"E":
                error = harness.PgError(c._fields(body))
            elif kind == b"Z":
                if error:
                    raise error
                return rows

    def close(self) -> None:
        self.client.close()


# The PostgreSQL settings a report names. current_setting() and not setting || unit:
# shared_buffers' setting is in 8 kB pages, and "32768" || "8kB" read as 327688kB.
PG_SETTINGS_QUERY = ("SELECT string_agg(name || '=' || current_setting(name), ', ' ORDER BY name) "
                     "FROM pg_settings WHERE name IN ('max_connections', 'shared_buffers', "
                     "'synchronous_commit', 'fsync')")


def console_version(target: Target) -> str | None:
    """A pooler's SHOW VERSION on its console, or None when it does not answer."""
    try:
        console = Console(target)
    except Exception:  # noqa: BLE001  (a report without the version beats no report)
        return None
    try:
        rows = console.query("SHOW VERSION")
        return rows[0].get("version") if rows else None
    except Exception:  # noqa: BLE001
        return None
    finally:
        console.close()


class StandBase:
    pg_port: int

    def postmaster_pid(self) -> int | None:
        return None

    def backends(self) -> list[int]:
        """PIDs of the client backends of app@app: direct clients and pooler servers."""
        return measure.client_backends(self.postmaster_pid(), USER, DB)


class WorkshopCluster(harness.PostgresCluster):
    """The harness's cluster with stand/postgresql.conf included last (so that its settings win
    over the harness's), before the first start."""

    def _init(self, max_connections: int) -> None:
        super()._init(max_connections)
        conf = os.path.join(self.data, "workshop.conf")
        shutil.copy(os.path.join(STAND_DIR, "postgresql.conf"), conf)
        harness.chown_postgres(conf)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("\ninclude 'workshop.conf'\n")


class LocalStand(StandBase):
    kind = "local"

    def __init__(self, pgsluice_bin: str, with_pgbouncer: bool = True,
                 query_wait_timeout: int | None = None):
        harness.raise_nofile()
        self.pgsluice_bin = pgsluice_bin
        self.query_wait_timeout = query_wait_timeout
        self.with_pgbouncer = with_pgbouncer and os.access(PGBOUNCER, os.X_OK)
        self.poolers: dict[str, harness.Pooler] = {}
        self.targets: dict[str, Target] = {}
        self.pg = WorkshopCluster(max_connections=1100)
        self.pg_host, self.pg_port = harness.HOST, self.pg.port
        self.targets["direct"] = Target("direct", self.pg_host, self.pg_port, None, None,
                                        "direct")

    def postmaster_pid(self) -> int | None:
        return self.pg._postmaster_pid()

    def superuser(self):
        """psycopg as postgres to database app over the Unix socket (autocommit)."""
        return self.pg.connect(db=DB)

    def pgbench_init(self, scale: int) -> None:
        # `run all` runs every experiment on one stand: the tables are made once per scale.
        if getattr(self, "_pgbench_scale", None) == scale:
            return
        harness.run([os.path.join(PG_BIN, "pgbench"), "-i", "-q", "-s", str(scale), "-h",
                     self.pg.socket_dir, "-p", str(self.pg.port), "-U", USER, DB],
                    check=True, timeout=900)
        self._pgbench_scale = scale

    def pgsluice(self, max_prepared_statements: int = 200) -> Target:
        """pgsluice from stand/pgsluice.ini (started on first use)."""
        name = "pgsluice" if max_prepared_statements else "pgsluice_noprep"
        if name not in self.targets:
            text = render_pgsluice_ini(pg_host=self.pg_host, listen_addr=harness.HOST,
                                       max_prepared_statements=max_prepared_statements)
            if self.query_wait_timeout is not None:
                text = text.replace("[pgsluice]\n", "[pgsluice]\nquery_wait_timeout = "
                                    f"{self.query_wait_timeout}\n", 1)
            p = harness.Pooler(self.pg, config=text, binary=self.pgsluice_bin,
                               users={USER: PASSWORD})
            self.poolers[name] = p
            label = ("pgsluice" if max_prepared_statements
                     else "pgsluice (max_prepared_statements = 0)")
            self.targets[name] = Target(name, harness.HOST, p.port, p.proc.pid, "pgsluice", label)
        return self.targets[name]

    def pgbouncer(self) -> Target | None:
        """PgBouncer (PGBOUNCER) with the same pool settings as pgsluice's `app` entry."""
        if not self.with_pgbouncer:
            return None
        if "pgbouncer" not in self.targets:
            p = harness.Pooler(self.pg, binary=PGBOUNCER, users={USER: PASSWORD},
                               databases={DB: "host=127.0.0.1 port={pg_port} dbname=app"},
                               default_pool_size=20, max_client_conn=2000, admin_users=USER,
                               log_connections=0, log_disconnections=0)
            self.poolers["pgbouncer"] = p
            self.targets["pgbouncer"] = Target("pgbouncer", harness.HOST, p.port, p.proc.pid,
                                               "pgbouncer", pgbouncer_version() or "PgBouncer")
        return self.targets["pgbouncer"]

    def pooler_log(self, name: str) -> str:
        p = self.poolers.get(name)
        return p.log() if p else ""

    def versions(self) -> dict:
        """What ran: PostgreSQL and its settings, pgsluice, and PgBouncer only when an
        experiment started it."""
        v = {"postgresql": self.pg.psql("SELECT version()"),
             "pg_settings": self.pg.psql(PG_SETTINGS_QUERY),
             "pgsluice": harness.run([self.pgsluice_bin, "--version"])[1].strip(),
             "pgsluice_binary": self.pgsluice_bin}
        if "pgbouncer" in self.poolers:
            v["pgbouncer"] = pgbouncer_version()
            v["pgbouncer_binary"] = PGBOUNCER
        return v

    def close(self) -> None:
        for p in self.poolers.values():
            try:
                p.stop(check=False)
            except Exception:  # noqa: BLE001  (cleanup must go on)
                pass
        self.pg.stop()


class ExternalStand(StandBase):
    """The compose stand (docker/compose.yaml): nothing is started or stopped here."""
    kind = "external"

    def __init__(self, pgsluice_bin: str | None = None, with_pgbouncer: bool = True):
        env = os.environ
        self.pg_host = env.get("WORKSHOP_PG_HOST", "postgres")
        self.pg_port = int(env.get("WORKSHOP_PG_PORT", "5432"))
        self.superuser_password = env.get("WORKSHOP_PG_SUPERUSER_PASSWORD", "postgres")
        self.targets: dict[str, Target] = {
            "direct": Target("direct", self.pg_host, self.pg_port, None, None, "direct")}
        self.addresses = {
            "pgsluice": env.get("WORKSHOP_PGSLUICE", "pgsluice:6432"),
            "pgsluice_noprep": env.get("WORKSHOP_PGSLUICE_NOPREP", "pgsluice-noprep:6433"),
            "pgbouncer": env.get("WORKSHOP_PGBOUNCER", "") if with_pgbouncer else "",
        }

    def superuser(self):
        import psycopg
        return psycopg.connect(host=self.pg_host, port=self.pg_port, user="postgres",
                               password=self.superuser_password, dbname=DB, autocommit=True)

    def pgbench_init(self, scale: int) -> None:
        harness.run(self.targets["direct"].pgbench_cmd(["-i", "-q", "-s", str(scale)]),
                    env=harness.clean_env(PGPASSWORD=PASSWORD), check=True, timeout=900)

    def _target(self, name: str, console: str, label: str) -> Target | None:
        if name not in self.targets:
            addr = self.addresses.get(name)
            if not addr:
                return None
            host, port = addr.rsplit(":", 1)
            pid = measure.pid_listening_on(int(port), "pgbouncer" if name == "pgbouncer"
                                           else "pgsluice")
            self.targets[name] = Target(name, host, int(port), pid, console, label)
        return self.targets[name]

    def pgsluice(self, max_prepared_statements: int = 200) -> Target:
        if max_prepared_statements:
            return self._target("pgsluice", "pgsluice", "pgsluice")
        return self._target("pgsluice_noprep", "pgsluice", "pgsluice (max_prepared_statements = 0)")

    def pgbouncer(self) -> Target | None:
        return self._target("pgbouncer", "pgbouncer", "PgBouncer")

    def pooler_log(self, name: str) -> str:
        return ""  # in the container's log (docker compose logs pgsluice)

    def versions(self) -> dict:
        """As LocalStand's, asked of the running containers: PostgreSQL over SQL, the poolers
        over their consoles (SHOW VERSION), since their binaries are in other containers."""
        with self.superuser() as c:
            v = {"postgresql": c.execute("SELECT version()").fetchone()[0],
                 "pg_settings": c.execute(PG_SETTINGS_QUERY).fetchone()[0],
                 "stand": "external (docker/compose.yaml)"}
        for name, target in (("pgsluice", self.pgsluice()), ("pgbouncer", self.pgbouncer())):
            if target is not None:
                v[name] = console_version(target)
        return v

    def close(self) -> None:
        pass


# --short's query_wait_timeout: breakage's temp table case at the defaults has B's CREATE TEMP
# TABLE wait for a pin while A's temp table holds the other server (README: `pin`), then refused
# with 0A000; at pgsluice's default of 120 s that wait was two thirds of CI's whole workshop run.
# The other experiments' waits are under a second (pool 20, at most 50 clients).
SHORT_QUERY_WAIT_TIMEOUT = 10


def make_stand(args):
    if args.stand == "external":
        return ExternalStand(with_pgbouncer=not args.no_pgbouncer)
    return LocalStand(args.pgsluice, with_pgbouncer=not args.no_pgbouncer,
                      query_wait_timeout=SHORT_QUERY_WAIT_TIMEOUT if args.short else None)


# --------------------------------------------------------------------------------------------
# pgbench


class Background:
    """A pgbench (or other client) running in the background, stopped by its PID."""

    def __init__(self, cmd: list[str], env: dict | None = None):
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True,
                                     env=env or harness.clean_env(PGPASSWORD=PASSWORD))
        self.out = self.err = ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.out, self.err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.out, self.err = self.proc.communicate()
        return self.proc.returncode


def idle_script(directory: str, scale: int, open_xid: bool = False) -> str:
    """Seed 002's idle.sql: one select, then sleep (the connection stays, idle; pgbench keeps
    \\sleep in int microseconds, so 600 s and not more). With open_xid,
    the session holds a transaction with an xid while it sleeps (the snapshot check)."""
    path = os.path.join(directory, "open_xid.sql" if open_xid else "idle.sql")
    with open(path, "w") as f:
        if open_xid:
            f.write("BEGIN;\nSELECT txid_current();\n\\sleep 600 s\n")
        else:
            f.write(f"\\set aid random(1, {100000 * scale})\n"
                    "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n\\sleep 600 s\n")
    os.chmod(path, 0o644)
    return path


def run_pgbench(target: Target, args: list[str], timeout: float, db: str = DB) -> dict:
    """A pgbench run in the foreground: parsed output, plus the machine's load around it."""
    busy0, total0 = measure.machine_cpu()
    load = measure.loadavg()
    t0 = time.monotonic()
    rc, out, err = harness.run(target.pgbench_cmd(args, db), timeout=timeout,
                               env=harness.clean_env(PGPASSWORD=PASSWORD))
    busy1, total1 = measure.machine_cpu()
    r = measure.parse_pgbench(out, err, rc)
    r["elapsed_s"] = round(time.monotonic() - t0, 2)
    r["machine_busy_pct"] = round(100.0 * (busy1 - busy0) / max(1, total1 - total0), 1)
    r["loadavg_before"] = load
    r["stderr_tail"] = err[-1500:]
    r["stdout_tail"] = out[-1500:]
    if r["status"] == "ok" and not r.get("tps"):
        # pgbench's -T clock includes the connection phase: 1,000 SCRAM logins on a busy
        # machine can take all of it.
        r["status"] = "failed"
        phase = (f"connection phase {r['connect_ms']:.0f} ms" if r.get("connect_ms")
                 else "its clients were still logging in when -T ended")
        r["errors"] = {f"{NO_TRANSACTIONS} ({phase})": 1}
    return r


NO_TRANSACTIONS = "no transactions within -T"


def temp_dir(prefix: str) -> str:
    d = tempfile.mkdtemp(prefix=prefix)
    os.chmod(d, 0o755)
    return d


def wait_until(pred, timeout: float, interval: float = 0.2):
    """Polls pred() until it returns a true value or the deadline passes; returns the last
    value."""
    return harness.wait_until(pred, timeout, interval)
