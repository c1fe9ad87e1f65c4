"""Peering for cancel requests (PgBouncer's peer_id and [peers], issue 20).

Two pgsluice processes share one TCP port with so_reuseport, each with its own Unix socket
directory (how the other one reaches it alone) and a [peers] section naming both. The kernel
spreads new connections over the two, so a CancelRequest, which comes on a connection of its own,
lands on the process holding its client about half the time; the other forwards it there.

- 100 pg_sleep queries, each cancelled by a CancelRequest on a fresh connection to the shared
  port: every one ends with 57014, and no other query was cancelled with it (the rest of its round
  still runs); some went through a forward, both processes issued keys, 3.0 and 3.2 clients both.
- A key naming a peer that is not in [peers], or with its TTL spent, cancels nothing and is
  logged; [peers] that send a request round in a loop drop it after three forwards.
- SHOW PEERS, SHOW PEER_POOLS and SHOW LISTS on each process.
"""

from __future__ import annotations

import os
import socket
import struct
import time

import psycopg
import pytest

import harness

CANCEL_REQUEST_CODE = 80877102
PROTOCOL_32 = (3 << 16) | 2
ROUNDS, PER_ROUND = 10, 10  # 100 cancels; the queries of a round run side by side


def peer_id_of(pid: int) -> int:
    """PgBouncer's reading of a cancel key's peer id: bytes 1 and 2 of the pid, low byte first."""
    b = struct.pack("!i", pid)
    return b[1] + (b[2] << 8)


def with_peer_id(pid: int, peer: int) -> int:
    b = bytearray(struct.pack("!i", pid))
    b[1], b[2] = peer & 0xff, peer >> 8
    return struct.unpack("!i", bytes(b))[0]


def with_ttl(key: bytes, ttl: int) -> bytes:
    return key[:-1] + bytes([(key[-1] & ~0x03) | ttl])


def cancel_packet(pid: int, key: bytes) -> bytes:
    return struct.pack("!iii", 12 + len(key), CANCEL_REQUEST_CODE, pid) + key


def send_cancel(pid: int, key: bytes, port: int, unix_dir: str | None = None) -> bytes:
    """A CancelRequest on a new connection (to the shared TCP port, or to one process's own Unix
    socket); returns what came back before the close (the protocol answers nothing)."""
    if unix_dir is None:
        s = socket.create_connection((harness.HOST, port), timeout=10)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(os.path.join(unix_dir, f".s.PGSQL.{port}"))
    with s:
        s.sendall(cancel_packet(pid, key))
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return data
            data += chunk


def running_queries(pg: harness.PostgresCluster) -> set[str]:
    return {q for _, state, q in pg.server_backends(user="md5user") if state == "active"}


def wait_running(pg: harness.PostgresCluster, queries: set[str], timeout: float = 20) -> None:
    got = harness.wait_until(lambda: queries <= running_queries(pg), timeout, 0.05)
    assert got, f"not all running: {queries - running_queries(pg)}"


def peers_section(members: dict[int, tuple[str, int]]) -> str:
    return "\n[peers]\n" + "".join(f"{peer} = host={d} port={port}\n"
                                   for peer, (d, port) in members.items())


def start_with_peers(pooler: harness.Pooler, peer_id: int, peers: str, **settings) -> None:
    """Writes the pooler's file (its own Unix socket directory, so_reuseport, peer_id, [peers])
    and starts it on pooler.port, which another process may hold already."""
    settings = dict(settings, so_reuseport=1, unix_socket_dir=pooler.dir, peer_id=peer_id)
    pooler.config_text = pooler._substitute(pooler._build_config(None, settings)) + peers
    with open(pooler.config_path, "w") as f:
        f.write(pooler.config_text)
    pooler.start()
    assert pooler.wait_for_log(r"listening on .*\.s\.PGSQL", timeout=10), pooler.log()


SETTINGS = {"default_pool_size": 2 * PER_ROUND, "admin_users": "app", "auth_type": "md5"}


@pytest.fixture
def pair(pg, request):
    """Peers 1 and 2 on one port; the [peers] section is the same file text for both. Their
    logs are printed when the test failed."""
    first = harness.Pooler(pg, start=False, **SETTINGS)
    second = harness.Pooler(pg, start=False, **SETTINGS)
    second.port = first.port
    peers = peers_section({1: (first.dir, first.port), 2: (second.dir, first.port)})
    try:
        for peer_id, p in ((1, first), (2, second)):
            start_with_peers(p, peer_id, peers, **SETTINGS)
        yield first, second
    finally:
        rep = getattr(request.node, "rep_call", None)
        errors = []
        for name, p in (("peer 1", first), ("peer 2", second)):
            if rep is not None and rep.failed:
                print(f"--- {name} log ---\n{p.log()[-6000:]}")
            try:
                p.stop()
            except AssertionError as e:
                errors.append(str(e))
        assert not errors, errors


def client(pooler: harness.Pooler, version: int = 196608) -> harness.RawClient:
    return harness.RawClient(harness.HOST, pooler.port, "md5user", "app", "md5pass",
                             version=version)


def admin(pooler: harness.Pooler):
    """The console of this one process, over its own Unix socket."""
    return psycopg.connect(host=pooler.dir, port=pooler.port, dbname="pgsluice", user="app",
                           password="app", autocommit=True)


def forwarded(pooler: harness.Pooler, peer: int) -> int:
    return pooler.log().count(f"cancel request forwarded to peer {peer}")


# --------------------------------------------------------------------------------------------


def test_100_cancels_through_the_shared_port_cancel_the_right_query(pg, pair):
    first, second = pair
    issuers: dict[int, int] = {1: 0, 2: 0}
    key_sizes: set[int] = set()
    cancelled = 0
    t0 = time.monotonic()
    for round_no in range(ROUNDS):
        # Fresh connections: the kernel picks the process for each.
        clients = []
        try:
            for i in range(PER_ROUND):
                version = PROTOCOL_32 if i % 4 == 3 else 196608
                clients.append(client(first, version))
            queries = {}
            for i, c in enumerate(clients):
                pid, key = c.backend_key[0], c.secret_key
                assert peer_id_of(pid) in (1, 2), pid
                assert key[-1] & 0x03 == 0x03, key  # the full TTL, as PgBouncer's
                issuers[peer_id_of(pid)] += 1
                key_sizes.add(len(key))
                queries[i] = f"SELECT pg_sleep(60), 'round {round_no} client {i}'"
                c.send_query(queries[i])
            wait_running(pg, set(queries.values()))
            for i, c in enumerate(clients):
                assert send_cancel(c.backend_key[0], c.secret_key, first.port) == b""
                with pytest.raises(harness.PgError) as info:
                    c.read_result()
                assert info.value.sqlstate == "57014", info.value.fields
                cancelled += 1
                # Only this client's query ended: the rest of the round still runs.
                rest = {queries[j] for j in range(i + 1, PER_ROUND)}
                assert rest <= running_queries(pg), (i, rest - running_queries(pg))
                # The session goes on after its query was cancelled.
                assert c.scalar("SELECT 'alive'") == "alive"
        finally:
            for c in clients:
                c.close()
    assert cancelled == ROUNDS * PER_ROUND
    # Both processes took clients, 3.0 and 3.2 keys were cancelled, and some cancel requests
    # landed on the process without the client and were forwarded (about half; with none, the
    # test would have shown nothing of peering).
    assert issuers[1] > 0 and issuers[2] > 0, issuers
    assert key_sizes == {4, 32}, key_sizes
    hops = forwarded(first, 2) + forwarded(second, 1)
    assert hops > 0, (first.log()[-2000:], second.log()[-2000:])
    print(f"100 cancels in {time.monotonic() - t0:.1f} s, {hops} forwarded, issuers {issuers}")


def test_a_key_of_an_unknown_peer_or_a_spent_ttl_cancels_nothing(pg, pair):
    first, second = pair
    c = client(first)
    try:
        pid, key = c.backend_key[0], c.secret_key
        holder = first if peer_id_of(pid) == 1 else second
        other = second if holder is first else first
        query = "SELECT pg_sleep(6), 'survives'"
        c.send_query(query)
        wait_running(pg, {query})
        # Peer 7 is nobody's: whichever process gets it logs it and drops it.
        for p in (first, second):
            assert send_cancel(with_peer_id(pid, 7), key, p.port, unix_dir=p.dir) == b""
            assert p.wait_for_log(r"cancel request for unknown peer 7 ignored"), p.log()[-2000:]
        # The right key with its TTL spent, at the process without the client: not forwarded.
        assert send_cancel(pid, with_ttl(key, 0), other.port, unix_dir=other.dir) == b""
        assert other.wait_for_log(r"TTL is exhausted"), other.log()[-2000:]
        # Garbage of every length a CancelRequest may have: no crash, no cancel.
        for size in (4, 5, 31, 32, 64, 256):
            send_cancel(with_peer_id(pid, 2), b"\0" * size, first.port, unix_dir=first.dir)
            send_cancel(with_peer_id(pid, 1), b"\xff" * size, second.port, unix_dir=second.dir)
        assert running_queries(pg) >= {query}
        rows, _, _ = c.read_result()
        assert rows == [["", "survives"]]
        assert first.alive() and second.alive()
        # The right key with one forward's TTL left still cancels.
        c.send_query(query)
        wait_running(pg, {query})
        send_cancel(pid, with_ttl(key, 1), other.port, unix_dir=other.dir)
        with pytest.raises(harness.PgError) as info:
            c.read_result()
        assert info.value.sqlstate == "57014"
    finally:
        c.close()


def test_peers_in_a_loop_drop_the_request_after_three_forwards(pg):
    """Peer 2's line names this very process (a mistake): a request for peer 2 goes round, one
    TTL step each time, and is dropped at 0 instead of circling for ever."""
    pooler = harness.Pooler(pg, start=False, **SETTINGS)
    try:
        start_with_peers(pooler, 1, peers_section({2: (pooler.dir, pooler.port)}), **SETTINGS)
        c = client(pooler)
        try:
            pid, key = c.backend_key[0], c.secret_key
            send_cancel(with_peer_id(pid, 2), key, pooler.port)
            assert pooler.wait_for_log(r"TTL is exhausted"), pooler.log()[-3000:]
            time.sleep(0.3)
            assert forwarded(pooler, 2) == 3, pooler.log()[-3000:]
            assert pooler.log().count("TTL is exhausted") == 1
            assert c.scalar("SELECT 1") == "1"
        finally:
            c.close()
    finally:
        pooler.stop()


def test_show_peers_and_peer_pools(pg, pair):
    first, second = pair
    for own, p in ((1, first), (2, second)):
        with admin(p) as conn:
            cur = conn.execute("SHOW PEERS")
            assert [d.name for d in cur.description] == ["peer_id", "host", "port", "pool_size"]
            rows = cur.fetchall()
            # Both lines, its own included (ignored for forwarding, as PgBouncer's); pool_size is
            # default_pool_size when the line has none.
            assert rows == [(1, first.dir, first.port, SETTINGS["default_pool_size"]),
                            (2, second.dir, first.port, SETTINGS["default_pool_size"])], rows
            lists = dict(conn.execute("SHOW LISTS").fetchall())
            assert lists["peers"] == 2
            assert conn.execute("SHOW CONFIG").fetchall().count(
                ("peer_id", str(own), "0", "yes")) == 1
    # A forward from each side: then each shows a pool for the other, idle once it is done.
    for p, other_id in ((first, 2), (second, 1)):
        c = client(first)
        try:
            pid = with_peer_id(c.backend_key[0], other_id)
            send_cancel(pid, c.secret_key, p.port, unix_dir=p.dir)
            assert p.wait_for_log(f"cancel request forwarded to peer {other_id}"), p.log()
        finally:
            c.close()
        with admin(p) as conn:
            def idle_pool():
                rows = conn.execute("SHOW PEER_POOLS").fetchall()
                return rows if rows == [(other_id, 0, 0, 0, 0)] else None
            assert harness.wait_until(idle_pool, 10), conn.execute("SHOW PEER_POOLS").fetchall()
            cur = conn.execute("SHOW PEER_POOLS")
            assert [d.name for d in cur.description] == [
                "peer_id", "cl_active_cancel_req", "cl_waiting_cancel_req", "sv_active_cancel",
                "sv_login"]
            assert dict(conn.execute("SHOW LISTS").fetchall())["peer_pools"] == 1
