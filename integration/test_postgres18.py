"""PostgreSQL 18 and protocol 3.2 end to end, and direct TLS (PostgreSQL 17's
sslnegotiation=direct), against PostgreSQL 18.4 from npm (integration/postgres, installed by
scripts/install-deps) and Debian's PostgreSQL 15 side by side, whatever PG_BIN says:

- pgsluice logs in to PostgreSQL 18 with 3.2 and uses the server's 32-byte cancel key; a 3.0
  server answers NegotiateProtocolVersion and is spoken to in 3.0; server_max_protocol_version =
  3.0 keeps 3.0;
- libpq 18 (the npm package's libpq, driven through ctypes by libpq_probe.py) with
  max_protocol_version=latest gets 3.2 from pgsluice and can cancel, on a 3.2 and on a 3.0
  server; a 3.0 client cancels on a 3.2 server;
- a StartupMessage with a "grease" version (3.9999) and an unknown _pq_. option gets
  NegotiateProtocolVersion (3.2, the option named) and a working session;
- direct TLS from libpq 18 (ALPN "postgresql"); without ALPN, with another protocol's ALPN, after
  a plaintext byte, and with client TLS off, it is refused;
- direct TLS towards PostgreSQL 18 (server_tls_sslnegotiation = direct); PostgreSQL 15 cannot take
  it, so the login fails there, which shows the handshake really was direct.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import struct

import pytest

import harness

PG18_BIN = harness.npm_postgres_bin(18)
LIBPQ18 = harness.libpq18_dir()
PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libpq_probe.py")
PROTOCOL_32 = (3 << 16) | 2

pytestmark = pytest.mark.skipif(
    PG18_BIN is None or LIBPQ18 is None,
    reason="PostgreSQL 18 from npm is not installed (scripts/install-deps installs it into "
           "integration/postgres)")


@pytest.fixture(scope="module")
def pg():
    """PostgreSQL 18 with ssl = on: the cluster make_pooler's poolers front in this file."""
    cluster = harness.PostgresCluster(max_connections=200, ssl=True, bin_dir=PG18_BIN)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def pg15():
    cluster = harness.PostgresCluster(max_connections=100, ssl=True,
                                      bin_dir="/usr/lib/postgresql/15/bin")
    yield cluster
    cluster.stop()


@pytest.fixture
def pooler_on(request):
    """pooler_on(cluster, **settings): a pgsluice in front of `cluster`, stopped (and checked) at
    the end of the test."""
    poolers: list[harness.Pooler] = []

    def factory(cluster, **settings) -> harness.Pooler:
        p = harness.Pooler(cluster, **settings)
        poolers.append(p)
        return p

    yield factory
    for p in poolers:
        p.stop()


def client_tls(cluster, mode="require") -> dict:
    return {"client_tls_sslmode": mode, "client_tls_key_file": cluster.tls.server_key,
            "client_tls_cert_file": cluster.tls.server_cert}


def probe(pooler, mode: str, conninfo: str = "", sql: str = "SELECT 1") -> dict:
    """libpq_probe.py on libpq 18 through `pooler`; its JSON result."""
    dsn = (f"host={harness.HOST} port={pooler.port} dbname=app user=app password=app "
           f"connect_timeout=10 {conninfo}")
    args = ["/usr/bin/python3", PROBE, mode, dsn] + ([sql] if mode == "info" else [])
    rc, out, err = harness.run(args, env=harness.clean_env(LD_LIBRARY_PATH=LIBPQ18), timeout=60)
    assert rc == 0, f"libpq_probe {mode} failed: {err}\n{pooler.log()[-3000:]}"
    result = json.loads(out)
    assert result["lib"] >= 180000, result  # really libpq 18, not Debian's 15
    return result


def server_protocols(pooler) -> list[str]:
    """SHOW SERVERS' protocol column, for every server."""
    rc, out, err = pooler.psql("SHOW SERVERS", db="pgsluice",
                               args=["-P", "tuples_only=off", "-P", "footer=off"])
    assert rc == 0, err
    header, *lines = out.splitlines()
    at = header.split("|").index("protocol")
    return [line.split("|")[at] for line in lines]


def test_server_logins_speak_32_to_postgresql_18(pg, make_pooler):
    p = make_pooler(admin_users="app")
    rc, out, err = p.psql("SELECT current_setting('server_version_num')")
    assert rc == 0, err
    assert int(out) >= 180000, out
    assert p.wait_for_log(r"S-\d+ .*login ok, protocol 3\.2", 5), p.log()
    assert "protocol 3.0" not in p.log()
    assert server_protocols(p) == ["3.2"]  # and the console says so


def test_a_postgresql_15_server_negotiates_down_to_30(pg15, pooler_on):
    p = pooler_on(pg15, admin_users="app")
    rc, out, err = p.psql("SELECT 1")
    assert (rc, out.strip()) == (0, "1"), err
    assert p.wait_for_log(r"S-\d+ .*login ok, protocol 3\.0", 5), p.log()
    assert server_protocols(p) == ["3.0"]


def test_server_max_protocol_version_30_keeps_30(pg, make_pooler):
    p = make_pooler(server_max_protocol_version="3.0")
    rc, _, err = p.psql("SELECT 1")
    assert rc == 0, err
    assert p.wait_for_log(r"S-\d+ .*login ok, protocol 3\.0", 5), p.log()


def test_libpq18_client_gets_32_and_cancels(pg, make_pooler):
    p = make_pooler()
    got = probe(p, "info", "max_protocol_version=latest", "SELECT version()")
    assert got["protocol"] == 30002 and "PostgreSQL 18" in got["value"], got
    # The cancel key pgsluice gave the client is 32 bytes; the one it forwards is the server's.
    cancelled = probe(p, "cancel", "max_protocol_version=latest")
    assert cancelled["protocol"] == 30002, cancelled
    assert cancelled["sqlstate"] == "57014", cancelled
    assert cancelled["seconds"] < 10, cancelled


def test_a_30_client_cancels_on_a_32_server(pg, make_pooler):
    p = make_pooler()
    cancelled = probe(p, "cancel")
    assert cancelled["protocol"] == 30000, cancelled
    assert cancelled["sqlstate"] == "57014", cancelled


def test_a_32_client_cancels_on_a_30_server(pg15, pooler_on):
    p = pooler_on(pg15)
    cancelled = probe(p, "cancel", "max_protocol_version=latest")
    assert cancelled["protocol"] == 30002, cancelled
    assert cancelled["sqlstate"] == "57014", cancelled


def test_a_grease_version_is_negotiated(pg, make_pooler):
    p = make_pooler()
    c = harness.RawClient(harness.HOST, p.port, "app", "app", password="app",
                          version=(3 << 16) | 9999, params={"_pq_.grease_option": "on"})
    try:
        assert c.negotiation == (PROTOCOL_32, ["_pq_.grease_option"]), c.negotiation
        assert c.secret_key is not None and len(c.secret_key) == 32, c.secret_key
        assert c.query("SELECT 40 + 2") == [["42"]]
    finally:
        c.close()


# --- direct TLS from clients -----------------------------------------------------------------


def startup_message(user: str = "app", database: str = "app") -> bytes:
    body = struct.pack("!i", 196608) + f"user\0{user}\0database\0{database}\0\0".encode()
    return struct.pack("!i", len(body) + 4) + body


def direct_tls(port: int, alpn: list[str] | None, prefix: bytes = b"") -> ssl.SSLSocket:
    """A TLS connection opened without SSLRequest, after `prefix` sent in plaintext."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn is not None:
        ctx.set_alpn_protocols(alpn)
    sock = socket.create_connection((harness.HOST, port), timeout=10)
    if prefix:
        sock.sendall(prefix)
    try:
        return ctx.wrap_socket(sock)
    except BaseException:
        sock.close()
        raise


def first_message(sock) -> tuple[bytes, bytes]:
    header = b""
    while len(header) < 5:
        chunk = sock.recv(5 - len(header))
        if not chunk:
            raise ConnectionError("closed")
        header += chunk
    length = struct.unpack("!i", header[1:])[0]
    body = b""
    while len(body) < length - 4:
        chunk = sock.recv(length - 4 - len(body))
        if not chunk:
            raise ConnectionError("closed")
        body += chunk
    return header[:1], body


def test_direct_tls_from_libpq18(pg, make_pooler):
    p = make_pooler(**client_tls(pg))
    got = probe(p, "info", "sslnegotiation=direct sslmode=require max_protocol_version=latest",
                "SELECT 'direct'")
    assert got["ssl"] and got["alpn"] == "postgresql", got
    assert got["protocol"] == 30002 and got["value"] == "direct", got
    # verify-full with the CA: the same certificate checks as the SSLRequest path.
    got = probe(p, "info", f"sslnegotiation=direct sslmode=verify-full "
                           f"sslrootcert={pg.tls.ca_cert} host=localhost hostaddr=127.0.0.1")
    assert got["ssl"], got


def test_direct_tls_with_python_ssl_and_alpn_reaches_authentication(pg, make_pooler):
    p = make_pooler(**client_tls(pg))
    with direct_tls(p.port, ["postgresql"]) as s:
        assert s.selected_alpn_protocol() == "postgresql"
        s.sendall(startup_message())
        kind, body = first_message(s)
        assert kind == b"R" and struct.unpack("!i", body[:4])[0] == 10, (kind, body)  # SASL


def test_direct_tls_without_alpn_is_refused(pg, make_pooler):
    p = make_pooler(**client_tls(pg))
    with direct_tls(p.port, None) as s:
        kind, body = first_message(s)
        assert kind == b"E" and b"08P01" in body and b"ALPN" in body, (kind, body)
    assert p.wait_for_log("without ALPN", 5), p.log()


def test_direct_tls_with_another_protocols_alpn_fails_the_handshake(pg, make_pooler):
    p = make_pooler(**client_tls(pg))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        direct_tls(p.port, ["http/1.1"]).close()
    rc, _, err = p.psql("SELECT 1")  # the pooler goes on
    assert rc == 0, err


def test_a_plaintext_byte_before_a_direct_handshake_is_refused(pg, make_pooler):
    # CVE-2021-23214's lesson on this path: nothing sent in plaintext may be taken as part of a
    # TLS session. The byte makes the packet a plaintext startup packet of absurd length.
    p = make_pooler(**client_tls(pg))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with direct_tls(p.port, ["postgresql"], prefix=b"\x00") as s:
            s.sendall(startup_message())
            first_message(s)
    assert p.wait_for_log("invalid startup packet", 5), p.log()


def test_direct_tls_without_client_tls_is_closed_with_a_log_line(pg, make_pooler):
    p = make_pooler(client_tls_sslmode="disable")
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        direct_tls(p.port, ["postgresql"]).close()
    assert p.wait_for_log("direct TLS handshake, but TLS is not enabled", 5), p.log()


def test_direct_tls_on_the_unix_socket_is_closed_saying_so(pg, make_pooler):
    # Client TLS is on, but a Unix socket takes none (as PostgreSQL): the log says that, not that
    # client TLS is off.
    p = make_pooler(unix_socket_dir="{dir}", **client_tls(pg))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["postgresql"])
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(10)
    sock.connect(os.path.join(p.dir, f".s.PGSQL.{p.port}"))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        ctx.wrap_socket(sock).close()
    sock.close()
    assert p.wait_for_log("direct TLS handshake, but on a Unix socket", 5), p.log()


# --- direct TLS towards servers --------------------------------------------------------------


SSL_OF_BACKEND = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


def test_direct_tls_to_postgresql_18(pg, make_pooler):
    p = make_pooler(server_tls_sslmode="require", server_tls_sslnegotiation="direct")
    rc, out, err = p.psql(SSL_OF_BACKEND)
    assert (rc, out.strip()) == (0, "t"), err + p.log()[-2000:]


def test_direct_tls_to_postgresql_15_fails_its_login(pg15, pooler_on):
    # PostgreSQL 15 reads the ClientHello as a startup packet and closes: with direct there is no
    # fallback, so the client gets the login failure.
    p = pooler_on(pg15, server_tls_sslmode="require", server_tls_sslnegotiation="direct",
                  query_wait_timeout="5")
    rc, _, err = p.psql("SELECT 1", timeout=30)
    assert rc != 0, "a direct handshake cannot succeed with PostgreSQL 15"
    assert p.wait_for_log(r"S-\d+ .*login failed", 5), p.log()


def test_direct_tls_needs_an_sslmode_that_requires_tls(pg, make_pooler):
    p = make_pooler(server_tls_sslmode="prefer", server_tls_sslnegotiation="direct", start=False)
    rc, _, err = harness.run([p.binary, p.config_path], timeout=20)
    assert rc != 0
    assert "server_tls_sslnegotiation = direct needs server_tls_sslmode require" in err, err


# --- PostgreSQL 17/18 features a pooler meets ------------------------------------------------


def test_transaction_timeout_is_kept_like_other_settings(pg, make_pooler):
    # PostgreSQL 17's transaction_timeout, SET by a client: its own later transactions have it
    # on whichever server, another client never does (pgsluice's keep, the default).
    p = make_pooler(default_pool_size=2)
    with p.connect(autocommit=True) as a, p.connect(autocommit=True) as b:
        a.execute("SET transaction_timeout = '7s'")
        for _ in range(10):
            assert a.execute("SHOW transaction_timeout").fetchone()[0] == "7s"
            assert b.execute("SHOW transaction_timeout").fetchone()[0] == "0"


def test_search_path_reported_by_postgresql_18_stays_each_clients(pg, make_pooler):
    # PostgreSQL 18 reports search_path (ParameterStatus) like client_encoding: a client that sets
    # it is told, and a client that did not is never told another client's value, although the
    # two share servers.
    p = make_pooler(default_pool_size=1)
    with p.connect(autocommit=True) as a, p.connect(autocommit=True) as b:
        assert b.info.parameter_status("search_path") == '"$user", public'
        a.execute("SET search_path = pg_catalog, public")
        assert a.info.parameter_status("search_path") == "pg_catalog, public"
        for _ in range(5):
            assert b.execute("SHOW search_path").fetchone()[0] == '"$user", public'
            assert b.info.parameter_status("search_path") == '"$user", public'
            assert a.execute("SHOW search_path").fetchone()[0] == "pg_catalog, public"
        assert a.info.parameter_status("search_path") == "pg_catalog, public"


def test_md5_deprecation_warning_reaches_the_client(pg, make_pooler):
    # PostgreSQL 18 warns when an MD5 password is set; the WARNING is the client's to see.
    p = make_pooler(pool_mode="session")
    rc, _, err = p.psql("SET password_encryption = 'md5'; "
                        "ALTER ROLE app PASSWORD 'app'; RESET password_encryption; "
                        "ALTER ROLE app PASSWORD 'app'", user="app")
    assert rc == 0, err
    assert "WARNING:" in err and "MD5" in err, err
