"""The pgsluice binary: command-line options, configuration errors and warnings, logging, and
stopping on signals."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

import harness

BASE = """\
;; written by test_config.py
[databases]
app = host=127.0.0.1 port={pg_port} dbname=app

[pgsluice]
listen_addr = 127.0.0.1
listen_port = {port}
auth_type = scram-sha-256
auth_file = {auth_file}
pool_mode = transaction
default_pool_size = 2
"""


def line_of(text: str, needle: str) -> int:
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in the config")


def run_binary(args, timeout=10):
    start = time.monotonic()
    rc, out, err = harness.run([harness.pgsluice_bin()] + args, timeout=timeout)
    return rc, out, err, time.monotonic() - start


def expect_refused(pg, config: str, key: str, needle: str):
    """Writes config (not started), runs pgsluice on it: exit 1, quickly, with
    "file:line: key: message" on stderr."""
    p = harness.Pooler(pg, config, start=False)
    try:
        rc, out, err, elapsed = run_binary([p.config_path])
        line = line_of(p.config_text, needle)
        assert rc == 1, (rc, out, err)
        assert elapsed < 5, elapsed
        assert f"{p.config_path}:{line}: {key}:" in err, err
        return err
    finally:
        p._cleanup()


@pytest.mark.parametrize("key,value", [
    ("default_pool_size", "banana"),
    ("auth_type", "kerberos-ish"),
    ("pool_mode", "sometimes"),
    ("listen_port", "not-a-port"),
    ("query_wait_timeout", "soonish"),
    ("max_client_conn", "12abc"),
])
def test_bad_value_refused(pg, key, value):
    config = BASE + f"{key} = {value}\nmax_packet_size = 100000\n"
    err = expect_refused(pg, config, key, f"{key} = {value}")
    assert value in err


def test_unknown_key_refused(pg):
    config = BASE + "max_packet_size = 100000\nfrobnicate_the_pool = 1\n"
    expect_refused(pg, config, "frobnicate_the_pool", "frobnicate_the_pool")


def test_several_errors_all_reported(pg):
    config = BASE + "default_pool_size = many\nfrobnicate_the_pool = 1\n"
    p = harness.Pooler(pg, config, start=False)
    try:
        rc, out, err, _ = run_binary([p.config_path])
        assert rc == 1
        assert f":{line_of(p.config_text, 'default_pool_size = many')}: default_pool_size:" in err
        assert f":{line_of(p.config_text, 'frobnicate')}: frobnicate_the_pool:" in err
    finally:
        p._cleanup()


def test_missing_config_file(tmp_path):
    path = str(tmp_path / "nonexistent.ini")
    rc, out, err, elapsed = run_binary([path])
    assert rc == 1, (rc, out, err)
    assert path in err
    assert elapsed < 5


def test_unimplemented_pgbouncer_keys_warn_and_start(pg, make_pooler):
    extra = {"pkt_buf": "4096", "dns_max_ttl": "15", "sbuf_loopcnt": "5",
             "suspend_timeout": "10"}
    # The main section under PgBouncer's name, as in an existing pgbouncer.ini.
    config = BASE.replace("[pgsluice]", "[pgbouncer]") + "".join(
        f"{k} = {v}\n" for k, v in extra.items())
    pooler = make_pooler(config)
    with pooler.connect(autocommit=True) as conn:
        assert conn.execute("SELECT 'started'").fetchone()[0] == "started"
    log = pooler.log()
    for key in extra:
        line = line_of(pooler.config_text, f"{key} =")
        matching = [ln for ln in log.splitlines() if key in ln]
        assert matching, f"no warning naming {key}:\n{log}"
        assert any(f"{pooler.config_path}:{line}" in ln for ln in matching), matching
        assert any(re.search(r"warn|not implement|ignored", ln, re.I) for ln in matching)


def test_version_and_help():
    for flag in ("--version", "-V"):
        rc, out, err, _ = run_binary([flag])
        assert rc == 0, (out, err)
        assert re.fullmatch(r"pgsluice \d+\.\d+\.\d+\S*", out.strip()), out
    for flag in ("--help", "-h"):
        rc, out, err, _ = run_binary([flag])
        assert rc == 0, (out, err)
        assert "pgsluice" in out + err and "--version" in out + err, out + err


# SIGINT exits at once when no client holds a server (an idle client is closed then); SIGTERM
# waits for clients to leave (PgBouncer >= 1.23, tested in test_ops_lifecycle.py); SIGQUIT stops
# at once.
@pytest.mark.parametrize("sig", [signal.SIGQUIT, signal.SIGINT])
def test_stops_cleanly_on_signal(pg, sig):
    p = harness.Pooler(pg, BASE)
    try:
        conn = p.connect(autocommit=True)  # an idle client is connected
        assert conn.execute("SELECT 1").fetchone()[0] == 1
        start = time.monotonic()
        assert p.stop(sig=sig) == 0  # stop() also fails on a sanitizer report
        assert time.monotonic() - start < 10
        conn.close()
    finally:
        p.stop(check=False)
    with pytest.raises(OSError):
        harness.socket.create_connection((harness.HOST, p.port), timeout=2).close()


def test_log_connections(pg, make_pooler):
    pooler = make_pooler(BASE + "log_connections = 1\nlog_disconnections = 1\n")
    with pooler.connect(autocommit=True) as conn:
        conn.execute("SELECT 1")
    assert pooler.wait_for_log(r"C-\d+ app@app 127\.0\.0\.1:\d+ login ok"), pooler.log()
    with pytest.raises(harness.PgError):
        pooler.raw(password="wrong").close()
    # A login failure is logged with the client's id and the reason.
    assert pooler.wait_for_log(r"(?i)C-\d+ app@app 127\.0\.0\.1:\d+ .*(password|auth)"), \
        pooler.log()


def test_logfile(pg, make_pooler, tmp_path):
    logfile = tmp_path / "pgsluice-file.log"
    pooler = make_pooler(BASE + f"logfile = {logfile}\n")
    with pooler.connect(autocommit=True) as conn:
        conn.execute("SELECT 1")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if logfile.exists() and re.search(r"app@app .*login ok", logfile.read_text()):
            break
        time.sleep(0.1)
    assert logfile.exists() and re.search(r"app@app .*login ok", logfile.read_text()), (
        logfile.read_text() if logfile.exists() else "no log file")
    # In the foreground the log goes to stderr as well, as PgBouncer's does (before, a logfile
    # took it all, startup errors included).
    assert re.search(r"app@app .*login ok", pooler.log()), pooler.log()


def test_quiet_keeps_stderr_silent_and_the_logfile_full(pg, make_pooler, tmp_path):
    # PgBouncer's -q: "do not log to stderr"; it does not change the level (before, pgsluice's -q
    # kept warnings only, in whichever place it logged to).
    logfile = tmp_path / "pgsluice-quiet.log"
    pooler = make_pooler(BASE + f"logfile = {logfile}\n", args=["-q"])
    with pooler.connect(autocommit=True) as conn:
        conn.execute("SELECT 1")
    assert harness.wait_until(lambda: logfile.exists() and
                              re.search(r"app@app .*login ok", logfile.read_text()), 5), \
        logfile.read_text() if logfile.exists() else "no log file"
    assert "login ok" not in pooler.log() and "started" not in pooler.log(), pooler.log()


def test_fallback_database(pg, make_pooler):
    """The `*` entry serves any database name from the same server."""
    config = BASE.replace("app = host=127.0.0.1 port={pg_port} dbname=app",
                          "* = host=127.0.0.1 port={pg_port}")
    pooler = make_pooler(config)
    for db in ("app", "postgres"):
        with pooler.connect(db=db, autocommit=True) as conn:
            assert conn.execute("SELECT current_database()").fetchone()[0] == db


def test_relative_paths_resolved_from_cwd(pg, tmp_path):
    """auth_file given relative to the current directory (as conf/quickstart.ini does)."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "users.txt").write_text(harness.userlist_text({"app": "app"}))
    p = harness.Pooler(pg, BASE.replace("auth_file = {auth_file}",
                                        "auth_file = conf/users.txt"), start=False)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        p.start()
    finally:
        os.chdir(cwd)
    try:
        with p.connect(autocommit=True) as conn:
            assert conn.execute("SELECT current_user").fetchone()[0] == "app"
    finally:
        p.stop()
