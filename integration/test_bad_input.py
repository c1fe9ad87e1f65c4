"""Bad clients against pgsluice, over raw sockets: impossible length words in the startup and the
regular phase, messages cut into many TCP segments, a startup packet that never completes,
thousands of silent connections in one burst, unknown message types, a PasswordMessage nobody
asked for, and a client that never reads its results. Each gets a clear error (FATAL, SQLSTATE
08P01) or a close, pgsluice logs it, every other client keeps working, and pgsluice exits cleanly
at the end (make_pooler checks its exit status and the sanitizer markers in its log)."""

from __future__ import annotations

import os
import resource
import socket
import struct
import threading
import time

import pytest

import harness

TIMEOUT = 20  # generous: the CI machine has two noisy cores


# --------------------------------------------------------------------------------------------
# helpers


def startup_packet(user: str = "app", database: str = "app") -> bytes:
    body = struct.pack("!i", 196608)
    body += b"user\0" + user.encode() + b"\0database\0" + database.encode() + b"\0\0"
    return struct.pack("!i", len(body) + 4) + body


def read_messages_until_close(sock: socket.socket, timeout: float = TIMEOUT,
                              startup: bool = False) -> tuple[list[tuple[bytes, bytes]], bool]:
    """Reads until the peer closes or `timeout` passes: (messages, closed). A reset counts as a
    close."""
    sock.settimeout(0.5)
    data = b""
    closed = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        data += chunk
    messages = []
    pos = 0
    while len(data) - pos >= 5:
        kind = data[pos:pos + 1]
        length = struct.unpack("!i", data[pos + 1:pos + 5])[0]
        if len(data) - pos < 1 + length:
            break
        messages.append((kind, data[pos + 5:pos + 1 + length]))
        pos += 1 + length
    return messages, closed


def error_fields(body: bytes) -> dict[str, str]:
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode(errors="replace")
    return fields


def expect_fatal_and_close(sock: socket.socket, sqlstate: str = "08P01",
                           timeout: float = TIMEOUT) -> dict[str, str]:
    """The next thing on `sock` is an ErrorResponse with `sqlstate` (nothing else after it) and
    then the close."""
    messages, closed = read_messages_until_close(sock, timeout)
    errors = [error_fields(body) for kind, body in messages if kind == b"E"]
    assert closed, f"connection still open after {timeout} s; got {messages!r}"
    assert errors, f"closed without an ErrorResponse; got {messages!r}"
    assert errors[-1].get("C") == sqlstate, errors
    assert messages[-1][0] == b"E", f"something after the error: {messages!r}"
    return errors[-1]


def assert_works(pooler: harness.Pooler, client: harness.RawClient | None = None) -> None:
    """Another client (a fresh one, and `client` if given) still gets answers."""
    with pooler.raw() as c:
        assert c.scalar("SELECT 6 * 7") == "42"
    if client is not None:
        assert client.scalar("SELECT 'still here'") == "still here"


def connect(pooler: harness.Pooler) -> socket.socket:
    return socket.create_connection((harness.HOST, pooler.port), timeout=TIMEOUT)


# --------------------------------------------------------------------------------------------
# length words


@pytest.mark.parametrize("length", [0, 3, 2**31, 2**32 - 1, 10001])
def test_startup_length_out_of_range(make_pooler, length):
    pooler = make_pooler(default_pool_size=1)
    bystander = pooler.raw()
    with connect(pooler) as s:
        s.sendall(struct.pack("!I", length) + b"\0" * 16)
        err = expect_fatal_and_close(s)
        assert "startup packet" in err.get("M", ""), err
    assert pooler.wait_for_log(r"invalid startup packet"), pooler.log()[-2000:]
    assert_works(pooler, bystander)
    bystander.close()


@pytest.mark.parametrize("in_transaction", [False, True], ids=["idle", "in_transaction"])
@pytest.mark.parametrize("length", [0, 3, 2**31, 2**32 - 1])
def test_regular_length_out_of_range(make_pooler, length, in_transaction):
    # One server for everyone: a server left behind by the bad client would starve the others.
    pooler = make_pooler(default_pool_size=1, query_wait_timeout=15)
    bystander = pooler.raw()
    bad = pooler.raw()
    if in_transaction:
        bad.query("BEGIN")
        bad.query("CREATE TEMP TABLE IF NOT EXISTS junk (a int) ON COMMIT DROP")
    bad.sendall(b"Q" + struct.pack("!I", length) + b"SELECT 1\0")
    expect_fatal_and_close(bad.sock)
    bad.close()
    assert pooler.wait_for_log(r"invalid message|message too long"), pooler.log()[-2000:]
    assert_works(pooler, bystander)
    # The transaction the bad client left open was not handed to anyone.
    assert bystander.query("SELECT count(*) FROM pg_class WHERE relname = 'junk' "
                           "AND relpersistence = 't'") == [["0"]]
    bystander.close()


def test_max_packet_size_enforced(make_pooler):
    pooler = make_pooler(max_packet_size=65536)
    with pooler.raw() as c:
        # Announcing more than max_packet_size is refused at the header, before any body.
        c.sendall(b"Q" + struct.pack("!I", 1 << 20))
        err = expect_fatal_and_close(c.sock)
        # (idle: "invalid message: too_long"; linked to a server: "... (max_packet_size)")
        assert "too_long" in err.get("M", "") or "max_packet_size" in err.get("M", ""), err
    assert_works(pooler)


# --------------------------------------------------------------------------------------------
# slow and partial input


def test_message_split_over_many_segments(make_pooler):
    pooler = make_pooler()
    # Every message, the startup packet and the SCRAM exchange included, goes out 3 bytes per
    # TCP segment with a pause between: pgsluice must reassemble them.
    with pooler.raw(send_chunk=3, send_pause=0.01) as c:
        assert c.scalar("SELECT 'reassembled ' || 40 + 2") == "reassembled 42"
        # A pause inside the header (type byte alone, then the length), and two messages in
        # one segment right after.
        c.sock.sendall(b"Q")
        time.sleep(0.3)
        c.sock.sendall(struct.pack("!i", 4 + len(b"SELECT 1\0"))[:2])
        time.sleep(0.3)
        c.sock.sendall(struct.pack("!i", 4 + len(b"SELECT 1\0"))[2:] + b"SELECT")
        time.sleep(0.3)
        second = b"SELECT 2\0"
        c.sock.sendall(b" 1\0" + b"Q" + struct.pack("!i", 4 + len(second)) + second)
        assert c.read_result()[0] == [["1"]]
        assert c.read_result()[0] == [["2"]]
    # Extended protocol byte by byte: Parse/Bind/Execute/Sync.
    with pooler.raw(send_chunk=1, send_pause=0.001) as c:
        c.send(b"P", b"\0SELECT $1::int * 2\0" + struct.pack("!h", 0))
        c.send(b"B", b"\0\0" + struct.pack("!hhi", 0, 1, 2) + b"21" + struct.pack("!h", 0))
        c.send(b"E", b"\0" + struct.pack("!i", 0))
        c.send(b"S")
        rows, tag, status = c.read_result()
        assert rows == [["42"]] and status == "I"


def test_startup_never_completes(make_pooler):
    pooler = make_pooler(client_login_timeout=2)
    bystander = pooler.raw()
    silent = connect(pooler)             # sends nothing at all
    partial = connect(pooler)            # half a startup packet
    packet = startup_packet()
    partial.sendall(packet[:len(packet) // 2])
    no_password = connect(pooler)        # a startup packet, then no answer to the SCRAM request
    no_password.sendall(packet)
    start = time.monotonic()
    for s in (silent, partial):
        _, closed = read_messages_until_close(s, timeout=15)
        assert closed, "a connection that never completed its startup packet is still open"
    msgs, closed = read_messages_until_close(no_password, timeout=15)
    assert closed
    elapsed = time.monotonic() - start
    assert 1.0 <= elapsed < 12, elapsed
    errors = [error_fields(b) for k, b in msgs if k == b"E"]
    assert errors and errors[-1].get("C") == "08P01", msgs
    for s in (silent, partial, no_password):
        s.close()
    assert pooler.wait_for_log(r"client_login_timeout"), pooler.log()[-2000:]
    # Logged-in clients are not subject to the login timeout.
    time.sleep(2.5)
    assert_works(pooler, bystander)
    bystander.close()


def test_burst_of_silent_connections(make_pooler):
    # The 10,000, unless the file-descriptor limit (this process holds one per socket,
    # and so does pgsluice) cannot take them.
    count = int(os.environ.get("PGSLUICE_BURST_CONNECTIONS", "10000"))
    count = min(count, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 1000)
    pooler = make_pooler(max_client_conn=count + 100, client_login_timeout=60)
    # Warm: one login before, for the baseline time.
    t0 = time.monotonic()
    assert_works(pooler)
    baseline = time.monotonic() - t0

    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex((harness.HOST, pooler.port))
            socks.append(s)
        # While they sit there (some maybe still in the accept queue), a normal client logs in and
        # queries.
        t0 = time.monotonic()
        with pooler.raw(timeout=TIMEOUT) as c:
            assert c.scalar("SELECT 'through the crowd'") == "through the crowd"
            login_and_query = time.monotonic() - t0
            for _ in range(20):
                assert c.scalar("SELECT 1") == "1"
        assert login_and_query < 5, (login_and_query, baseline)
        # The silent connections are all still open (none was dropped to make room).
        time.sleep(0.5)
        open_count = 0
        for s in socks:
            try:
                data = s.recv(1)
                open_count += 0 if data == b"" else 1
            except BlockingIOError:
                open_count += 1
            except OSError:
                pass
        assert open_count == count, f"only {open_count} of {count} silent connections open"
        print(f"{count} silent connections: login + first query {login_and_query * 1000:.0f} ms "
              f"(alone before: {baseline * 1000:.0f} ms)")
    finally:
        for s in socks:
            s.close()
    assert_works(pooler)


# --------------------------------------------------------------------------------------------
# wrong messages


@pytest.mark.parametrize("kind", [b"!", b"\x7f", b"z", b"R", b"T"])
def test_unknown_message_type(make_pooler, kind):
    pooler = make_pooler(default_pool_size=1)
    bystander = pooler.raw()
    with pooler.raw() as c:
        c.send(kind, b"garbage\0")
        err = expect_fatal_and_close(c.sock)
        assert "invalid frontend message type" in err.get("M", ""), err
    assert pooler.wait_for_log(r"invalid frontend message type"), pooler.log()[-2000:]
    # In a transaction (the client holds the only server).
    with pooler.raw() as c:
        c.query("BEGIN")
        c.send(kind, b"garbage\0")
        expect_fatal_and_close(c.sock)
    assert_works(pooler, bystander)
    bystander.close()


def test_type_byte_zero(make_pooler):
    pooler = make_pooler()
    with pooler.raw() as c:
        c.send(b"\0", b"")
        expect_fatal_and_close(c.sock)
    assert_works(pooler)


def test_password_message_when_not_asked(make_pooler):
    pooler = make_pooler(default_pool_size=1)
    bystander = pooler.raw()
    # After login, idle and inside a transaction.
    for in_transaction in (False, True):
        with pooler.raw() as c:
            if in_transaction:
                c.query("BEGIN")
            c.send(b"p", b"app\0")
            expect_fatal_and_close(c.sock)
    # With trust authentication nothing is ever asked.
    trust = make_pooler(auth_type="trust")
    with trust.raw(password=None) as c:
        c.send(b"p", b"app\0")
        expect_fatal_and_close(c.sock)
    assert trust.wait_for_log(r"invalid frontend message type 112"), trust.log()[-2000:]
    assert_works(pooler, bystander)
    bystander.close()


def read_auth_request(sock: socket.socket) -> int:
    """Reads the AuthenticationXXX request after the startup packet: its code."""
    sock.settimeout(TIMEOUT)
    data = b""
    while len(data) < 9:
        chunk = sock.recv(9 - len(data))
        assert chunk, "closed before the authentication request"
        data += chunk
    assert data[:1] == b"R", data
    length = struct.unpack("!i", data[1:5])[0]
    rest = length + 1 - len(data)
    while rest > 0:
        chunk = sock.recv(rest)
        assert chunk
        rest -= len(chunk)
    return struct.unpack("!i", data[5:9])[0]


def test_wrong_message_during_authentication(make_pooler):
    pooler = make_pooler()
    # A Query where the SASLInitialResponse belongs.
    with connect(pooler) as s:
        s.sendall(startup_packet())
        assert read_auth_request(s) == 10
        s.sendall(b"Q" + struct.pack("!i", 13) + b"SELECT 1\0")
        err = expect_fatal_and_close(s)
        assert "password" in err.get("M", ""), err
    # A PasswordMessage of garbage where the SASLInitialResponse belongs.
    with connect(pooler) as s:
        s.sendall(startup_packet())
        assert read_auth_request(s) == 10
        s.sendall(b"p" + struct.pack("!i", 4 + 7) + b"\xff\xfe\0abcd")
        messages, closed = read_messages_until_close(s)
        assert closed
        errors = [error_fields(b) for k, b in messages if k == b"E"]
        assert errors and errors[-1].get("C") in ("08P01", "28P01"), messages
        assert not any(k == b"Z" for k, _ in messages), "logged in with a garbage password"
    # A SASLInitialResponse announcing more data than the message holds.
    with connect(pooler) as s:
        s.sendall(startup_packet())
        assert read_auth_request(s) == 10
        body = b"SCRAM-SHA-256\0" + struct.pack("!i", 1000) + b"n,,n=,r=abc"
        s.sendall(b"p" + struct.pack("!i", 4 + len(body)) + body)
        messages, closed = read_messages_until_close(s)
        assert closed and not any(k == b"Z" for k, _ in messages), messages
    assert_works(pooler)


def test_password_pipelined_with_startup(make_pooler):
    # PostgreSQL reads a PasswordMessage that came in the same segment as the StartupMessage (it
    # is buffered); so must pgsluice, and a wrong message there must fail at once, not at
    # client_login_timeout.
    pooler = make_pooler(auth_type="plain", client_login_timeout=10)
    with connect(pooler) as s:
        s.sendall(startup_packet() + b"p" + struct.pack("!i", 8) + b"app\0")
        s.settimeout(8)
        data = b""
        while b"Z\0\0\0\x05" not in data:
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk


# --------------------------------------------------------------------------------------------
# backpressure


def test_client_that_never_reads(make_pooler):
    pooler = make_pooler(default_pool_size=2, query_wait_timeout=30)
    pid = pooler.proc.pid
    rss_start = harness.rss_kb(pid)
    # Default socket buffers (a few MB on loopback): a tiny SO_RCVBUF would make the final drain
    # crawl (4 KB window against delayed ACKs), which is not what this is about.
    hog = harness.RawClient(harness.HOST, pooler.port, "app", "app", "app")
    # 200 rows of 1 MB: 200 MB that pgsluice must not buffer.
    hog.send_query("SELECT repeat('x', 1000000) FROM generate_series(1, 200)")
    peak = rss_start
    deadline = time.monotonic() + 8
    queries = 0
    with pooler.raw() as other:
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            assert other.scalar("SELECT count(*) FROM generate_series(1, 1000)") == "1000"
            assert time.monotonic() - t0 < 5
            queries += 1
            peak = max(peak, harness.rss_kb(pid))
            time.sleep(0.05)
    assert queries > 10
    assert peak < 200 * 1024, f"pgsluice RSS grew to {peak // 1024} MB (from {rss_start // 1024})"
    # The reader wakes up and takes everything: nothing was lost while it stalled. (Dropping
    # the connection instead is test_reset_with_unsent_results_frees_the_client.)
    hog.sock.settimeout(60)
    rows, tag, status = hog.read_result()
    assert len(rows) == 200 and all(len(r[0]) == 1000000 for r in rows) and status == "I"
    hog.close()
    # Both servers serve again.
    results = []

    def two_at_once():
        with pooler.raw() as c:
            c.query("BEGIN")
            results.append(c.scalar("SELECT 1"))
            time.sleep(1)
            c.query("COMMIT")

    threads = [threading.Thread(target=two_at_once) for _ in range(2)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == ["1", "1"]
    assert time.monotonic() - t0 < 20
    print(f"RSS start {rss_start // 1024} MB, peak {peak // 1024} MB, {queries} queries")


def test_queued_client_that_keeps_sending_is_not_buffered(make_pooler):
    # A client waiting for a server is still read (no epoll_ctl per queued transaction), but
    # only up to a small limit: a client that streams queries while it waits must not fill the
    # pooler's memory.
    pooler = make_pooler(default_pool_size=1, query_wait_timeout=60)
    pid = pooler.proc.pid
    with pooler.raw() as holder:
        holder.query("BEGIN")  # the only server stays with this client (transaction mode)
        holder.scalar("SELECT 1")
        rss_start = harness.rss_kb(pid)
        flood = pooler.raw()
        query = b"SELECT 1;" + b" " * 1000
        data = (b"Q" + struct.pack("!i", len(query) + 5) + query + b"\0") * 100_000  # ~100 MB
        flood.sock.setblocking(False)
        offset = 0
        deadline = time.monotonic() + 5
        while offset < len(data) and time.monotonic() < deadline:
            try:
                offset += flood.sock.send(data[offset:offset + (1 << 20)])
            except BlockingIOError:
                time.sleep(0.01)
        peak = harness.rss_kb(pid)
        # The kernel's socket buffers take some; pgsluice's own buffer stays small.
        assert peak - rss_start < 32 * 1024, f"RSS {rss_start // 1024} -> {peak // 1024} MB"
        assert offset < len(data), "the pooler read everything while the client was queued"
        holder.query("COMMIT")
    flood.close()


def test_reset_with_unsent_results_frees_the_client(make_pooler):
    # A client that drops its connection (RST) while pgsluice still has results for it in
    # flight must be freed: with max_client_conn = 4, eight of them in a row must not lock
    # everybody out (and under ASan, make_pooler's exit check sees no leaked client).
    pooler = make_pooler(default_pool_size=2, max_client_conn=4)
    for _ in range(8):
        hog = harness.RawClient(harness.HOST, pooler.port, "app", "app", "app")
        hog.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hog.send_query("SELECT repeat('x', 100000) FROM generate_series(1, 100)")
        time.sleep(0.5)  # pgsluice has more for it than its socket takes
        hog.close(abort=True)
        time.sleep(0.3)
    assert pooler.alive()
    assert_works(pooler)


def test_sql_that_broke_the_lexer_fallback(make_pooler):
    # Found by fuzz_session_state: broken SQL starting with ".name(" made the session-state
    # lexer fallback read before its token vector, and the first such Query killed pgsluice
    # (std::logic_error from a garbage string_view). PostgreSQL answers it with a syntax error.
    pooler = make_pooler(pool_mode="transaction")
    for sql in (b"\x2e\xba\xb3\xba\xbc\x49\xdf\x8fgactc(1_olk)rg_a", b".f(1", b"SELECT 1; .g(2"):
        with pooler.raw() as c:
            c.send(b"Q", sql + b"\0")
            with pytest.raises(harness.PgError) as info:
                c.read_result()
            assert info.value.sqlstate in ("42601", "22021"), info.value
            assert c.scalar("SELECT 1") == "1"
    assert pooler.alive()
    assert_works(pooler)
