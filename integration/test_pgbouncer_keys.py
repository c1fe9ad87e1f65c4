"""PgBouncer 1.25 settings that pgsluice once accepted with a warning and now implements as
PgBouncer defines them (their TLS ones are in test_tls.py): scram_iterations."""

from __future__ import annotations

import base64
import os
import socket
import struct

import harness


def admin(pooler, command: str) -> str:
    rc, out, err = pooler.psql(command, db="pgsluice")
    assert rc == 0, err
    return out


def no_warning_for(pooler, key: str) -> bool:
    return f"key '{key}' is a PgBouncer setting" not in pooler.log()


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

