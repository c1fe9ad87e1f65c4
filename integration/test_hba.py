"""auth_type = hba: the auth_hba_file (pg_hba.conf format, PgBouncer's subset) decides each
connection's method by its first matching line — allow and deny as written, PostgreSQL's messages
for a rejected or unmatched connection, hostssl/hostnossl, cert and clientcert, peer over the
Unix socket, @file lists, map= with auth_ident_file — and is re-read on SIGHUP (a broken file
keeps the old rules)."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import struct

import pytest

import harness


@pytest.fixture(scope="session")
def pg():
    cluster = harness.PostgresCluster(max_connections=100, ssl=True)
    yield cluster
    cluster.stop()


def hba_pooler(make_pooler, tmp_path, rules: str, files: dict[str, str] | None = None, **kw):
    hba = tmp_path / "pgsluice_hba.conf"
    hba.write_text(rules)
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    kw.setdefault("databases", {"app": "host=127.0.0.1 port={pg_port} dbname=app",
                                "other": "host=127.0.0.1 port={pg_port} dbname=app"})
    return make_pooler(auth_type="hba", auth_hba_file=str(hba), **kw), hba


def first_auth_request(port: int, user: str, db: str = "app") -> int | str:
    """The Authentication code the pooler asks with (0 ok, 3 cleartext, 5 MD5, 10 SASL), or the
    message of the ErrorResponse it answers with."""
    body = struct.pack("!i", 196608) + f"user\0{user}\0database\0{db}\0\0".encode()
    with socket.create_connection((harness.HOST, port), timeout=10) as s:
        s.sendall(struct.pack("!i", len(body) + 4) + body)
        data = b""
        while len(data) < 5 or len(data) < 1 + struct.unpack("!i", data[1:5])[0]:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    if data[:1] == b"R":
        return struct.unpack("!i", data[5:9])[0]
    fields = {p[:1]: p[1:] for p in data[5:].split(b"\0") if p}
    return fields.get(b"M", b"").decode()


def login_error(pooler, user, password, db="app") -> harness.PgError:
    with pytest.raises(harness.PgError) as info:
        pooler.raw(user=user, password=password, db=db).close()
    return info.value


RULES = """# TYPE  DATABASE  USER        ADDRESS        METHOD
host    all       md5user     127.0.0.1/32   reject
host    app       app         127.0.0.1/32   scram-sha-256
host    app       scramuser   127.0.0.1      255.255.255.255   md5
host    app       trustuser   127.0.0.1/32   trust
host    other     @users.txt  127.0.0.1/32   password
host    "app"     all         10.0.0.0/8     trust
"""


def test_rules_allow_and_deny_as_written(make_pooler, tmp_path):
    p, _ = hba_pooler(make_pooler, tmp_path, RULES, {"users.txt": "# listed users\napp\n"})
    # Each line's method is the one the client is asked for.
    assert first_auth_request(p.port, "app") == 10  # SASL (scram-sha-256)
    assert first_auth_request(p.port, "scramuser") == 5  # MD5
    assert first_auth_request(p.port, "app", db="other") == 3  # cleartext, via @users.txt
    assert first_auth_request(p.port, "trustuser") == 0  # trust: AuthenticationOk at once

    with p.raw(user="app", password="app") as c:
        assert c.scalar("SELECT current_user") == "app"
    with p.raw(user="scramuser", password="scrampass") as c:
        assert c.scalar("SELECT current_user") == "scramuser"
    with p.raw(user="app", password="app", db="other") as c:
        assert c.scalar("SELECT 1") == "1"
    with p.raw(user="trustuser", password=None) as c:
        assert c.scalar("SELECT current_user") == "trustuser"
    rc, out, err = p.psql("SELECT current_user", user="app", password="app")
    assert rc == 0, err
    assert out.strip() == "app"

    # A wrong password under an allowing line is a password failure.
    e = login_error(p, "app", "wrong")
    assert (e.sqlstate, e.message) == ("28P01", 'password authentication failed for user "app"')
    # A reject line, and no line at all: PostgreSQL's messages and SQLSTATE.
    e = login_error(p, "md5user", "md5pass")
    assert e.sqlstate == "28000" and e.severity == "FATAL"
    assert e.message == ('pg_hba.conf rejects connection for host "127.0.0.1", user "md5user", '
                         'database "app", no encryption')
    e = login_error(p, "scramuser", "scrampass", db="other")  # not in users.txt
    assert e.sqlstate == "28000"
    assert e.message == ('no pg_hba.conf entry for host "127.0.0.1", user "scramuser", '
                         'database "other", no encryption')
    rc, _, err = p.psql("SELECT 1", user="md5user", password="md5pass")
    assert rc != 0 and "pg_hba.conf rejects connection" in err, err
    # The admin console goes through the same rules.
    e = login_error(p, "app", "app", db="pgsluice")
    assert e.message.startswith("no pg_hba.conf entry for host")


def test_hostssl_hostnossl_cert_and_clientcert(pg, make_pooler, tmp_path):
    t = pg.tls
    rules = """hostnossl app  trustuser 127.0.0.1/32 trust
hostssl   app  app       127.0.0.1/32 cert
hostssl   app  scramuser 127.0.0.1/32 scram-sha-256 clientcert=verify-ca
hostnossl all  all       127.0.0.1/32 reject
"""
    p, _ = hba_pooler(make_pooler, tmp_path, rules, client_tls_sslmode="prefer",
                      client_tls_key_file=t.server_key, client_tls_cert_file=t.server_cert,
                      client_tls_ca_file=t.ca_cert)

    def psql(user, conninfo, password=None):
        dsn = (f"host={harness.HOST} port={p.port} dbname=app user={user} {conninfo}")
        return harness.run(["psql", "-X", "-At", "-c", "SELECT current_user", dsn],
                           env=p.client_env(password), timeout=60)

    cert = f"sslcert={t.client_cert} sslkey={t.client_key}"  # CN=app, signed by the CA
    rc, out, err = psql("app", f"sslmode=require {cert}")
    assert rc == 0, err
    assert out.strip() == "app"
    # cert without a certificate; and hostssl lines do not match plaintext.
    rc, _, err = psql("app", "sslmode=require")
    assert rc != 0 and 'certificate authentication failed for user "app"' in err, err
    rc, _, err = psql("app", "sslmode=disable")
    assert rc != 0
    assert ('pg_hba.conf rejects connection for host "127.0.0.1", user "app", database "app", '
            'no encryption') in err, err
    # hostnossl: trust over plaintext only; over TLS no line matches.
    rc, out, err = psql("trustuser", "sslmode=disable")
    assert rc == 0, err
    rc, _, err = psql("trustuser", "sslmode=require")
    assert rc != 0
    assert ('no pg_hba.conf entry for host "127.0.0.1", user "trustuser", database "app", '
            'SSL encryption') in err, err
    # clientcert=verify-ca: a verified certificate on top of the password.
    rc, out, err = psql("scramuser", f"sslmode=require {cert}", password="scrampass")
    assert rc == 0, err
    rc, _, err = psql("scramuser", "sslmode=require", password="scrampass")
    assert rc != 0 and "connection requires a valid client certificate" in err, err


def test_peer_over_the_unix_socket(make_pooler, tmp_path):
    me = pwd.getpwuid(os.getuid()).pw_name
    if me == "app":
        pytest.skip("the OS user is app")
    rules = "local all all peer\nhost all all 127.0.0.1/32 reject\n"
    # The pool logs in as app whatever the client user (peer proves the OS user only).
    p, _ = hba_pooler(make_pooler, tmp_path, rules, unix_socket_dir="{dir}",
                      databases={"app": "host=127.0.0.1 port={pg_port} dbname=app user=app "
                                        "password=app"})
    cmd = ["psql", "-X", "-At", "-h", p.dir, "-p", str(p.port), "-d", "app", "-c",
           "SELECT current_user"]
    rc, out, err = harness.run(cmd + ["-U", me], env=p.client_env(None))
    assert rc == 0, err
    assert out.strip() == "app"
    rc, _, err = harness.run(cmd + ["-U", "app"], env=p.client_env(None))
    assert rc != 0 and 'Peer authentication failed for user "app"' in err, err
    assert p.wait_for_log(r"Provided user name \(app\) and authenticated user name")


def test_sighup_rereads_the_rules_and_keeps_them_when_broken(make_pooler, tmp_path):
    p, hba = hba_pooler(make_pooler, tmp_path,
                        "host app app 127.0.0.1/32 scram-sha-256\n")
    keeper = p.connect(autocommit=True)
    with p.raw(user="app", password="app") as c:
        assert c.scalar("SELECT 1") == "1"

    hba.write_text("host app app 127.0.0.1/32 reject\n")
    os.kill(p.proc.pid, signal.SIGHUP)
    assert p.wait_for_log(r"SIGHUP: configuration reloaded", 10), p.log()
    e = login_error(p, "app", "app")
    assert e.message.startswith("pg_hba.conf rejects connection"), e.message
    # An open connection is not affected.
    assert keeper.execute("SELECT 2").fetchone()[0] == 2

    # A bad line: the whole file is refused, with its file and line, and the old rules stay.
    hba.write_text("host app app 127.0.0.1/32 trust\nhost app app example.com trust\n")
    os.kill(p.proc.pid, signal.SIGHUP)
    assert p.wait_for_log(r"SIGHUP: reload failed", 10), p.log()
    assert f'{hba}:2: invalid IP address "example.com"' in p.log()
    e = login_error(p, "app", "app")
    assert e.message.startswith("pg_hba.conf rejects connection"), e.message
    keeper.close()


def test_reload_takes_the_lines_pgbouncer_takes(make_pooler, tmp_path):
    """Lines PostgreSQL refuses and PgBouncer takes (its suite's hba_test.rules has each, and
    its test_hba_leak reloads them): the reload succeeds, they mean what PgBouncer makes of
    them, and each is logged as a warning."""
    p, hba = hba_pooler(make_pooler, tmp_path, "host all all 127.0.0.1/32 reject\n")
    assert login_error(p, "app", "app").message.startswith("pg_hba.conf rejects connection")
    hba.write_text('host  app  trustuser , app   127.0.0.1/32  trust\n'
                   'host  app  md5user           127.0.0.1/32  cert\n'
                   'host  "q1""q2"  "a , b"      127.0.0.1/32  cert\n'
                   'local all  all                             cert\n'
                   'host  all  all               127.0.0.1/32  reject\n')
    os.kill(p.proc.pid, signal.SIGHUP)
    assert p.wait_for_log(r"SIGHUP: configuration reloaded", 10), p.log()
    assert f"{hba}:2: cert on a host line (PostgreSQL allows it on hostssl only)" in p.log()
    assert f"{hba}:4: cert on a local line" in p.log()
    # Blanks around the comma: one list, trustuser and app.
    assert first_auth_request(p.port, "app") == 0
    assert first_auth_request(p.port, "trustuser") == 0
    # cert on a host line matches a connection without TLS, which it refuses.
    e = login_error(p, "md5user", "md5pass")
    assert e.sqlstate == "28000", e.fields
    assert e.message == 'certificate authentication failed for user "md5user"', e.message
    e = login_error(p, "scramuser", "scrampass")
    assert e.message.startswith("pg_hba.conf rejects connection"), e.message


def test_bad_file_stops_startup_with_file_and_line(make_pooler, tmp_path):
    hba = tmp_path / "hba.conf"
    hba.write_text("# ok\nhost all +admins 127.0.0.1/32 md5\n")
    p = harness.Pooler(None, auth_type="hba", auth_hba_file=str(hba), start=False)
    try:
        rc, out, err = harness.run([p.binary, p.config_path], timeout=30)
    finally:
        shutil.rmtree(p.dir, ignore_errors=True)
    assert rc == 1
    assert f"{hba}:2: \"+admins\": +group is not supported" in out + err, out + err
    # auth_type = hba without a file is a configuration error.
    p = harness.Pooler(None, auth_type="hba", start=False)
    try:
        rc, out, err = harness.run([p.binary, p.config_path], timeout=30)
    finally:
        shutil.rmtree(p.dir, ignore_errors=True)
    assert rc == 1 and "auth_type = hba needs auth_hba_file" in out + err, out + err


# --- map= and auth_ident_file ----------------------------------------------------------------


def test_cert_with_an_ident_map(pg, make_pooler, tmp_path):
    """map=: the certificate's CN (app) may log in as the users the map lists for it, and only
    as those (its own name included only when listed), as PgBouncer 1.25 and PostgreSQL."""
    t = pg.tls
    ident = tmp_path / "ident.conf"
    ident.write_text("# MAPNAME SYSTEM-USERNAME PG-USERNAME\n"
                     "certs  app  md5user\ncerts  \"app\"  scramuser\n")
    rules = "hostssl app all 127.0.0.1/32 cert map=certs\n"
    p, _ = hba_pooler(make_pooler, tmp_path, rules, auth_ident_file=str(ident),
                      client_tls_sslmode="require", client_tls_key_file=t.server_key,
                      client_tls_cert_file=t.server_cert, client_tls_ca_file=t.ca_cert)

    def psql(user):
        dsn = (f"host={harness.HOST} port={p.port} dbname=app user={user} sslmode=require "
               f"sslcert={t.client_cert} sslkey={t.client_key}")  # CN=app
        return harness.run(["psql", "-X", "-At", "-c", "SELECT current_user", dsn],
                           env=p.client_env(None), timeout=60)

    for user in ("md5user", "scramuser"):
        rc, out, err = psql(user)
        assert rc == 0, err
        assert out.strip() == user
    for user in ("trustuser", "app"):
        rc, _, err = psql(user)
        assert rc != 0 and f'certificate authentication failed for user "{user}"' in err, err
    assert p.log().count("ident map: certs does not have a match") == 2, p.log()


def test_peer_with_an_ident_map_and_reload(make_pooler, tmp_path):
    me = pwd.getpwuid(os.getuid()).pw_name
    if me in ("app", "md5user", "scramuser"):
        pytest.skip(f"the OS user is {me}")
    ident = tmp_path / "ident.conf"
    ident.write_text(f"os {me} app\nos {me} md5user\n")
    p, _ = hba_pooler(make_pooler, tmp_path, "local all all peer map=os\n",
                      auth_ident_file=str(ident), unix_socket_dir="{dir}")
    cmd = ["psql", "-X", "-At", "-h", p.dir, "-p", str(p.port), "-d", "app", "-c",
           "SELECT current_user"]

    def login(user):
        return harness.run(cmd + ["-U", user], env=p.client_env(None))

    for user in ("app", "md5user"):
        rc, out, err = login(user)
        assert rc == 0, err
        assert out.strip() == user
    rc, _, err = login("scramuser")
    assert rc != 0 and 'Peer authentication failed for user "scramuser"' in err, err
    assert p.wait_for_log(r"ident map os cannot be matched"), p.log()
    # RELOAD reads the maps again: `all` lets the OS user be anyone.
    ident.write_text(f"os {me} all\n")
    os.kill(p.proc.pid, signal.SIGHUP)
    assert p.wait_for_log(r"SIGHUP: configuration reloaded", 10), p.log()
    rc, out, err = login("scramuser")
    assert rc == 0 and out.strip() == "scramuser", err
    # A rule naming a map the file lacks: the reload fails and the old maps stay.
    ident.write_text(f"other {me} all\n")
    os.kill(p.proc.pid, signal.SIGHUP)
    assert p.wait_for_log(r"SIGHUP: reload failed", 10), p.log()
    assert 'pgsluice_hba.conf:1: ident map "os" is not in auth_ident_file' in p.log(), p.log()
    rc, out, err = login("scramuser")
    assert rc == 0 and out.strip() == "scramuser", err
