"""TLS on both sides of pgsluice, against a PostgreSQL started with ssl = on and certificates made
by the test with the openssl command line (harness.TlsFiles): client_tls_sslmode (psql with
sslmode=require and verify-full, plaintext refused, wrong root refused, client certificates and
auth_type = cert), server_tls_sslmode (pg_stat_ssl shows the pooler's backends encrypted, a wrong
CA refused, a server that declines TLS under require, bytes after the one-byte answer), SCRAM
channel binding (SCRAM-SHA-256-PLUS) on both sides, and pgbench over TLS."""

from __future__ import annotations

import re
import socket
import struct
import threading

import pytest

import harness
import test_send_ring


@pytest.fixture(scope="session")
def pg():
    cluster = harness.PostgresCluster(max_connections=200, ssl=True)
    yield cluster
    cluster.stop()


def client_tls(pg, mode="require", **extra) -> dict:
    """Settings for TLS towards clients with the cluster's server certificate."""
    settings = {"client_tls_sslmode": mode, "client_tls_key_file": pg.tls.server_key,
                "client_tls_cert_file": pg.tls.server_cert}
    settings.update(extra)
    return settings


def psql_conninfo(pooler, conninfo: str, sql: str, password: str | None = "app",
                  user: str = "app"):
    """psql with a full connection string (sslmode, sslrootcert, ...): (rc, stdout, stderr)."""
    dsn = f"host={harness.HOST} port={pooler.port} dbname=app user={user} {conninfo}"
    # On stdin: a long statement would pass the kernel's limit for one argument.
    return harness.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", dsn], input=sql + "\n",
                       env=pooler.client_env(password), timeout=60)


SSL_OF_BACKEND = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


# --- client side ---------------------------------------------------------------------------


def test_psql_require_and_verify_full(pg, make_pooler):
    p = make_pooler(**client_tls(pg))
    rc, out, err = psql_conninfo(p, "sslmode=require", "\\conninfo")
    assert rc == 0, err
    assert "SSL connection (protocol: TLSv1.3" in out, out
    rc, out, err = psql_conninfo(p, f"sslmode=verify-full sslrootcert={pg.tls.ca_cert}",
                                 "SELECT 40 + 2")
    assert rc == 0, err
    assert out.strip() == "42"
    # A large result and a large query through TLS records (several 16 KB records each way).
    big = "x" * 300_000
    rc, out, err = psql_conninfo(p, "sslmode=require",
                                 f"SELECT length('{big}'), repeat('y', 500000)")
    assert rc == 0, err
    length, ys = out.strip().split("|")
    assert length == "300000" and ys == "y" * 500000


def test_wrong_root_certificate_is_refused_by_the_client(pg, make_pooler):
    p = make_pooler(**client_tls(pg))
    rc, _, err = psql_conninfo(p, f"sslmode=verify-full sslrootcert={pg.tls.other_ca_cert}",
                               "SELECT 1")
    assert rc != 0
    assert "certificate verify failed" in err, err


def test_plaintext_refused_under_require(pg, make_pooler):
    p = make_pooler(**client_tls(pg))
    rc, _, err = psql_conninfo(p, "sslmode=disable", "SELECT 1")
    assert rc != 0
    assert "SSL required" in err, err
    with pytest.raises(harness.PgError) as info:
        p.raw().close()
    assert info.value.sqlstate == "28000"
    assert info.value.message == "SSL required"
    assert info.value.severity == "FATAL"


def test_prefer_takes_both(pg, make_pooler):
    p = make_pooler(**client_tls(pg, "prefer"))
    rc, out, err = psql_conninfo(p, "sslmode=disable", "\\conninfo")
    assert rc == 0, err
    assert "SSL connection" not in out
    rc, out, err = psql_conninfo(p, "sslmode=require", "\\conninfo")
    assert rc == 0, err
    assert "SSL connection" in out


def test_disable_declines_ssl_request(pg, make_pooler):
    p = make_pooler(client_tls_sslmode="disable")
    rc, _, err = psql_conninfo(p, "sslmode=require", "SELECT 1")
    assert rc != 0
    assert "server does not support SSL" in err, err
    with p.raw(ssl_request=True) as c:  # 'N', then plaintext
        assert c.ssl_response == b"N"
        assert c.scalar("SELECT 1") == "1"


def test_data_after_ssl_request_is_refused(pg, make_pooler):
    """CVE-2021-23214: a StartupMessage sent behind the SSLRequest, before the handshake, was not
    encrypted and must not be taken as if it had come over TLS."""
    p = make_pooler(**client_tls(pg))
    body = struct.pack("!i", 196608) + b"user\0app\0database\0app\0\0"
    startup = struct.pack("!i", len(body) + 4) + body
    with socket.create_connection((harness.HOST, p.port), timeout=10) as s:
        s.sendall(struct.pack("!ii", 8, 80877103) + startup)
        reply = s.recv(1000)
    assert reply[:1] == b"E", reply
    assert b"08P01" in reply and b"unexpected data after an encryption request" in reply


def test_client_certificates_and_cert_auth(pg, make_pooler):
    p = make_pooler(**client_tls(pg, "verify-ca", client_tls_ca_file=pg.tls.ca_cert),
                    auth_type="cert", server_tls_sslmode="require")
    good = f"sslmode=require sslcert={pg.tls.client_cert} sslkey={pg.tls.client_key}"
    rc, out, err = psql_conninfo(p, good, "SELECT current_user", password=None)
    assert rc == 0, err
    assert out.strip() == "app"
    # The certificate names app, not scramuser.
    rc, _, err = psql_conninfo(p, good, "SELECT 1", password=None, user="scramuser")
    assert rc != 0
    assert 'certificate authentication failed for user "scramuser"' in err, err
    # No certificate: verify-ca refuses the handshake.
    rc, _, err = psql_conninfo(p, "sslmode=require", "SELECT 1", password=None)
    assert rc != 0
    # CN=app, but signed by another CA.
    intruder = (f"sslmode=require sslcert={pg.tls.intruder_cert} "
                f"sslkey={pg.tls.intruder_key}")
    rc, _, err = psql_conninfo(p, intruder, "SELECT 1", password=None)
    assert rc != 0
    assert p.wait_for_log("certificate verify failed|unknown ca|certificate")


# --- server side ---------------------------------------------------------------------------


def test_server_tls_shown_by_pg_stat_ssl(pg, make_pooler):
    p = make_pooler(server_tls_sslmode="require", pool_mode="session")
    rc, out, err = p.psql(SSL_OF_BACKEND)
    assert rc == 0, err
    assert out.strip() == "t"
    # Seen from PostgreSQL itself: every backend of app@app (the pooler's) is encrypted.
    rows = pg.psql("SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
                   "WHERE a.usename = 'app' AND a.datname = 'app'")
    assert rows and set(rows.split()) == {"t"}, rows


def test_show_clients_and_servers_name_the_tls_of_each_connection(pg, make_pooler):
    # PgBouncer's form, protocol/cipher/key exchange: a TLS client and a TLS server show it;
    # the console session, asked for from inside the TLS session with sslmode=disable, shows
    # nothing.
    p = make_pooler(server_tls_sslmode="require", admin_users="app", pool_mode="session",
                    **client_tls(pg, "prefer"))
    env = p.client_env("app")
    dsn = f"host={harness.HOST} port={p.port} dbname=app user=app sslmode=require"
    inner = (f"psql -X -At -F '|' 'host={harness.HOST} port={p.port} dbname=pgsluice user=app "
             f"sslmode=disable' -c 'SHOW CLIENTS' -c 'SHOW SERVERS'")
    rc, out, err = harness.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", dsn],
                               input=f"SELECT 1;\n\\! {inner}\n", env=env, timeout=60)
    assert rc == 0, err
    tls = re.compile(r"^TLSv1\.[23]/[A-Z0-9_-]+"
                     r"(/ECDH=(X25519|X448|prime256v1|secp384r1|secp521r1))?$")
    clients = [line.split("|") for line in out.splitlines() if line.startswith("C|")]
    servers = [line.split("|") for line in out.splitlines() if line.startswith("S|")]
    app = [c for c in clients if c[2] == "app"]
    console = [c for c in clients if c[2] == "pgsluice"]
    assert len(app) == 1 and tls.match(app[0][17]), clients
    assert len(console) == 1 and console[0][17] == "", clients
    assert servers and all(tls.match(s[17]) for s in servers), servers


def test_a_tls_server_moves_between_workers_with_its_session(pg, make_pooler):
    # One server, clients on both workers in turn: the encrypted connection changes workers
    # with its TLS session (no new handshake, no new login), and keeps working on each.
    import psycopg
    p = make_pooler(server_tls_sslmode="require", default_pool_size=1, workers=2)
    pids = []
    for i in range(12):
        with psycopg.connect(p.dsn(), autocommit=True) as conn:
            pid, ssl = conn.execute(
                "SELECT pid, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
            assert ssl is True
            # More than a record's worth each way, so that the moved session really streams.
            text = conn.execute("SELECT repeat(%s, 50000)", (str(i),)).fetchone()[0]
            assert text == str(i) * 50000
            pids.append(pid)
    assert len(set(pids)) == 1, pids


def test_server_tls_disable_is_plaintext(pg, make_pooler):
    p = make_pooler(server_tls_sslmode="disable")
    rc, out, err = p.psql(SSL_OF_BACKEND)
    assert rc == 0, err
    assert out.strip() == "f"


def test_server_verify_full_and_wrong_ca(pg, make_pooler):
    ok = make_pooler(server_tls_sslmode="verify-full", server_tls_ca_file=pg.tls.ca_cert)
    rc, out, err = ok.psql(SSL_OF_BACKEND)
    assert rc == 0, err
    assert out.strip() == "t"
    # A handshake that fails is a connection that could not be made: as in PgBouncer the client
    # waits for the next attempt, and its wait ends (query_wait_timeout) with the reason.
    bad = make_pooler(server_tls_sslmode="verify-ca", server_tls_ca_file=pg.tls.other_ca_cert,
                      query_wait_timeout=2)
    rc, _, err = bad.psql("SELECT 1")
    assert rc != 0
    assert "query_wait_timeout (the last server login failed: " in err, err
    assert "certificate verify failed" in err, err
    # (A name the certificate does not carry is refused under verify-full: unit-tested in
    # tls_session_test.cc, as this host has no second name for 127.0.0.1.)


def test_changing_server_tls_settings_replaces_the_servers(pg, make_pooler):
    """SET (or RELOAD) of a server TLS setting: the servers that logged in under the old settings
    are replaced (PgBouncer closes them too: old, perhaps weaker settings would otherwise live on
    in the pool), and a login that failed under the old settings no longer holds the clients back
    for server_login_retry. A setting that leaves the servers' TLS alone closes nothing."""
    import psycopg
    p = make_pooler(server_tls_sslmode="disable", admin_users="app", server_login_retry=30,
                    query_wait_timeout=2)
    with psycopg.connect(p.dsn(db="pgsluice"), autocommit=True) as admin, \
            psycopg.connect(p.dsn(), autocommit=True) as c:
        pid, ssl = c.execute(SSL_OF_BACKEND.replace("ssl", "pid, ssl", 1)).fetchone()
        assert ssl is False
        admin.execute("SET server_tls_ca_file = %s" % repr(pg.tls.other_ca_cert))  # TLS still off
        admin.execute("SET query_timeout = 0")
        assert c.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
        admin.execute("SET server_tls_sslmode = 'require'")
        assert p.wait_for_log(r"S-\d+ app@app \S+ closing because: database configuration changed: "
                              r"server TLS settings"), p.log()[-2000:]
        new_pid, ssl = c.execute(SSL_OF_BACKEND.replace("ssl", "pid, ssl", 1)).fetchone()
        assert ssl is True and new_pid != pid
        # Now a CA that did not sign PostgreSQL's certificate: the next login fails.
        admin.execute("SET server_tls_sslmode = 'verify-ca'")
        with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
            c.execute("SELECT 1")
    # A client that comes within server_login_retry is refused with the cached error...
    with pytest.raises(psycopg.OperationalError, match="server login has been failing"):
        with psycopg.connect(p.dsn(), autocommit=True) as c:
            c.execute("SELECT 1")
    # ...until the settings change: the next login is tried at once, and succeeds.
    with psycopg.connect(p.dsn(db="pgsluice"), autocommit=True) as admin:
        admin.execute("SET server_tls_ca_file = %s" % repr(pg.tls.ca_cert))
    with psycopg.connect(p.dsn(), autocommit=True) as c:
        assert c.execute(SSL_OF_BACKEND).fetchone()[0] is True


def test_server_client_certificate(pg, make_pooler):
    """server_tls_key_file/cert_file: pgsluice presents a client certificate to PostgreSQL."""
    p = make_pooler(server_tls_sslmode="verify-full", server_tls_ca_file=pg.tls.ca_cert,
                    server_tls_cert_file=pg.tls.client_cert,
                    server_tls_key_file=pg.tls.client_key)
    rc, out, err = p.psql("SELECT client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
    assert rc == 0, err
    assert out.strip() == "/CN=app"


class FakeServer:
    """Accepts one connection, reads the SSLRequest, answers `answer`, then records what comes."""

    def __init__(self, answer: bytes):
        self.sock = socket.socket()
        self.sock.bind((harness.HOST, 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.answer = answer
        self.received = b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.sock.settimeout(20)
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            try:
                self.received = conn.recv(8)
                conn.sendall(self.answer)
                while True:
                    data = conn.recv(4096)
                    if not data:
                        break
                    self.received += data
            except OSError:
                pass

    def close(self):
        self.sock.close()
        self.thread.join(10)


SSL_REQUEST = struct.pack("!ii", 8, 80877103)


@pytest.mark.parametrize("mode", ["require", "verify-ca"])
def test_server_declining_tls_under_require_is_a_login_error(make_pooler, mode):
    fake = FakeServer(b"N")
    try:
        # No connection to be had under this mode: the client waits for the next attempt, and
        # its wait's end says why.
        p = make_pooler(databases={"app": f"host=127.0.0.1 port={fake.port} dbname=app"},
                        server_tls_sslmode=mode, query_wait_timeout=2)
        rc, _, err = p.psql("SELECT 1")
        assert rc != 0
        assert "query_wait_timeout" in err, err
        assert f"server does not support SSL, but server_tls_sslmode = {mode}" in err, err
    finally:
        fake.close()
    assert fake.received == SSL_REQUEST  # and nothing in plaintext after it


def test_server_declining_tls_under_prefer_goes_on_in_plaintext(make_pooler):
    fake = FakeServer(b"N")
    try:
        p = make_pooler(databases={"app": f"host=127.0.0.1 port={fake.port} dbname=app"},
                        server_tls_sslmode="prefer", server_connect_timeout="2",
                        query_wait_timeout="3")
        p.psql("SELECT 1", timeout=30)
    finally:
        fake.close()
    assert fake.received.startswith(SSL_REQUEST)
    assert b"user\0app\0database\0app\0" in fake.received[8:]


def test_server_bytes_after_ssl_answer_are_refused(make_pooler):
    """CVE-2021-23222: bytes behind the 'S' came before the handshake, unencrypted."""
    fake = FakeServer(b"S" + b"R\0\0\0\x08\0\0\0\0")  # 'S' and a forged AuthenticationOk
    try:
        p = make_pooler(databases={"app": f"host=127.0.0.1 port={fake.port} dbname=app"},
                        server_tls_sslmode="require")
        rc, _, err = p.psql("SELECT 1")
        assert rc != 0
        assert "unencrypted data after its answer to SSLRequest" in err, err
    finally:
        fake.close()


# --- channel binding -------------------------------------------------------------------------


def test_scram_channel_binding_both_sides(pg, make_pooler):
    p = make_pooler(**client_tls(pg), server_tls_sslmode="verify-full",
                    server_tls_ca_file=pg.tls.ca_cert, args=["-v"])
    rc, out, err = psql_conninfo(p, "sslmode=require channel_binding=require",
                                 SSL_OF_BACKEND)
    assert rc == 0, err
    assert out.strip() == "t"
    # Without channel binding asked for, SCRAM still works over TLS (libpq prefers -PLUS).
    rc, _, err = psql_conninfo(p, "sslmode=require channel_binding=disable", "SELECT 1")
    assert rc == 0, err
    # Towards PostgreSQL, pgsluice chose -PLUS too.
    assert p.wait_for_log("SCRAM-SHA-256-PLUS with channel binding")
    # Plaintext has nothing to bind to: libpq refuses rather than downgrade.
    plain = make_pooler(**client_tls(pg, "prefer"))
    rc, _, err = psql_conninfo(plain, "sslmode=disable channel_binding=require", "SELECT 1")
    assert rc != 0
    assert "channel binding" in err, err


def test_scram_pass_through_with_channel_binding(pg, make_pooler):
    """auth_file holds only app's verifier: the keys the client proves over -PLUS log the pool
    in to PostgreSQL, over -PLUS as well."""
    p = make_pooler(**client_tls(pg), users={"app": pg.scram_verifier("app")},
                    server_tls_sslmode="require")
    rc, out, err = psql_conninfo(p, "sslmode=require channel_binding=require", "SELECT 7")
    assert rc == 0, err
    assert out.strip() == "7"
    rc, _, err = psql_conninfo(p, "sslmode=require channel_binding=require", "SELECT 1",
                               password="wrong")
    assert rc != 0
    assert "password authentication failed" in err, err


# --- load -------------------------------------------------------------------------------------


def test_pgbench_over_tls(pgbench_data, make_pooler):
    p = make_pooler(**client_tls(pgbench_data), server_tls_sslmode="require",
                    pool_mode="transaction", default_pool_size="4")
    env = p.client_env("app")
    env["PGSSLMODE"] = "require"
    rc, out, err = harness.run(["pgbench", "-h", harness.HOST, "-p", str(p.port), "-U", "app",
                                "-c", "8", "-j", "2", "-T", "4", "-S", "app"],
                               env=env, timeout=120)
    assert rc == 0, out + err
    assert "number of failed transactions: 0" in out, out
    processed = int(out.split("number of transactions actually processed: ")[1].split()[0])
    assert processed > 100, out


@pytest.mark.skipif(not test_send_ring.kernel_allows_io_uring(),
                    reason="this kernel refuses io_uring")
def test_tls_sends_go_through_the_ring(pgbench_data, make_pooler):
    """TLS on both sides: the ciphertext of a turn's sends goes in the worker's io_uring
    submission as plaintext does (encrypted before it), counted by the ring's own SqHead."""
    p = make_pooler(**client_tls(pgbench_data), server_tls_sslmode="require", workers="1",
                    pool_mode="transaction", default_pool_size="4")
    assert p.wait_for_log(r"a loop turn's sends: one io_uring submission"), p.log()
    env = p.client_env("app")
    env["PGSSLMODE"] = "require"
    before = test_send_ring.rings_of(p.proc.pid)
    rc, out, err = harness.run(["pgbench", "-h", harness.HOST, "-p", str(p.port), "-U", "app",
                                "-n", "-c", "8", "-j", "2", "-t", "250", "-S", "app"],
                               env=env, timeout=120)
    assert rc == 0, out + err
    assert "number of transactions actually processed: 2000/2000" in out, out
    after = test_send_ring.rings_of(p.proc.pid)
    assert len(after) == 1, after
    # Each transaction's query to its server and reply to its client (both TLS) are ring sends.
    assert sum(after[fd] - before.get(fd, 0) for fd in after) >= 2000, (before, after)
    # The servers were TLS too, as PostgreSQL sees them.
    rows = pgbench_data.psql("SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a "
                             "USING (pid) WHERE a.usename = 'app' AND a.datname = 'app'")
    assert rows and set(rows.split()) == {"t"}, rows


# --- certificate reload ------------------------------------------------------------------------


def served_certificate(port: int) -> bytes:
    """The DER certificate pgsluice presents after an SSLRequest (not verified: only looked at)."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((harness.HOST, port), timeout=10) as s:
        s.sendall(SSL_REQUEST)
        assert s.recv(1) == b"S"
        with ctx.wrap_socket(s) as tls:
            return tls.getpeercert(binary_form=True)


def der_of(pem_path: str) -> bytes:
    import ssl
    with open(pem_path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def test_sighup_reloads_certificate_files(pg, make_pooler, tmp_path):
    import os
    import shutil
    import signal
    t = pg.tls
    cert, key = str(tmp_path / "pooler.crt"), str(tmp_path / "pooler.key")
    shutil.copy(t.server_cert, cert)
    shutil.copy(t.server_key, key)
    p = make_pooler(**client_tls(pg, client_tls_cert_file=cert, client_tls_key_file=key))
    assert served_certificate(p.port) == der_of(t.server_cert)
    keeper = p.connect(autocommit=True, sslmode="require")

    # A renewed certificate (another key, CN and serial) under the same file names.
    renewed, renewed_key = str(tmp_path / "renewed.crt"), str(tmp_path / "renewed.key")
    t._make_leaf(renewed, renewed_key, "renewed.localhost", t.ca_cert, t.ca_key,
                 "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    shutil.copy(renewed, cert)
    shutil.copy(renewed_key, key)
    os.kill(p.proc.pid, signal.SIGHUP)
    assert p.wait_for_log(r"SIGHUP: configuration reloaded", 10), p.log()
    assert served_certificate(p.port) == der_of(renewed)
    rc, out, err = harness.run(["openssl", "x509", "-noout", "-subject", "-in", cert])
    assert "renewed.localhost" in out
    rc, out, err = psql_conninfo(p, f"sslmode=verify-full sslrootcert={t.ca_cert}", "SELECT 1")
    assert rc == 0, err
    # The connection made before the reload keeps its session.
    assert keeper.execute("SELECT 5").fetchone()[0] == 5

    # A broken file: the error is logged and the certificate in use stays.
    with open(cert, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    os.kill(p.proc.pid, signal.SIGHUP)
    assert p.wait_for_log(r"RELOAD: client_tls_cert_file: cannot load", 10), p.log()
    assert served_certificate(p.port) == der_of(renewed)
    rc, out, err = psql_conninfo(p, "sslmode=require", "SELECT 1")
    assert rc == 0, err
    keeper.close()


# --- cipher suites and key exchange (PgBouncer's *_tls13_ciphers, client_tls_ecdhcurve,
# client_tls_dheparams) -------------------------------------------------------------------------


def negotiated(port: int, configure=None) -> tuple[str, str]:
    """(protocol, cipher) of a handshake after an SSLRequest, the client context set up by
    `configure`; ssl.SSLError when there is no common ground."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if configure is not None:
        configure(ctx)
    with socket.create_connection((harness.HOST, port), timeout=10) as s:
        s.sendall(SSL_REQUEST)
        assert s.recv(1) == b"S"
        with ctx.wrap_socket(s) as tls:
            return tls.version(), tls.cipher()[0]


def start_fails(make_pooler, **settings) -> str:
    """Starts pgsluice with `settings` expecting it to refuse them: its stderr."""
    p = make_pooler(start=False, **settings)
    rc, out, err = harness.run([p.binary, p.config_path], timeout=30)
    assert rc == 1, (rc, out, err)
    return out + err


def test_client_tls13_ciphers(pg, make_pooler):
    import ssl
    p = make_pooler(**client_tls(pg))  # empty: OpenSSL's suites, the server's order
    assert negotiated(p.port) == ("TLSv1.3", "TLS_AES_256_GCM_SHA384")
    p = make_pooler(**client_tls(pg, client_tls13_ciphers="TLS_CHACHA20_POLY1305_SHA256"))
    assert "is a PgBouncer setting" not in p.log(), p.log()
    assert negotiated(p.port) == ("TLSv1.3", "TLS_CHACHA20_POLY1305_SHA256")
    rc, out, err = psql_conninfo(p, "sslmode=require", "SELECT 1")
    assert rc == 0 and out.strip() == "1", err
    # PgBouncer's log_connections line names the protocol and suite (its suite greps it).
    assert harness.wait_until(lambda: re.search(
        r"login attempt: db=app user=app tls=TLSv1\.3/TLS_CHACHA20_POLY1305_SHA256/ECDH=\S+ "
        r"replication=no", p.log()), 5), p.log()
    # A suite the client does not offer (Python's default offers no CCM): no handshake.
    p = make_pooler(**client_tls(pg, client_tls13_ciphers="TLS_AES_128_CCM_SHA256"))
    with pytest.raises(ssl.SSLError):
        negotiated(p.port)
    # TLS 1.2 is not concerned: client_tls_ciphers still rules it.
    assert negotiated(p.port, lambda c: setattr(c, "maximum_version", ssl.TLSVersion.TLSv1_2))[0] \
        == "TLSv1.2"
    err = start_fails(make_pooler, **client_tls(pg, client_tls13_ciphers="TLS_BOGUS"))
    # PgBouncer's words (its suite greps them after a console SET; the SET goes the same way).
    assert 'client_tls13_ciphers: failed to set the TLSv1.3 cipher suites "TLS_BOGUS"' in err, err


def test_server_tls13_ciphers(pg, make_pooler):
    cipher = "SELECT cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
    p = make_pooler(server_tls_sslmode="require")
    rc, out, err = p.psql(cipher)
    assert rc == 0 and out.strip() == "TLS_AES_256_GCM_SHA384", (out, err)
    p = make_pooler(server_tls_sslmode="require",
                    server_tls13_ciphers="TLS_CHACHA20_POLY1305_SHA256")
    rc, out, err = p.psql(cipher)
    assert rc == 0 and out.strip() == "TLS_CHACHA20_POLY1305_SHA256", (out, err)


def test_client_tls_ecdhcurve(pg, make_pooler):
    import ssl
    p256 = lambda c: c.set_ecdh_curve("prime256v1")  # noqa: E731 - the client offers P-256 only
    p384 = lambda c: c.set_ecdh_curve("secp384r1")  # noqa: E731
    p = make_pooler(**client_tls(pg))  # auto: OpenSSL's groups, P-256 among them
    assert negotiated(p.port, p256)[0] == "TLSv1.3"
    p = make_pooler(**client_tls(pg, client_tls_ecdhcurve="secp384r1"))
    assert "is a PgBouncer setting" not in p.log(), p.log()
    assert negotiated(p.port, p384)[0] == "TLSv1.3"
    with pytest.raises(ssl.SSLError):  # the only curve allowed is not offered
        negotiated(p.port, p256)
    rc, out, err = psql_conninfo(p, "sslmode=require", "SELECT 1")
    assert rc == 0 and out.strip() == "1", err
    err = start_fails(make_pooler, **client_tls(pg, client_tls_ecdhcurve="nosuchcurve"))
    assert 'client_tls_ecdhcurve: unknown curve "nosuchcurve"' in err, err


def test_client_tls_dheparams(pg, make_pooler):
    import ssl

    def dhe_only(c):  # a TLS 1.2 client that knows no other key exchange than DHE
        c.maximum_version = ssl.TLSVersion.TLSv1_2
        c.set_ciphers("DHE-RSA-AES256-GCM-SHA384")

    p = make_pooler(**client_tls(pg))  # auto, PgBouncer's default
    assert negotiated(p.port, dhe_only) == ("TLSv1.2", "DHE-RSA-AES256-GCM-SHA384")
    p = make_pooler(**client_tls(pg, client_tls_dheparams="none"))
    assert "is a PgBouncer setting" not in p.log(), p.log()
    with pytest.raises(ssl.SSLError):
        negotiated(p.port, dhe_only)
    assert negotiated(p.port)[0] == "TLSv1.3"  # ECDHE is not concerned
    err = start_fails(make_pooler, **client_tls(pg, client_tls_dheparams="legacy"))
    assert "client_tls_dheparams: legacy (1024-bit DH) is refused" in err, err


# --- SET ---------------------------------------------------------------------------------------


def test_set_changes_tls_on_both_sides_online(pg, make_pooler):
    """PgBouncer's SET changes the TLS settings of a running pooler (its own tests switch TLS on,
    off and to another certificate so): the contexts are built anew for new connections. A value
    that cannot take effect yet (a key set before its certificate) is kept, with a NOTICE, and
    the contexts in use stay until the pair matches."""
    t = pg.tls
    p = make_pooler(admin_users="app", server_tls_sslmode="disable", pool_mode="session")
    admin = p.connect(db="pgsluice", autocommit=True)
    notices: list[str] = []
    admin.add_notice_handler(lambda d: notices.append(d.message_primary))

    def set_(key: str, value: str) -> None:
        notices.clear()
        admin.execute(f"SET {key} = '{value}'")

    set_("client_tls_key_file", t.server_key)
    set_("client_tls_cert_file", t.server_cert)
    set_("client_tls_sslmode", "require")
    assert served_certificate(p.port) == der_of(t.server_cert)
    rc, _, err = psql_conninfo(p, "sslmode=disable", "SELECT 1")
    assert rc != 0 and "SSL required" in err, err

    # Another certificate, its key first: the pair does not match until the certificate follows.
    set_("client_tls_key_file", t.other_server_key)
    assert notices and notices[0].startswith("TLS settings could not be applied"), notices
    assert served_certificate(p.port) == der_of(t.server_cert)
    set_("client_tls_cert_file", t.other_server_cert)
    assert not notices, notices
    assert served_certificate(p.port) == der_of(t.other_server_cert)
    rc, _, err = psql_conninfo(p, f"sslmode=verify-full sslrootcert={t.other_ca_cert}", "SELECT 1")
    assert rc == 0, err

    set_("client_tls_sslmode", "disable")
    rc, out, err = psql_conninfo(p, "sslmode=disable", SSL_OF_BACKEND)
    assert rc == 0 and out.strip() == "f", err

    # Towards the server: new server connections use TLS once SET says so (RECONNECT closes the
    # plaintext one).
    set_("server_tls_sslmode", "require")
    admin.execute("RECONNECT")
    rc, out, err = psql_conninfo(p, "sslmode=disable", SSL_OF_BACKEND)
    assert rc == 0 and out.strip() == "t", err
    admin.close()
