"""PgBouncer 1.25 settings that pgsluice once accepted with a warning and now implements as
PgBouncer defines them (their TLS ones are in test_tls.py): scram_iterations, disable_pqexec,
query_wait_notify, server_round_robin, log_stats,
track_extra_parameters, verbose, syslog (with
syslog_ident and syslog_facility), user."""

from __future__ import annotations

import base64
import os
import pwd
import re
import signal
import socket
import struct
import time

import pytest

import harness


def admin(pooler, command: str) -> str:
    rc, out, err = pooler.psql(command, db="pgsluice")
    assert rc == 0, err
    return out


def no_warning_for(pooler, key: str) -> bool:
    return f"key '{key}' is a PgBouncer setting" not in pooler.log()


def reload_with(pooler, **settings) -> None:
    """Rewrites main-section keys of the pooler's file and reloads it (SIGHUP)."""
    text = pooler.config_text
    for key, value in settings.items():
        text, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
        if n == 0:
            text = re.sub(r"^\[pgsluice\]$", f"[pgsluice]\n{key} = {value}", text, flags=re.M)
    pooler.config_text = text
    with open(pooler.config_path, "w") as f:
        f.write(text)
    before = pooler.log().count("SIGHUP: configuration reloaded")
    os.kill(pooler.proc.pid, signal.SIGHUP)
    assert harness.wait_until(
        lambda: pooler.log().count("SIGHUP: configuration reloaded") > before, 10), pooler.log()


def extended_query(c: harness.RawClient, sql: str) -> list[list[str | None]]:
    """Parse, Bind, Execute, Sync: the extended protocol's rows of `sql`."""
    c.send(b"P", b"\0" + sql.encode() + b"\0" + struct.pack("!h", 0))
    c.send(b"B", b"\0\0" + struct.pack("!hhh", 0, 0, 0))
    c.send(b"E", b"\0" + struct.pack("!i", 0))
    c.send(b"S")
    rows = []
    while True:
        kind, body = c.read_message()
        if kind == b"D":
            rows.append(harness.parse_data_row(body))
        elif kind == b"E":
            raise harness.PgError(c._fields(body))
        elif kind == b"Z":
            return rows


# --- scram_iterations ------------------------------------------------------------------------


def scram_iteration_count(pooler, user: str) -> int:
    """The i= of the server-first message pgsluice sends `user` (the exchange stops there)."""
    with socket.create_connection((harness.HOST, pooler.port), timeout=10) as s:
        body = struct.pack("!i", 196608) + b"user\0" + user.encode() + b"\0database\0app\0\0"
        s.sendall(struct.pack("!i", len(body) + 4) + body)
        f = s.makefile("rb")

        def message() -> tuple[bytes, bytes]:
            kind = f.read(1)
            (length,) = struct.unpack("!i", f.read(4))
            return kind, f.read(length - 4)

        kind, body = message()
        assert kind == b"R" and struct.unpack("!i", body[:4])[0] == 10, (kind, body)
        nonce = base64.b64encode(os.urandom(18)).decode()
        first = f"n,,n=,r={nonce}".encode()
        s.sendall(b"p" + struct.pack("!i", 4 + 14 + 4 + len(first)) + b"SCRAM-SHA-256\0" +
                  struct.pack("!i", len(first)) + first)
        kind, body = message()
        assert kind == b"R" and struct.unpack("!i", body[:4])[0] == 11, (kind, body)
        attrs = dict(item.split("=", 1) for item in body[4:].decode().split(","))
        return int(attrs["i"])


def test_scram_iterations(make_pooler):
    # A plain-text auth_file password under scram-sha-256: pgsluice makes its verifier, with
    # PgBouncer's default count, and the same count for a user it has no secret for.
    p = make_pooler(auth_type="scram-sha-256")
    assert scram_iteration_count(p, "app") == 4096
    assert scram_iteration_count(p, "nosuchuser") == 4096
    p.stop()

    p = make_pooler(auth_type="scram-sha-256", scram_iterations="1000", admin_users="app")
    assert no_warning_for(p, "scram_iterations"), p.log()
    assert scram_iteration_count(p, "app") == 1000
    assert scram_iteration_count(p, "nosuchuser") == 1000
    with p.raw() as c:  # the verifier made with that count logs the client in
        assert c.scalar("SELECT 6 * 7") == "42"
    # Online, as in PgBouncer: the next login uses the new count.
    admin(p, "SET scram_iterations = 2000")
    assert scram_iteration_count(p, "app") == 2000
    assert scram_iteration_count(p, "nosuchuser") == 2000
    with p.raw() as c:
        assert c.scalar("SELECT 1") == "1"


# --- disable_pqexec --------------------------------------------------------------------------


def assert_refused_simple_query(c: harness.RawClient) -> None:
    c.send_query("SELECT 1")
    kind, body = c.read_message()
    assert kind == b"E", (kind, body)
    fields = c._fields(body)
    assert (fields["S"], fields["C"], fields["M"]) == ("FATAL", "08P01", "PQexec disallowed")
    try:  # and the connection closes, as PgBouncer closes it
        kind, body = c.read_message()
        raise AssertionError(f"the connection stayed open: {kind!r} {body!r}")
    except (ConnectionError, OSError):
        pass


def test_disable_pqexec(make_pooler):
    p = make_pooler(disable_pqexec="1", admin_users="app")
    assert no_warning_for(p, "disable_pqexec"), p.log()
    with p.raw() as c:  # the extended protocol works, a Query after it closes the client
        assert extended_query(c, "SELECT 6 * 7") == [["42"]]
        assert_refused_simple_query(c)
    with p.raw() as c:  # a Query as the first message: refused before it gets a server
        assert_refused_simple_query(c)
    rc, _, err = p.psql("SELECT 1")
    assert rc != 0 and "PQexec disallowed" in err, err
    # The console too, as in PgBouncer: psql cannot use it then.
    rc, _, err = p.psql("SHOW VERSION", db="pgsluice")
    assert rc != 0 and "PQexec disallowed" in err, err
    assert 'client used "Query" packet type' in p.log()
    # Applied at startup only (PgBouncer's too): a RELOAD says so and changes nothing.
    reload_with(p, disable_pqexec="0")
    assert p.wait_for_log("disable_pqexec takes effect at the next start"), p.log()
    with p.raw() as c:
        assert_refused_simple_query(c)

    q = make_pooler()  # off by default
    rc, out, err = q.psql("SELECT 1")
    assert rc == 0 and out.strip() == "1", err


# --- query_wait_notify -----------------------------------------------------------------------

QUEUED = "No server connection available in postgres backend, client being queued"


def test_query_wait_notify(make_pooler):
    p = make_pooler(default_pool_size="1", query_wait_notify="1")
    assert no_warning_for(p, "query_wait_notify"), p.log()
    holder = p.connect()  # holds the pool's one server in its open transaction
    holder.execute("SELECT 1")
    with p.raw() as c:
        for round_ in range(2):  # once per wait
            started = time.monotonic()
            c.send_query("SELECT 2")
            kind, body = c.read_message()
            assert kind == b"N", (kind, body)
            assert time.monotonic() - started >= 1.0
            fields = c._fields(body)
            assert (fields["S"], fields["C"], fields["M"]) == ("NOTICE", "00000", QUEUED)
            time.sleep(1.5)  # no second notice in the same wait
            holder.rollback()
            rows, _, _ = c.read_result()
            assert rows == [["2"]]
            assert not c.notices, c.notices
            holder.execute("SELECT 1")
    holder.rollback()

    q = make_pooler(default_pool_size="1", query_wait_notify="0")
    holder = q.connect()
    holder.execute("SELECT 1")
    with q.raw() as c:
        c.send_query("SELECT 3")
        time.sleep(1.5)
        holder.rollback()
        rows, _, _ = c.read_result()
        assert rows == [["3"]] and not c.notices, c.notices
    holder.close()


# --- server_round_robin ----------------------------------------------------------------------


def backends_in_use(pooler, clients: int, queries: int) -> list[int]:
    """Opens `clients` servers at once (each held by a transaction), releases them, then runs
    `queries` single-statement transactions from one client: the backend PID of each."""
    holders = [pooler.connect() for _ in range(clients)]
    opened = {h.execute("SELECT pg_backend_pid()").fetchone()[0] for h in holders}
    assert len(opened) == clients
    for h in holders:
        h.rollback()
        h.close()
    with pooler.raw() as c:
        return [int(c.scalar("SELECT pg_backend_pid()")) for _ in range(queries)]


def test_server_round_robin(make_pooler):
    # One worker: the order of its idle servers is the whole story.
    p = make_pooler(workers="1", default_pool_size="3", admin_users="app",
                    server_round_robin="0")
    assert no_warning_for(p, "server_round_robin"), p.log()
    pids = backends_in_use(p, 3, 6)
    assert len(set(pids)) == 1, pids  # LIFO: the most recently used, every time
    admin(p, "SET server_round_robin = 1")  # online, as in PgBouncer
    pids = backends_in_use(p, 3, 6)
    assert len(set(pids)) == 3 and pids[:3] == pids[3:], pids  # each in turn


# --- log_stats -------------------------------------------------------------------------------

STATS_LINE = (r"stats: (\d+) xacts/s, (\d+) queries/s, \d+ client parses/s, \d+ server parses/s, "
              r"\d+ binds/s, \d+ client logins/s, in \d+ B/s, out \d+ B/s, xact \d+ us, "
              r"query \d+ us, wait \d+ us$")


def test_log_stats(make_pooler):
    # On by default, as in PgBouncer: a line every stats_period.
    p = make_pooler(stats_period="1", admin_users="app")
    with p.raw() as c:
        for _ in range(50):
            c.query("SELECT 1")
    busy = harness.wait_until(
        lambda: [m for m in re.findall(STATS_LINE, p.log(), re.M) if int(m[1]) > 0], 5)
    assert busy, p.log()
    admin(p, "SET log_stats = 0")  # online
    time.sleep(0.5)  # a tick that was running as SET came
    lines = len(re.findall(STATS_LINE, p.log(), re.M))
    time.sleep(2.5)
    assert len(re.findall(STATS_LINE, p.log(), re.M)) == lines, p.log()

    q = make_pooler(stats_period="1", log_stats="0")
    assert no_warning_for(q, "log_stats"), q.log()
    time.sleep(2.5)
    assert not re.search(STATS_LINE, q.log(), re.M), q.log()


# --- track_extra_parameters ------------------------------------------------------------------


def test_track_extra_parameters_is_what_pgsluice_does_anyway(make_pooler):
    # PgBouncer keeps IntervalStyle for each client only because it is listed there (its
    # default); pgsluice keeps it, and any other, listed or not.
    p = make_pooler(default_pool_size="1", track_extra_parameters="")
    assert no_warning_for(p, "track_extra_parameters"), p.log()
    iso = p.raw(params={"IntervalStyle": "iso_8601"})
    plain = p.raw()
    for _ in range(3):  # one server, taken in turn
        assert iso.scalar("SHOW IntervalStyle") == "iso_8601"
        assert plain.scalar("SHOW IntervalStyle") == "postgres"
    iso.query("SET IntervalStyle = sql_standard")
    assert plain.scalar("SHOW IntervalStyle") == "postgres"
    assert iso.scalar("SHOW IntervalStyle") == "sql_standard"
    iso.close()
    plain.close()


# --- verbose ---------------------------------------------------------------------------------


def log_lines_at(pooler, level: str, after: int = 0) -> list[str]:
    """The log's lines at `level` (debug, trace) from character `after` on."""
    return re.findall(rf"^\S+ \S+ \d+ {level} .*$", pooler.log()[after:], re.M)


def test_verbose(make_pooler):
    # Each count is a level more, as PgBouncer's -v: 1 debug (state changes), 2 trace (messages).
    p = make_pooler(verbose="1", admin_users="app")
    assert no_warning_for(p, "verbose"), p.log()
    with p.raw() as c:
        c.query("SELECT 1")
    assert log_lines_at(p, "debug"), p.log()
    assert not log_lines_at(p, "trace"), p.log()
    admin(p, "SET verbose = 2")  # online
    mark = len(p.log())
    with p.raw() as c:
        c.query("SELECT 1")
    assert log_lines_at(p, "trace", mark), p.log()[mark:]
    admin(p, "SET verbose = 0")
    mark = len(p.log())
    with p.raw() as c:
        c.query("SELECT 1")
    assert not log_lines_at(p, "debug", mark) and not log_lines_at(p, "trace", mark), p.log()

    # Set in the file, it replaces the command line's count (PgBouncer's order too).
    q = make_pooler(verbose="0", args=["-v"])
    with q.raw() as c:
        c.query("SELECT 1")
    assert not log_lines_at(q, "debug"), q.log()
    r = make_pooler(args=["-v"])  # unset: -v counts
    with r.raw() as c:
        c.query("SELECT 1")
    assert log_lines_at(r, "debug"), r.log()


# --- syslog, syslog_ident, syslog_facility ---------------------------------------------------

# pgsluice in a mount namespace of its own whose /dev is a tmpfs with the few devices a process
# needs and a `log` that is the test's datagram socket: syslog(3) writes to /dev/log, and the
# machine's /dev (where no syslog daemon listens) is left alone.
PRIVATE_DEV_WRAPPER = """#!/bin/sh
exec unshare --mount --propagation private /bin/sh -e -c '
  d="$1"; shift
  mount -t tmpfs tmpfs "$d/dev"
  cp -a /dev/null /dev/zero /dev/random /dev/urandom "$d/dev/"
  touch "$d/dev/log"
  mount --bind "$d/dev" /dev
  mount --bind "$d/log" /dev/log
  exec "$@"
' sh {dir} {binary} "$@"
"""

SYSLOG_LINE = re.compile(rb"^<(\d+)>\w{3} [ \d]\d \d\d:\d\d:\d\d (\S+)\[(\d+)\]: (.*)$", re.S)


def syslog_receiver(tmp_path):
    """A /dev/log for PRIVATE_DEV_WRAPPER: (wrapper path, socket); skips unless root."""
    if not harness.is_root():
        pytest.skip("needs root: a mount namespace with its own /dev/log")
    rc, _, err = harness.run(["unshare", "--mount", "--propagation", "private", "true"])
    if rc != 0:
        pytest.skip(f"cannot make a mount namespace here: {err}")
    os.mkdir(tmp_path / "dev")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "log"))
    sock.settimeout(0.2)
    wrapper = tmp_path / "pgsluice-private-dev"
    wrapper.write_text(PRIVATE_DEV_WRAPPER.format(dir=tmp_path, binary=harness.pgsluice_bin()))
    wrapper.chmod(0o755)
    return str(wrapper), sock


def syslog_lines(sock, seconds: float) -> list[tuple[int, str, int, str]]:
    """What arrives within `seconds`: (priority, ident, pid, message) each."""
    lines = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        m = SYSLOG_LINE.match(data)
        assert m, data
        lines.append((int(m[1]), m[2].decode(), int(m[3]), m[4].decode()))
    return lines


def test_syslog(make_pooler, tmp_path):
    wrapper, sock = syslog_receiver(tmp_path)
    # local3 (19 << 3): info 158, warning 156, debug 159.
    p = make_pooler(binary=wrapper, syslog="1", syslog_ident="pgsluice-test",
                    syslog_facility="local3", verbose="1", admin_users="app")
    assert no_warning_for(p, "syslog"), p.log()
    with p.raw() as c:
        c.query("SELECT 1")
    lines = syslog_lines(sock, 1.5)
    pid = p.proc.pid
    assert (158, "pgsluice-test", pid) in {(pr, i, n) for pr, i, n, _ in lines}, lines
    assert any(m.startswith("pgsluice ") and " started (" in m for _, _, _, m in lines), lines
    assert any(m.endswith("login ok") for _, _, _, m in lines), lines
    # The debug lines verbose = 1 adds go to the log, not to syslog (PgBouncer's too).
    assert " debug " in p.log()
    assert all(pr != 159 for pr, _, _, _ in lines), lines

    # RELOAD changes ident and facility (user: 1 << 3, info 14).
    reload_with(p, syslog_ident="renamed", syslog_facility="user")
    with p.raw() as c:
        c.query("SELECT 1")
    lines = syslog_lines(sock, 1.5)
    assert any(pr == 14 and i == "renamed" and m.endswith("login ok") for pr, i, _, m in lines), \
        lines
    # SET turns it off.
    admin(p, "SET syslog = 0")
    syslog_lines(sock, 0.5)
    with p.raw() as c:
        c.query("SELECT 1")
    assert syslog_lines(sock, 1.5) == []
    assert p.log().count("login ok") >= 4
    sock.close()


def test_syslog_settings_without_a_syslog(make_pooler):
    # No syslog daemon (this machine's case): lines are dropped, pgsluice runs on.
    p = make_pooler(syslog="1", syslog_facility="LOCAL0")
    rc, out, err = p.psql("SELECT 1")
    assert rc == 0 and out.strip() == "1", err
    # A facility PgBouncer does not know (it would take daemon instead) is an error.
    q = make_pooler(start=False, syslog_facility="local8")
    rc, out, err = harness.run([q.binary, q.config_path], timeout=30)
    assert rc == 1, (rc, out, err)
    assert ("syslog_facility: invalid value 'local8': expected auth, authpriv, daemon, user or "
            "local0 to local7") in err, err


# --- user ------------------------------------------------------------------------------------


def ids(pid: int, field: str) -> list[int]:
    """Uid: or Gid: of /proc/PID/status: real, effective, saved, filesystem."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_user(make_pooler):
    if not harness.is_root():
        pytest.skip("switching user needs pgsluice started as root")
    postgres = pwd.getpwnam("postgres")
    p = make_pooler(user="postgres")
    assert no_warning_for(p, "user"), p.log()
    # A query answered: the harness's readiness is a TCP connect, which the kernel completes as
    # soon as the port listens, before pgsluice drops root and starts accepting (main.cc); it
    # accepts only after the switch, so once a query is answered the ids must have changed.
    rc, out, err = p.psql("SELECT 1")
    assert rc == 0 and out.strip() == "1", err
    assert ids(p.proc.pid, "Uid") == [postgres.pw_uid] * 4
    assert ids(p.proc.pid, "Gid") == [postgres.pw_gid] * 4
    # Its files stay readable by that user: RELOAD works.
    reload_with(p, default_pool_size="7")
    assert p.wait_for_log("RELOAD: configuration .* applied"), p.log()

    # A user without an account: FATAL before anything is opened, status 1.
    q = make_pooler(start=False, user="nosuchuser")
    rc, out, err = harness.run([q.binary, q.config_path], timeout=30)
    assert rc == 1, (rc, out, err)
    assert "FATAL could not find user 'nosuchuser' to switch to" in err, err
