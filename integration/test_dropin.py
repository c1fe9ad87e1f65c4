"""A PgBouncer user's files and habits, unchanged (issue 19): listen_addr with host names, `*` and
lists; a port in use stops pgsluice with FATAL and status 1 (also as a daemon and with a logfile);
the TCP options (tcp_keepalive, tcp_keepidle, tcp_keepintvl, tcp_keepcnt, tcp_user_timeout,
tcp_socket_buffer, tcp_defer_accept) read back from the kernel on the pooler's own sockets; the
Unix socket's mode and group; SUSPEND that ends when the console leaves; /metrics under
pgbouncer_exporter's names."""

from __future__ import annotations

import ctypes
import grp
import os
import re
import socket
import stat
import subprocess
import time
import urllib.request

import pytest

import harness

SYS_PIDFD_GETFD = 438
_libc = ctypes.CDLL(None, use_errno=True)


def run_foreground(pooler: harness.Pooler, args=(), timeout=15):
    """Runs pgsluice on the pooler's file in the foreground: (status, stderr, seconds)."""
    start = time.monotonic()
    r = subprocess.run([pooler.binary, *args, pooler.config_path], capture_output=True,
                       text=True, timeout=timeout, env=harness.clean_env())
    return r.returncode, r.stderr, time.monotonic() - start


def passive_addresses(name: str, port: int) -> set[str]:
    """What getaddrinfo(AI_PASSIVE) makes of a listen_addr entry, as the pooler's log prints it."""
    node = None if name == "*" else name
    out = set()
    for family, _, _, _, sa in socket.getaddrinfo(node, port, socket.AF_UNSPEC, socket.SOCK_STREAM,
                                                   socket.IPPROTO_TCP, socket.AI_PASSIVE):
        out.add(f"[{sa[0]}]:{port}" if family == socket.AF_INET6 else f"{sa[0]}:{port}")
    return out


def listening_on(pooler: harness.Pooler) -> set[str]:
    return set(re.findall(r"listening on (\S+:\d+)$", pooler.log(), re.M))


@pytest.mark.parametrize("listen_addr,names", [
    ("localhost", ["localhost"]),
    ("*", ["*"]),
    ("127.0.0.1, localhost , ::1", ["127.0.0.1", "localhost", "::1"]),
])
def test_listen_addr_names_star_and_lists(make_pooler, listen_addr, names):
    pooler = make_pooler(listen_addr=listen_addr)
    want = set().union(*(passive_addresses(n, pooler.port) for n in names))
    assert listening_on(pooler) == want, pooler.log()
    assert "not an IP address" not in pooler.log()
    for text in want:
        host = text.rsplit(":", 1)[0].strip("[]")
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        with pooler.raw() if host == harness.HOST else _raw_at(pooler, host) as c:
            assert c.scalar("SELECT 1") == "1"


def _raw_at(pooler: harness.Pooler, host: str) -> harness.RawClient:
    return harness.RawClient(host, pooler.port, "app", "app", password="app")


def _admin(pooler: harness.Pooler) -> harness.RawClient:
    return pooler.raw(db="pgsluice")


def test_listen_addr_name_that_does_not_resolve_is_fatal(pg):
    p = harness.Pooler(pg, start=False, listen_addr="no-such-host.invalid")
    try:
        rc, err, elapsed = run_foreground(p)
        assert rc == 1, err
        assert re.search(r"FATAL getaddrinfo\('no-such-host.invalid', '\d+'\)", err), err
        assert elapsed < 10
    finally:
        p._cleanup()


@pytest.fixture
def port_in_use():
    holder = socket.socket()
    holder.bind((harness.HOST, 0))
    holder.listen()
    yield holder.getsockname()[1]
    holder.close()


@pytest.mark.parametrize("extra", ["", "logfile", "unix_socket"])
def test_port_in_use_is_fatal(pg, tmp_path, port_in_use, extra):
    settings = {}
    if extra == "logfile":
        settings["logfile"] = str(tmp_path / "pgsluice.log")
    if extra == "unix_socket":  # the Unix socket would work: pgsluice carried on before
        settings["unix_socket_dir"] = str(tmp_path)
    p = harness.Pooler(pg, start=False, **settings)
    p.port = port_in_use
    with open(p.config_path, "w") as f:
        f.write(p._substitute(p._build_config(None, settings)))
    try:
        rc, err, _ = run_foreground(p)
        assert rc == 1, err
        assert re.search(rf"cannot listen on 127\.0\.0\.1:{port_in_use}: .*in use", err), err
        assert "FATAL failed to listen on any address in listen_addr list: 127.0.0.1" in err, err
        if extra == "logfile":
            assert "FATAL" in (tmp_path / "pgsluice.log").read_text()
        if extra == "unix_socket":
            assert not (tmp_path / f".s.PGSQL.{port_in_use}").exists()
    finally:
        p._cleanup()


def test_port_in_use_fails_the_daemon(pg, tmp_path, port_in_use):
    settings = {"logfile": str(tmp_path / "d.log"), "pidfile": str(tmp_path / "d.pid")}
    p = harness.Pooler(pg, start=False, **settings)
    p.port = port_in_use
    with open(p.config_path, "w") as f:
        f.write(p._substitute(p._build_config(None, settings)))
    try:
        rc, err, _ = run_foreground(p, ["-d"])
        assert rc == 1, err
        assert "FATAL failed to listen on any address" in err, err
        assert not (tmp_path / "d.pid").exists()
    finally:
        p._cleanup()


def test_a_running_pooler_keeps_its_unix_socket(make_pooler, pg, tmp_path):
    first = make_pooler(unix_socket_dir=str(tmp_path))
    second = harness.Pooler(pg, start=False, unix_socket_dir=str(tmp_path))
    second.port = first.port
    with open(second.config_path, "w") as f:
        f.write(second._substitute(second._build_config(None, {"unix_socket_dir": str(tmp_path)})))
    try:
        rc, err, _ = run_foreground(second)
        assert rc == 1 and "FATAL unix socket is in use" in err, err
    finally:
        second._cleanup()
    assert (tmp_path / f".s.PGSQL.{first.port}").exists()


def test_unix_socket_mode_and_group(make_pooler, tmp_path):
    group = grp.getgrnam("postgres")
    pooler = make_pooler(unix_socket_dir=str(tmp_path), unix_socket_mode="0660",
                         unix_socket_group="postgres")
    st = os.stat(tmp_path / f".s.PGSQL.{pooler.port}")
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o660, oct(st.st_mode)
    assert st.st_gid == group.gr_gid
    # The default is PgBouncer's 0777.
    other = make_pooler(unix_socket_dir=str(tmp_path))
    assert stat.S_IMODE(os.stat(tmp_path / f".s.PGSQL.{other.port}").st_mode) == 0o777


# --- the TCP options, read back from the pooler's own descriptors (pidfd_getfd) -----------------

def pooler_sockets(pid: int) -> list[socket.socket]:
    """Duplicates of every socket descriptor of process `pid` (close them after use)."""
    pidfd = os.pidfd_open(pid)
    out = []
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                    continue
            except FileNotFoundError:
                continue
            fd = _libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "pidfd_getfd")
            s = socket.socket(fileno=fd)
            if s.family in (socket.AF_INET, socket.AF_INET6):
                out.append(s)
            else:
                s.close()
    finally:
        os.close(pidfd)
    return out


def peer_port(s: socket.socket) -> int | None:
    try:
        return s.getpeername()[1]
    except OSError:
        return None


def tcp_options(s: socket.socket) -> dict[str, int]:
    g = s.getsockopt
    return {"keepalive": g(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "keepidle": g(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            "keepintvl": g(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            "keepcnt": g(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            "user_timeout": g(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
            "sndbuf": g(socket.SOL_SOCKET, socket.SO_SNDBUF),
            "rcvbuf": g(socket.SOL_SOCKET, socket.SO_RCVBUF)}


def client_and_server_options(pooler: harness.Pooler, pg) -> tuple[dict, dict, list[int]]:
    """Options of the pooler's socket to one live client, of one to PostgreSQL, and the
    listener's TCP_DEFER_ACCEPT values."""
    with pooler.raw() as c:
        assert c.scalar("SELECT 1") == "1"
        client_port = c.sock.getsockname()[1]
        socks = pooler_sockets(pooler.proc.pid)
        try:
            client = [s for s in socks if peer_port(s) == client_port]
            server = [s for s in socks if peer_port(s) == pg.port]
            listeners = [s for s in socks if peer_port(s) is None
                         and s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)]
            assert client and server and listeners, [s.getsockname() for s in socks]
            defer = [s.getsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT) for s in listeners]
            return tcp_options(client[0]), tcp_options(server[0]), defer
        finally:
            for s in socks:
                s.close()


def test_tcp_options_set_on_client_and_server_sockets(make_pooler, pg):
    pooler = make_pooler(tcp_keepidle=77, tcp_keepintvl=11, tcp_keepcnt=4,
                         tcp_user_timeout=12345, tcp_socket_buffer=65536, admin_users="app")
    client, server, defer = client_and_server_options(pooler, pg)
    for side in (client, server):
        assert side["keepalive"] == 1, side
        assert (side["keepidle"], side["keepintvl"], side["keepcnt"]) == (77, 11, 4), side
        assert side["user_timeout"] == 12345, side
        assert side["sndbuf"] == 2 * 65536 and side["rcvbuf"] == 2 * 65536, side  # Linux doubles
    assert all(d > 0 for d in defer), defer  # tcp_defer_accept's default: on
    # SET applies to the next connections, as PgBouncer's settings do.
    with _admin(pooler) as admin:
        admin.query("SET tcp_keepidle = 91")
    with pooler.raw() as c:
        assert c.scalar("SELECT 2") == "2"
    client, _, _ = client_and_server_options(pooler, pg)
    assert client["keepidle"] == 91, client


def test_tcp_keepalive_default_on_and_off(make_pooler, pg):
    # PgBouncer's defaults: keepalive on with the kernel's timers, no TCP_USER_TIMEOUT.
    client, server, _ = client_and_server_options(make_pooler(), pg)
    for side in (client, server):
        assert side["keepalive"] == 1 and side["user_timeout"] == 0, side
    client, server, defer = client_and_server_options(
        make_pooler(tcp_keepalive=0, tcp_defer_accept=0), pg)
    assert client["keepalive"] == 0 and server["keepalive"] == 0, (client, server)
    assert defer == [0] * len(defer), defer


def test_tcp_option_out_of_the_kernels_range_is_a_config_error(pg):
    p = harness.Pooler(pg, start=False, tcp_keepcnt=1000)
    try:
        rc, err, _ = run_foreground(p)
        assert rc == 1 and "tcp_keepcnt:" in err, err
    finally:
        p._cleanup()


# --- SUSPEND ends when no console is left --------------------------------------------------------

def test_suspend_resumes_when_the_console_leaves(make_pooler):
    pooler = make_pooler(admin_users="app")
    with pooler.raw() as c:
        assert c.scalar("SELECT 1") == "1"
    admin = _admin(pooler)
    other = _admin(pooler)
    admin.query("SUSPEND")
    # The port stays open while suspended (PgBouncer's way): this client waits for the RESUME.
    waiting = pooler.raw()
    waiting.send_query("SELECT 3")
    # Another console is still connected: still suspended, as in PgBouncer.
    admin.close()
    time.sleep(1)
    assert other.query("SHOW STATE")[2] == ["suspended", "yes"]
    other.close()
    assert pooler.wait_for_log(r"admin disappeared when suspended, doing RESUME", 5), pooler.log()
    assert waiting.read_result()[0] == [["3"]]
    waiting.close()
    with pooler.raw() as c:
        assert c.scalar("SELECT 2") == "2"


# --- /metrics under pgbouncer_exporter's names -----------------------------------------------

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')


def parse_exposition(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """name -> [(labels, value)]; checks each family is declared once, before its samples."""
    families: dict[str, list] = {}
    declared: list[str] = []
    current = None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            current = line.split()[2]
            assert current not in declared, f"{current} declared twice"
            declared.append(current)
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, line
        name, labels, value = m.groups()
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert current in (name, base), f"{name} outside its family ({current})"
        pairs = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels or ""))
        families.setdefault(name, []).append((pairs, float(value)))
    return families


def one(families, metric, /, **labels) -> float:
    hits = [v for ls, v in families.get(metric, []) if all(ls.get(k) == w for k, w in labels.items())]
    assert len(hits) == 1, (metric, labels, families.get(metric))
    return hits[0]


def test_metrics_under_pgbouncer_exporter_names(make_pooler):
    mport = harness.free_port()
    pooler = make_pooler(metrics_port=mport, admin_users="app", max_client_conn=321,
                         default_pool_size=3)
    held = pooler.raw(params={"application_name": "dash"})
    for _ in range(5):
        assert held.scalar("SELECT 1") == "1"
    with urllib.request.urlopen(f"http://{harness.HOST}:{mport}/metrics", timeout=10) as r:
        text = r.read().decode()
    f = parse_exposition(text)
    assert one(f, "pgbouncer_up") == 1
    assert one(f, "pgbouncer_config_max_client_connections") == 321
    assert one(f, "pgbouncer_version_info") == 1
    assert one(f, "pgbouncer_pools_client_active_connections", database="app", user="app") == 1
    assert one(f, "pgbouncer_pools_server_idle_connections", database="app", user="app") >= 1
    assert one(f, "pgbouncer_pools_client_maxwait_seconds", database="app", user="app") == 0
    pooled = one(f, "pgbouncer_stats_queries_pooled_total", database="app")
    assert pooled >= 5
    assert one(f, "pgbouncer_stats_totals_queries_pooled_total", database="app") == pooled
    assert one(f, "pgbouncer_stats_totals_server_in_transaction_seconds_total", database="app") > 0
    assert one(f, "pgbouncer_databases_pool_size", name="app", database="app", host="127.0.0.1",
               force_user="", pool_mode="") == 3
    assert one(f, "pgbouncer_databases_current_connections", name="app") >= 1
    assert one(f, "pgbouncer_pools") >= 1 and one(f, "pgbouncer_databases") >= 1
    # A logged-in client without a server is "idle" in SHOW CLIENTS, as in PgBouncer 1.25.
    assert one(f, "pgbouncer_client_connections", database="app", user="app",
               application_name="dash", state="idle") == 1
    assert one(f, "pgsluice_up") == 1  # pgsluice's own stay beside them
    held.close()


# --- pool_mode = statement ---------------------------------------------------------------------

STATEMENT_REFUSAL = "transaction blocks not allowed in statement pooling mode"


@pytest.mark.parametrize("where", ["main", "database", "user"])
def test_statement_pooling(make_pooler, pg, where):
    """Each statement's server goes back to the pool: with one server, two connected clients take
    turns on the same backend; a transaction block is refused as PgBouncer refuses it (FATAL
    08P01, the client closed), and the pooler serves the next client."""
    settings = {"default_pool_size": 1}
    databases = {"app": "host=127.0.0.1 port={pg_port} dbname=app"}
    config = None
    if where == "main":
        settings["pool_mode"] = "statement"
    elif where == "database":
        databases["app"] += " pool_mode=statement"
    pooler = make_pooler(databases=databases, **settings) if where != "user" else None
    if where == "user":
        p = harness.Pooler(pg, start=False, databases=databases, **settings)
        config = p._build_config(databases, settings).replace("[pgsluice]", "[users]\napp = pool_mode=statement\n\n"
                                       "[pgsluice]").replace(
            "[pgbouncer]", "[users]\napp = pool_mode=statement\n\n[pgbouncer]")
        p._cleanup()
        pooler = make_pooler(config)
    a, b = pooler.raw(), pooler.raw()
    try:
        pids = {a.scalar("SELECT pg_backend_pid()"), b.scalar("SELECT pg_backend_pid()"),
                a.scalar("SELECT pg_backend_pid()")}
        assert len(pids) == 1, pids  # one server, released after each statement
        assert a.query("SELECT 1; SELECT 2") == [["1"], ["2"]]  # one implicit transaction
        a.send_query("BEGIN")
        replies = []
        with pytest.raises((ConnectionError, OSError)):
            while True:  # BEGIN's CommandComplete, the FATAL, then the connection closes
                replies.append(a.read_message())
        errors = [a._fields(body) for kind, body in replies if kind == b"E"]
        assert errors and errors[0]["C"] == "08P01", replies
        assert errors[0]["M"] == STATEMENT_REFUSAL, errors
        assert b"Z" not in [kind for kind, _ in replies], replies
        assert b.scalar("SELECT 4") == "4"
        assert b.query("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND "
                       "state LIKE 'idle in transaction%'") == [["0"]]
    finally:
        a.close(abort=True)
        b.close()


def test_show_databases_names_load_balance_hosts_of_a_host_list(make_pooler):
    """As PgBouncer: SHOW DATABASES' load_balance_hosts for an entry of several hosts (NULL for
    one host), and the new value after RELOAD."""
    line = "host=127.0.0.1,localhost port={pg_port} dbname=app load_balance_hosts=disable"
    pooler = make_pooler(databases={"app": "host=127.0.0.1 port={pg_port} dbname=app",
                                    "pair": line}, admin_users="app")
    with pooler.connect(db="pgsluice", autocommit=True) as admin:
        def modes() -> dict:
            cur = admin.execute("SHOW DATABASES")
            col = [d.name for d in cur.description].index("load_balance_hosts")
            return {r[0]: r[col] for r in cur.fetchall()}
        assert modes()["app"] is None and modes()["pair"] == "disable"
        with open(pooler.config_path) as f:
            text = f.read()
        with open(pooler.config_path, "w") as f:
            f.write(text.replace("load_balance_hosts=disable", "load_balance_hosts=round-robin"))
        admin.execute("RELOAD")
        assert modes()["pair"] == "round-robin"


def test_a_failed_host_is_skipped_by_every_worker(make_pooler):
    """As PgBouncer, whose one pool remembers a host that failed: the first host of a
    load_balance_hosts=disable entry does not resolve; the client that found it out is served
    by the second host, and so is the next one, which lands on the other worker, without
    trying the first host again (within server_login_retry)."""
    line = ("host=unresolvable-hostname,127.0.0.1 port={pg_port} dbname=app "
            "load_balance_hosts=disable")
    pooler = make_pooler(databases={"badfirst": line}, workers=2, server_login_retry=30,
                         default_pool_size=4)
    first = pooler.connect(db="badfirst")
    first.execute("SELECT 1")  # in a transaction: the server stays with this client
    # Connections go to the workers in turn: the next client is the other worker's.
    with pooler.connect(db="badfirst", autocommit=True) as second:
        second.execute("SELECT 1")
    first.close()
    log = pooler.log()
    assert len(re.findall(r"closing because: server DNS lookup failed", log)) == 1, log
    assert len(re.findall(r"S-\d+ app@badfirst 127\.0\.0\.1:\d+ new connection to server",
                          log)) == 2, log
