"""No client can act as another through pgsluice.

- Cancel keys: the BackendKeyData a client gets is pgsluice's own (never the backend's pid or key),
  drawn from OpenSSL's CSPRNG, distinct across connections and without a visible pattern.
- A CancelRequest with a wrong key (right pid and wrong secret, another client's secret, a random
  pid, a truncated or extended key) does nothing: the query it aimed at completes normally; only
  the right key cancels (57014), and only its own client's query.
- session_state_action = reset: nothing of client A's SET, set_config, LISTEN, temp table, advisory
  lock, SET ROLE, PREPARE or WITH HOLD cursor is visible to client B on the same server.
- The admin console refuses users outside admin_users/stats_users; stats users cannot control.
- Secrets never reach the log, even at verbose_level = trace with log_connections on: passwords
  (right and wrong), MD5 hashes and responses, SCRAM verifier parts, keys and client proofs, for
  plain, md5 and scram-sha-256 clients and cleartext, md5 and SCRAM (pass-through too) servers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import socket
import struct
import time

import pytest

import harness

CANCEL_REQUEST_CODE = 80877102
PROTOCOL_32 = (3 << 16) | 2
SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class RecordingClient(harness.RawClient):
    """RawClient that keeps the messages of the login (to read the raw BackendKeyData and the
    authentication exchange) and can ask for protocol 3.2."""

    def __init__(self, *args, protocol_32: bool = False, **kwargs):
        self.sent: list[tuple[bytes, bytes]] = []
        self.received: list[tuple[bytes, bytes]] = []
        self._recording = True
        self._protocol_32 = protocol_32
        self._startup_sent = False
        super().__init__(*args, **kwargs)
        self._recording = False

    def sendall(self, data: bytes) -> None:
        if not self._startup_sent:
            self._startup_sent = True
            if self._protocol_32:
                data = data[:4] + struct.pack("!i", PROTOCOL_32) + data[8:]
        super().sendall(data)

    def send(self, kind: bytes, body: bytes = b"") -> None:
        if self._recording:
            self.sent.append((kind, body))
        super().send(kind, body)

    def read_message(self) -> tuple[bytes, bytes]:
        kind, body = super().read_message()
        if self._recording:
            self.received.append((kind, body))
        return kind, body

    @property
    def cancel_pid(self) -> int:
        return self.backend_key[0]

    @property
    def cancel_key(self) -> bytes:
        return next(body[4:] for kind, body in self.received if kind == b"K")

    def auth_codes(self) -> list[int]:
        return [struct.unpack("!i", body[:4])[0] for kind, body in self.received if kind == b"R"]


def raw(pooler: harness.Pooler, user: str = "app", password: str | None = "app",
        db: str = "app", **kwargs) -> RecordingClient:
    return RecordingClient(harness.HOST, pooler.port, user, db, password, **kwargs)


def send_cancel(port: int, pid: int, key: bytes) -> bytes:
    """A CancelRequest on its own connection; returns what came back before the close (the
    protocol answers nothing)."""
    with socket.create_connection((harness.HOST, port), timeout=10) as s:
        s.sendall(struct.pack("!iii", 12 + len(key), CANCEL_REQUEST_CODE, pid) + key)
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return data
            data += chunk


def wait_active(pg: harness.PostgresCluster, query: str, user: str = "app",
                timeout: float = 20) -> int:
    """The pid of the backend of `user` running `query`, once it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid, state, q in pg.server_backends(user=user):
            if state == "active" and q == query:
                return pid
        time.sleep(0.05)
    raise AssertionError(f"{query!r} never ran: {pg.server_backends(user=user)}")


def flip(key: bytes, bit: int = 0) -> bytes:
    return bytes([key[0] ^ (1 << bit)]) + key[1:]


# --------------------------------------------------------------------------------------------
# cancel keys


def test_cancel_keys_come_from_the_csprng():
    """A static guard: the cancel key comes from the kernel's CSPRNG (secure_random, a buffer
    over getrandom(2)), and no predictable PRNG is used anywhere in the pooler or the protocol
    code."""
    worker = open(os.path.join(SOURCE, "pooler", "core", "worker.cc")).read()
    body = worker[worker.index("Worker::register_cancel_key"):]
    body = body[:body.index("\n}\n")]
    assert body.count("secure_random(") >= 2, body  # the pid and the key
    source = open(os.path.join(SOURCE, "pooler", "base", "secure_random.cc")).read()
    assert "::getrandom(" in source, source
    weak = re.compile(r"\b(s?rand|random|drand48|lrand48|mt19937(_64)?|minstd_rand0?|"
                      r"default_random_engine|random_device)\s*[(<{]")
    # Uses that are no secret, by file: the spread of server lifetimes.
    allowed = {"pool.cc": "stagger_draw"}
    for directory in ("pooler", "protocol"):
        for root, _, files in os.walk(os.path.join(SOURCE, directory)):
            for name in files:
                if not name.endswith((".cc", ".h")):
                    continue
                text = open(os.path.join(root, name)).read()
                for m in weak.finditer(text):
                    owner = allowed.get(name)
                    # Allowed only inside the named function (within a few lines of its name).
                    if owner and 0 <= m.start() - text.rfind(owner, 0, m.start()) < 200:
                        continue
                    raise AssertionError(f"{name}: {m.group(0)} at offset {m.start()}")


def test_cancel_keys_are_random_and_not_the_servers(pg, make_pooler):
    pooler = make_pooler(auth_type="trust", default_pool_size=3)
    clients: list[RecordingClient] = []
    try:
        for _ in range(200):
            clients.append(raw(pooler, user="trustuser", password=None))
        pids = [c.cancel_pid for c in clients]
        keys = [c.cancel_key for c in clients]
        assert all(len(k) == 4 for k in keys), keys[:3]
        assert len(set(pids)) == len(pids), "duplicate virtual pid"
        assert len(set(keys)) == len(keys), "duplicate cancel key"
        # 200 clients on at most 3 backends: a key derived from the server's would repeat.
        backend_pids = set()
        for c in clients[::10]:
            backend_pids.add(int(c.scalar("SELECT pg_backend_pid()")))
        assert len(backend_pids) <= 3
        real_pids = {int(p) for p in pg.psql("SELECT pid FROM pg_stat_activity").split()}
        assert not set(pids) & (real_pids | backend_pids), "a client got a real backend pid"
        # No sequence: spread over the 31-bit range, consecutive differences all distinct, and
        # up or down as a coin would (sd 7 of 199 steps; the bounds are 6 sd away).
        assert min(pids) > 0 and max(pids) - min(pids) > 2**28, (min(pids), max(pids))
        diffs = [b - a for a, b in zip(pids, pids[1:])]
        assert len(set(diffs)) >= 195, "consecutive pids follow a pattern"
        ups = sum(1 for d in diffs if d > 0)
        assert 60 <= ups <= 140, ups
        key_ints = [struct.unpack("!I", k)[0] for k in keys]
        kdiffs = [b - a for a, b in zip(key_ints, key_ints[1:])]
        assert len(set(kdiffs)) >= 195, "consecutive keys follow a pattern"
        # Bits of the keys: balanced (6,400 bits, sd 0.6 %; bounds 8 sd away), and the key is
        # not the pid's bytes.
        ones = sum(bin(k).count("1") for k in key_ints)
        assert 0.45 < ones / (32 * len(keys)) < 0.55, ones
        assert sum(1 for p, k in zip(pids, key_ints) if p == k or p == k & 0x7fffffff) == 0
        # A protocol 3.2 client gets a 256-bit key.
        c32 = raw(pooler, user="trustuser", password=None, protocol_32=True)
        clients.append(c32)
        assert len(c32.cancel_key) == 32 and c32.cancel_key not in keys
        assert c32.scalar("SELECT 1") == "1"
    finally:
        for c in clients:
            c.close()


def test_wrong_cancel_key_does_nothing(pg, make_pooler):
    pooler = make_pooler(default_pool_size=2)
    a = raw(pooler)  # app (SCRAM)
    b = raw(pooler, user="md5user", password="md5pass")
    try:
        query_a, query_b = "SELECT pg_sleep(5), 'a'", "SELECT pg_sleep(5), 'b'"
        t0 = time.monotonic()
        a.send_query(query_a)
        b.send_query(query_b)
        wait_active(pg, query_a)
        wait_active(pg, query_b, user="md5user")
        attempts = [
            (a.cancel_pid, flip(a.cancel_key)),             # right pid, one bit off
            (a.cancel_pid, flip(a.cancel_key, 7)),
            (a.cancel_pid, b.cancel_key),                   # right pid, another client's secret
            (b.cancel_pid, a.cancel_key),                   # another user's client, my key
            (a.cancel_pid, a.cancel_key + b"\0" * 4),       # the key with more after it
            (a.cancel_pid, a.cancel_key[:3] + b"\0"),
            (a.cancel_pid ^ 1, a.cancel_key),               # the key with a neighbouring pid
            (a.cancel_pid + 1, a.cancel_key),
        ]
        rng = secrets.SystemRandom()
        attempts += [(a.cancel_pid, secrets.token_bytes(4)) for _ in range(80)]
        attempts += [(b.cancel_pid, secrets.token_bytes(4)) for _ in range(80)]
        attempts += [(rng.randrange(1, 2**31), secrets.token_bytes(4)) for _ in range(40)]
        for pid, key in attempts:
            if (pid, key) in ((a.cancel_pid, a.cancel_key), (b.cancel_pid, b.cancel_key)):
                continue  # a random guess that hit (p = 2^-32): not a wrong key
            assert send_cancel(pooler.port, pid, key) == b""
        # Every attempt was made while both queries ran (else it proved nothing).
        running = {q for _, state, q in pg.server_backends() + pg.server_backends(user="md5user")
                   if state == "active"}
        assert {query_a, query_b} <= running, (time.monotonic() - t0, running)
        # Both queries run to their end, with their results.
        rows_a, _, _ = a.read_result()
        rows_b, _, _ = b.read_result()
        elapsed = time.monotonic() - t0
        assert rows_a == [["", "a"]] and rows_b == [["", "b"]]
        assert elapsed >= 4.9, elapsed
        assert pooler.wait_for_log(r"cancel request with an unknown key ignored"), pooler.log()
        # The right key cancels, and only its own client's query: b's query, started next to
        # a's, completes.
        long_a, short_b = "SELECT pg_sleep(30), 'a'", "SELECT pg_sleep(2), 'b'"
        a.send_query(long_a)
        b.send_query(short_b)
        wait_active(pg, long_a)
        wait_active(pg, short_b, user="md5user")
        t0 = time.monotonic()
        assert send_cancel(pooler.port, a.cancel_pid, a.cancel_key) == b""
        with pytest.raises(harness.PgError) as info:
            a.read_result()
        assert info.value.sqlstate == "57014", info.value.fields
        assert time.monotonic() - t0 < 15
        assert b.read_result()[0] == [["", "b"]]
        # A cancel for b with b's key works as well; both sessions go on.
        b.send_query(long_a.replace("'a'", "'b'"))
        wait_active(pg, long_a.replace("'a'", "'b'"), user="md5user")
        send_cancel(pooler.port, b.cancel_pid, b.cancel_key)
        with pytest.raises(harness.PgError) as info:
            b.read_result()
        assert info.value.sqlstate == "57014"
        assert a.scalar("SELECT 'a alive'") == "a alive"
        assert b.scalar("SELECT 'b alive'") == "b alive"
    finally:
        a.close()
        b.close()


def test_cancel_key_of_a_gone_client_is_dead(pg, make_pooler):
    """A key stays with its client: after that client left, it cancels nobody, not even a new
    client that happens to get the same server."""
    pooler = make_pooler(default_pool_size=1)
    old = raw(pooler)
    old_pid, old_key = old.cancel_pid, old.cancel_key
    assert old.scalar("SELECT 1") == "1"
    old.close()
    new = raw(pooler)
    try:
        query = "SELECT pg_sleep(2), 'new'"
        new.send_query(query)
        wait_active(pg, query)
        send_cancel(pooler.port, old_pid, old_key)
        assert new.read_result()[0] == [["", "new"]]
    finally:
        new.close()


# --------------------------------------------------------------------------------------------
# session_state_action = reset


STATE_QUERIES = {
    "settings": "SELECT string_agg(name || '=' || setting, ',' ORDER BY name) FROM pg_settings",
    "session_settings": "SELECT string_agg(name || '=' || setting, ',' ORDER BY name) "
                        "FROM pg_settings WHERE source = 'session'",
    "custom": "SELECT coalesce(current_setting('myapp.secret', true), '')",
    "users": "SELECT current_user || ',' || session_user",
    "listen": "SELECT count(*) FROM pg_listening_channels()",
    "locks": "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'",
    "prepared": "SELECT count(*) FROM pg_prepared_statements",
    "cursors": "SELECT count(*) FROM pg_cursors",
    "temp": "SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()",
    "temp_table": "SELECT coalesce(to_regclass('pg_temp.a_secret_tbl')::text, '')",
}


def state_of(conn) -> dict[str, str]:
    return {k: str(conn.execute(q).fetchone()[0]) for k, q in STATE_QUERIES.items()}


def test_reset_leaves_nothing_of_a_for_b(pg, make_pooler):
    pg.psql("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sec_role') THEN "
            "CREATE ROLE sec_role NOLOGIN; END IF; END $$; GRANT sec_role TO app")
    pooler = make_pooler(default_pool_size=1, session_state_action="reset")
    with pooler.connect(autocommit=True) as a, pooler.connect(autocommit=True) as b:
        pid = a.execute("SELECT pg_backend_pid()").fetchone()[0]
        assert b.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
        baseline = state_of(b)
        work_mem = b.execute("SHOW work_mem").fetchone()[0]
        assert baseline["custom"] == "" and baseline["users"] == "app,app"
        # A, statement by statement (each its own transaction, on the one server).
        leaks = [
            "SET work_mem = '77MB'",
            "SET myapp.secret = 'a-secret-of-A'",
            "SELECT set_config('statement_timeout', '4242', false)",
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SET search_path = a_private, public",
            "LISTEN a_secret_channel",
            "CREATE TEMP TABLE a_secret_tbl AS SELECT 'secret' AS x",
            "SELECT pg_advisory_lock(4242)",
            "PREPARE a_secret_stmt AS SELECT 'secret'",
            "SET ROLE sec_role",
        ]
        for sql in leaks:
            a.execute(sql)
            assert b.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
            assert state_of(b) == baseline, f"after A's {sql!r}"
        a.execute("BEGIN")
        a.execute("DECLARE a_secret_cursor CURSOR WITH HOLD FOR SELECT 'secret'")
        a.execute("COMMIT")
        assert state_of(b) == baseline, "after A's WITH HOLD cursor"
        # All at once, in one simple-protocol Query, then B over the simple protocol too.
    with pooler.raw() as a2, pooler.raw() as b2:
        keys = ("settings", "custom", "users", "listen", "locks", "prepared", "cursors", "temp",
                "temp_table")
        before = {k: b2.scalar(STATE_QUERIES[k]) for k in keys}
        a2.query("SELECT 1; SET work_mem = '78MB'; LISTEN a2_channel; "
                 "SELECT pg_advisory_lock(4343); CREATE TEMP TABLE a_secret_tbl (x int); "
                 "SET ROLE sec_role; PREPARE a2_stmt AS SELECT 1; SELECT 2")
        assert {k: b2.scalar(STATE_QUERIES[k]) for k in keys} == before
        assert b2.scalar("SHOW work_mem") == work_mem
        assert b2.scalar(STATE_QUERIES["users"]) == "app,app"
    # From outside: no advisory lock left on the server.
    assert pg.psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == "0"


# --------------------------------------------------------------------------------------------
# admin console


def test_admin_console_refuses_non_admins(make_pooler):
    pooler = make_pooler(admin_users="app", stats_users="md5user")
    for db in ("pgsluice", "pgbouncer"):
        # Neither admin nor stats user: refused at login (PgBouncer's "not allowed").
        for user, password in (("scramuser", "scrampass"), ("trustuser", "trustpass")):
            with pytest.raises(harness.PgError) as e:
                raw(pooler, user=user, password=password, db=db).close()
            assert e.value.sqlstate == "28000", e.value.fields
        # An admin with a wrong password is a password failure, not a way in.
        with pytest.raises(harness.PgError) as e:
            raw(pooler, user="app", password="not-app", db=db).close()
        assert e.value.sqlstate == "28P01"
    with raw(pooler, user="md5user", password="md5pass", db="pgsluice") as stats:
        stats.send_query("SHOW CONFIG")
        rows, tag, _ = stats.read_result()
        assert tag == "SHOW" and rows, (tag, rows)
        for command in ("PAUSE", "SUSPEND", "RELOAD", "SHUTDOWN", "KILL app", "RECONNECT",
                        "DISABLE app", "KILL_CLIENT 1", "SET default_pool_size = 1"):
            with pytest.raises(harness.PgError) as e:
                stats.query(command)
            assert e.value.sqlstate == "08P01", (command, e.value.fields)
            assert e.value.message == "admin access needed", (command, e.value.fields)
    # None of it took effect: not paused, not shut down, pool size unchanged.
    with raw(pooler) as c:
        assert c.scalar("SELECT 'served'") == "served"
    with raw(pooler, db="pgsluice") as admin:
        rows = admin.query("SHOW DATABASES")
        assert rows
        admin.query("PAUSE app")
        admin.query("RESUME app")
    assert pooler.alive()
    # trust does not make anyone an admin either.
    trusting = make_pooler(auth_type="trust", admin_users="app")
    with pytest.raises(harness.PgError) as e:
        raw(trusting, user="trustuser", password=None, db="pgsluice").close()
    assert e.value.sqlstate == "28000"


# --------------------------------------------------------------------------------------------
# secrets in logs


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def scram_parts(verifier: str, password: str) -> list[str]:
    """Everything derived from a SCRAM-SHA-256 verifier and its password, as text a log could
    show: the verifier, salt, StoredKey, ServerKey (base64 and hex), SaltedPassword, ClientKey."""
    m = re.fullmatch(r"SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)", verifier)
    assert m, verifier
    iterations, salt, stored, server = int(m.group(1)), m.group(2), m.group(3), m.group(4)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(salt), iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    parts = [verifier, salt, stored, server, b64(salted), b64(client_key)]
    for blob in (base64.b64decode(stored), base64.b64decode(server), salted, client_key):
        parts.append(blob.hex())
    return parts


def md5_parts(user: str, password: str) -> list[str]:
    digest = hashlib.md5((password + user).encode()).hexdigest()
    return ["md5" + digest, digest]


def exchange_secrets(client: RecordingClient) -> list[str]:
    """What the client sent and got in its authentication exchange that would let someone in or
    help them: the PasswordMessage body (cleartext or MD5 response), the SCRAM client proof and
    the salt pgsluice sent."""
    out = []
    for kind, body in client.sent:
        if kind != b"p":
            continue
        text = body.rstrip(b"\0").decode(errors="replace")
        if text.startswith("SCRAM-SHA-256"):
            continue  # client-first: the mechanism name and a public nonce
        m = re.search(r",p=([A-Za-z0-9+/=]+)", text)
        if m:
            out += [m.group(1), base64.b64decode(m.group(1)).hex()]
        else:
            out.append(text)
    for kind, body in client.received:
        if kind == b"R" and struct.unpack("!i", body[:4])[0] == 11:
            attrs = dict(i.split("=", 1) for i in body[4:].decode().split(","))
            out.append(attrs["s"])
    return out


class SecretCluster:
    """Roles for the log test: each with a long random password, logged in to PostgreSQL by
    SCRAM, MD5 and cleartext (pg_hba `password`)."""

    def __init__(self, pg: harness.PostgresCluster):
        tag = secrets.token_hex(6)
        self.passwords = {
            "sec_scram": f"Scram-Pw-{tag}-1",
            "sec_md5": f"Md5-Pw-{tag}-2",
            "sec_clear": f"Clear-Pw-{tag}-3",
            "sec_forced": f"Forced-Pw-{tag}-4",
        }
        self.wrong = f"Wrong-Pw-{tag}-5"
        self.wrong_server = f"Wrong-Server-Pw-{tag}-6"
        for user, password in self.passwords.items():
            method = "md5" if user == "sec_md5" else "scram-sha-256"
            pg.psql(f"DROP ROLE IF EXISTS {user}; SET password_encryption = '{method}'; "
                    f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
        hba = os.path.join(pg.data, "pg_hba.conf")
        with open(hba) as f:
            text = f.read()
        with open(hba, "w") as f:
            f.write(f"host all sec_md5 {harness.HOST}/32 md5\n"
                    f"host all sec_clear {harness.HOST}/32 password\n" + text)
        pg.psql("SELECT pg_reload_conf()")
        # Wait until PostgreSQL asks sec_clear for a cleartext password (the reload is async).
        deadline = time.monotonic() + 20
        while True:
            c = RecordingClient(harness.HOST, pg.port, "sec_clear", "app",
                                self.passwords["sec_clear"])
            c.close()
            if 3 in c.auth_codes():
                break
            assert time.monotonic() < deadline, c.auth_codes()
            time.sleep(0.2)
        self.verifiers = {u: pg.scram_verifier(u) for u in ("sec_scram", "sec_clear",
                                                            "sec_forced")}
        self.secret_strings: list[str] = [self.wrong, self.wrong_server]
        for user, password in self.passwords.items():
            self.secret_strings.append(password)
            self.secret_strings += md5_parts(user, password)
            if user in self.verifiers:
                self.secret_strings += scram_parts(self.verifiers[user], password)
        self.secret_strings.append(pg.scram_verifier("sec_md5"))  # the stored md5 hash


GENERIC_LEAKS = [
    re.compile(r"md5[0-9a-f]{32}"),
    re.compile(r"SCRAM-SHA-256\$"),
    re.compile(r"\bp=[A-Za-z0-9+/]{43}="),           # a SCRAM proof
    re.compile(r"\bs=[A-Za-z0-9+/]{22}==|\bs=[A-Za-z0-9+/]{24}\b"),  # a 16-byte SCRAM salt
    re.compile(r"password\s*=\s*\S", re.IGNORECASE),   # a connection string's password
]


def test_no_secrets_in_logs(pg, make_pooler):
    sec = SecretCluster(pg)
    pw = sec.passwords
    forced = (f"host=127.0.0.1 port={{pg_port}} dbname=app user=sec_forced "
              f"password={pw['sec_forced']}")
    databases = {
        "app": "host=127.0.0.1 port={pg_port} dbname=app",
        "forced": forced,
        "badserver": f"host=127.0.0.1 port={{pg_port}} dbname=app user=sec_scram "
                     f"password={sec.wrong_server}",
    }
    plain_users = {"sec_scram": pw["sec_scram"], "sec_md5": pw["sec_md5"],
                   "sec_clear": pw["sec_clear"]}
    setups = {
        # client auth -> auth_file (how the server login is done follows from pg_hba)
        "plain": plain_users,
        "md5": dict(plain_users, sec_md5=md5_parts("sec_md5", pw["sec_md5"])[0]),
        "scram-sha-256": dict(plain_users, sec_scram=sec.verifiers["sec_scram"]),
    }
    sent_secrets: list[str] = []
    logs = []
    for auth_type, users in setups.items():
        pooler = make_pooler(databases=databases, users=users, auth_type=auth_type,
                             verbose_level="trace", log_connections=1, log_disconnections=1,
                             log_pooler_errors=1, default_pool_size=2,
                             admin_users="sec_scram", stats_users="sec_md5")
        for user in plain_users:
            with raw(pooler, user=user, password=pw[user]) as c:
                assert c.scalar("SELECT current_user") == user
                sent_secrets += exchange_secrets(c)
            with pytest.raises(harness.PgError) as e:
                raw(pooler, user=user, password=sec.wrong).close()
            assert e.value.sqlstate == "28P01", (auth_type, user, e.value.fields)
            # libpq as well (its own SCRAM nonce and proof, which the generic patterns catch).
            with pooler.connect(user=user, password=pw[user], autocommit=True) as conn:
                assert conn.execute("SELECT 1").fetchone()[0] == 1
        with raw(pooler, user="sec_clear", password=pw["sec_clear"], db="forced") as c:
            assert c.scalar("SELECT current_user") == "sec_forced"
            sent_secrets += exchange_secrets(c)
        # A server login that fails (a wrong password in the [databases] entry): at the
        # client's login or at its first query, depending on when the pool logs in.
        with pytest.raises(harness.PgError):
            with raw(pooler, user="sec_scram", password=pw["sec_scram"], db="badserver") as c:
                c.query("SELECT 1")
        # The console shows configuration to stats users: no secret there either.
        with raw(pooler, user="sec_md5", password=pw["sec_md5"], db="pgsluice") as c:
            shown = repr([c.query(f"SHOW {w}") for w in ("DATABASES", "USERS", "CONFIG",
                                                          "POOLS", "SERVERS", "CLIENTS")])
        with raw(pooler, user="sec_scram", password=pw["sec_scram"], db="pgsluice") as c:
            c.query("RELOAD")
        pooler.stop()
        log = pooler.log()
        # The test means something only if the log is as talkative as it gets.
        assert "login ok" in log and " trace " in log and "password" in log.lower(), log[-3000:]
        logs.append((auth_type, log, shown))

    # Config errors are printed too: a bad line holding a password must not echo it.
    bad = make_pooler(databases={"app": f"host=127.0.0.1 port={{pg_port}} dbname=app "
                                        f"user=sec_forced password={pw['sec_forced']} "
                                        f"nosuchkey=1"}, start=False)
    rc, out, err = harness.run([bad.binary, bad.config_path], timeout=20)
    assert rc == 1, (out, err)
    logs.append(("config error", out + err, ""))

    all_secrets = {s for s in sec.secret_strings + sent_secrets if len(s) >= 8}
    assert len(all_secrets) > 40
    for name, log, shown in logs:
        for secret in all_secrets:
            assert secret.lower() not in log.lower(), f"{name}: a secret in the log: {secret}"
            assert secret.lower() not in shown.lower(), f"{name}: a secret in SHOW: {secret}"
        for pattern in GENERIC_LEAKS:
            m = pattern.search(log)
            assert not m, f"{name}: {m.group(0)!r} in the log:\n" + \
                "\n".join(line for line in log.splitlines() if m.group(0) in line)[:2000]
