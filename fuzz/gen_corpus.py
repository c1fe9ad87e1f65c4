#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/: realistic protocol
messages built field by field with struct (what psql, pgbench -M extended, psycopg and
PostgreSQL 15 send), SCRAM exchanges with fixed nonces that succeed, SQL from the classifier's
golden tests, and the configuration files in conf/. Deterministic: run it again after a change
and commit the result. fuzz/capture.py adds seeds captured from real traffic."""

from __future__ import annotations

import base64
import glob
import hashlib
import hmac
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")


def write(target: str, name: str, data: bytes) -> None:
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def cstr(s: str | bytes) -> bytes:
    return (s.encode() if isinstance(s, str) else s) + b"\0"


def msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def startup(params: dict[str, str], version: int = 196608) -> bytes:
    body = struct.pack("!i", version) + b"".join(cstr(k) + cstr(v) for k, v in params.items()) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


# ---- frontend bodies
def parse_body(name: str, query: str, types: list[int]) -> bytes:
    return cstr(name) + cstr(query) + struct.pack("!h", len(types)) + b"".join(
        struct.pack("!I", t) for t in types)


def bind_body(portal: str, stmt: str, formats: list[int], values: list[bytes | None],
              results: list[int]) -> bytes:
    b = cstr(portal) + cstr(stmt) + struct.pack("!h", len(formats))
    b += b"".join(struct.pack("!h", f) for f in formats)
    b += struct.pack("!h", len(values))
    for v in values:
        b += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    b += struct.pack("!h", len(results)) + b"".join(struct.pack("!h", f) for f in results)
    return b


FRONTEND = {
    0: [cstr("SELECT 1"), cstr("BEGIN; UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 1; END;"),
        cstr("")],
    1: [parse_body("", "SELECT abalance FROM pgbench_accounts WHERE aid = $1", [0]),
        parse_body("P_1", "INSERT INTO t VALUES ($1, $2)", [23, 25]), parse_body("", "SELECT 1", [])],
    2: [bind_body("", "", [], [b"42"], []), bind_body("", "P_1", [1, 0], [b"\0\0\0\x2a", None], [1]),
        bind_body("c1", "S_1", [0], [b"a", b"bb", None], [0, 1])],
    3: [b"S" + cstr("P_1"), b"P" + cstr("")],
    4: [cstr("") + struct.pack("!i", 0), cstr("c1") + struct.pack("!i", 100)],
    5: [b"S" + cstr("P_1"), b"P" + cstr("c1")],
    6: [b"1\tone\n2\ttwo\n", b""],
    7: [cstr("COPY aborted by client")],
    8: [cstr("app"), cstr("md5" + "0" * 32)],
    9: [cstr("SCRAM-SHA-256") + struct.pack("!i", 24) + b"n,,n=,r=rOprNGfwEbeRWgbN",
        cstr("SCRAM-SHA-256") + struct.pack("!i", -1)],
    10: [b"c=biws,r=rOprNGfwEbeRWgbNSERVERNONCE,p=" + b"A" * 44],
    11: [b""],
}


def err_body(fields: list[tuple[str, str]]) -> bytes:
    return b"".join(k.encode() + cstr(v) for k, v in fields) + b"\0"


def rowdesc(cols: list[tuple[str, int]]) -> bytes:
    b = struct.pack("!h", len(cols))
    for name, oid in cols:
        b += cstr(name) + struct.pack("!IhIhih", 0, 0, oid, 4, -1, 0)
    return b


def datarow(values: list[bytes | None]) -> bytes:
    b = struct.pack("!h", len(values))
    for v in values:
        b += struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v
    return b


BACKEND = {
    0: [struct.pack("!i", 0), struct.pack("!i", 3), struct.pack("!i", 5) + b"\x01\x02\x03\x04",
        struct.pack("!i", 10) + cstr("SCRAM-SHA-256") + b"\0",
        struct.pack("!i", 11) + b"r=CLIENTNONCESERVERNONCE,s=c2FsdA==,i=4096",
        struct.pack("!i", 12) + b"v=" + b"A" * 44],
    1: [struct.pack("!i", 12345) + b"\x01\x02\x03\x04", struct.pack("!i", 1) + b"k" * 32],
    2: [cstr("server_version") + cstr("15.8"), cstr("DateStyle") + cstr("ISO, MDY")],
    3: [b"I", b"T", b"E"],
    4: [err_body([("S", "ERROR"), ("V", "ERROR"), ("C", "42P01"),
                  ("M", 'relation "nope" does not exist'), ("P", "15"), ("F", "parse_relation.c"),
                  ("L", "1392"), ("R", "parserOpenTable")]),
        err_body([("S", "FATAL"), ("V", "FATAL"), ("C", "57P01"),
                  ("M", "terminating connection due to administrator command")])],
    5: [cstr("SELECT 1"), cstr("INSERT 0 1"), cstr("COPY 3")],
    6: [rowdesc([("?column?", 23)]), rowdesc([("aid", 23), ("abalance", 23), ("filler", 1042)])],
    7: [datarow([b"1"]), datarow([b"42", None, b"x" * 40])],
    8: [struct.pack("!hII", 2, 23, 25)],
    9: [struct.pack("!bh", 0, 2) + struct.pack("!hh", 0, 0), struct.pack("!bh", 1, 1) + struct.pack("!h", 1)],
    10: [struct.pack("!i", 4242) + cstr("chan") + cstr("payload")],
    11: [struct.pack("!ii", 0, 1) + cstr("_pq_.foo")],
}

PSQL_PARAMS = {"user": "app", "database": "app", "application_name": "psql",
               "client_encoding": "UTF8"}
PSYCOPG_PARAMS = {"user": "app", "database": "app", "extra_float_digits": "3",
                  "options": "-c search_path=public -c statement_timeout=0"}


def startup_bodies() -> list[tuple[str, bytes]]:
    out = []
    for name, params, version in [("psql", PSQL_PARAMS, 196608), ("psycopg", PSYCOPG_PARAMS, 196608),
                                  ("v32_pq", {"user": "a", "_pq_.x": "1"}, 196610),
                                  ("v31", {"user": "a"}, 196609)]:
        out.append((name, startup(params, version)[4:]))
    out.append(("ssl", struct.pack("!i", 80877103)))
    out.append(("gssenc", struct.pack("!i", 80877104)))
    out.append(("cancel", struct.pack("!iii", 80877102, 4242, 0x01020304)))
    out.append(("cancel32", struct.pack("!ii", 80877102, 4242) + b"k" * 32))
    return out


def frame_streams() -> list[tuple[str, int, bytes]]:
    """(name, flags, stream) for fuzz_frame_reader."""
    login_psql = startup(PSQL_PARAMS) + msg(b"p", cstr("app")) + msg(b"Q", cstr("SELECT 1")) + msg(b"X")
    ssl_then = struct.pack("!ii", 8, 80877103) + startup(PSYCOPG_PARAMS)
    ext = b"".join([
        msg(b"P", parse_body("", "SELECT abalance FROM pgbench_accounts WHERE aid = $1", [0])),
        msg(b"B", bind_body("", "", [], [b"1"], [])), msg(b"D", b"P" + cstr("")),
        msg(b"E", cstr("") + struct.pack("!i", 0)), msg(b"S")])
    backend = b"".join([
        msg(b"R", struct.pack("!i", 0)), msg(b"S", cstr("server_version") + cstr("15.8")),
        msg(b"K", struct.pack("!i", 99) + b"abcd"), msg(b"Z", b"I"),
        msg(b"T", rowdesc([("?column?", 23)])), msg(b"D", datarow([b"1"])),
        msg(b"C", cstr("SELECT 1")), msg(b"Z", b"I")])
    copy = msg(b"Q", cstr("COPY t FROM STDIN")) + msg(b"d", b"1\tone\n") * 3 + msg(b"c")
    return [
        ("startup_psql", 0x01, login_psql), ("startup_ssl", 0x01, ssl_then),
        ("startup_cancel", 0x01, struct.pack("!iiii", 16, 80877102, 1, 2)),
        ("extended", 0x00, ext), ("extended_streaming", 0x08, ext * 3),
        ("backend", 0x00, backend), ("backend_small_max", 0x02, backend),
        ("copy_streaming", 0x0a, copy),
        ("len0", 0x00, b"Q\0\0\0\0"), ("len3", 0x00, b"Q\0\0\0\x03"),
        ("len2_31", 0x00, b"Q\x80\0\0\0" + b"x" * 16), ("startup_len0", 0x01, b"\0\0\0\0"),
        ("startup_huge", 0x01, struct.pack("!I", 0x80000000) + b"\0" * 8),
    ]


# ---- SCRAM (must match fuzz_scram_server.cc / fuzz_scram_client.cc)
PASSWORD = b"pencil"
SALT = b"pgsluice-fuzz-salt"
ITER = 4096
CNONCE = "CLIENTNONCE"
SNONCE = "SERVERNONCE"


def scram_exchange() -> tuple[str, str, str, str]:
    """(client_first, server_first, client_final, server_final) that succeed."""
    salted = hashlib.pbkdf2_hmac("sha256", PASSWORD, SALT, ITER)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    client_first_bare = f"n=,r={CNONCE}"
    server_first = f"r={CNONCE}{SNONCE},s={base64.b64encode(SALT).decode()},i={ITER}"
    without_proof = f"c=biws,r={CNONCE}{SNONCE}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    sig = hmac.new(stored_key, auth, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, sig))
    server_sig = hmac.new(server_key, auth, hashlib.sha256).digest()
    return ("n,," + client_first_bare, server_first,
            f"{without_proof},p={base64.b64encode(proof).decode()}",
            f"v={base64.b64encode(server_sig).decode()}")


SQL = [
    "SELECT 1", "select * from pgbench_accounts where aid = $1",
    "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2",
    "BEGIN; INSERT INTO t VALUES (1, 'x'); COMMIT;",
    "SET search_path = app, public", "SET LOCAL statement_timeout = 0", "RESET ALL",
    "SELECT set_config('a.b', 'c', false)", "SELECT pg_advisory_lock(42)",
    "SELECT pg_advisory_xact_lock(1)", "LISTEN chan", "UNLISTEN *", "PREPARE p AS SELECT 1",
    "EXECUTE p", "DEALLOCATE ALL", "DECLARE c CURSOR WITH HOLD FOR SELECT 1", "CLOSE ALL",
    "CREATE TEMP TABLE tt (a int)", "SELECT 1 INTO TEMP t2", "SELECT * FROM pg_temp.tt",
    "SET ROLE app", "SET SESSION AUTHORIZATION DEFAULT", "LOAD 'auto_explain'", "DISCARD ALL",
    "DO $$ BEGIN PERFORM set_config('x.y', '1', false); END $$",
    "DO $$BEGIN EXECUTE 'SET a.b = ' || 1; END$$",
    "SELECT myschema.f(1), now(), count(*) FROM t", "CALL p()",
    "SELECT 'SET x = 1' -- SET y\n/* LISTEN /* nested */ x */",
    "SELECT $tag$ LISTEN $tag$, E'\\' SET', U&\"d\\0061t\", B'101', X'ff', 1.5e10",
    "EXPLAIN EXECUTE p", "CREATE TABLE x AS EXECUTE p", "SELECT '",
    "WITH cte (a) AS (SELECT 1) INSERT INTO t (a, b) VALUES (1, 2) ON CONFLICT (a) DO NOTHING",
    "SELECT lower(name)::varchar(255) FROM users WHERE id IN (1, 2, 3)",
]

AUTH_FILES = [
    b'"app" "app"\n"md5user" "md5' + b"0123456789abcdef" * 2 + b'"\n',
    b'; comment\n# comment\n\n"quo""te" "pa ss"\n',
    b'"scramuser" "SCRAM-SHA-256$4096:c2FsdA==$' + base64.b64encode(b"k" * 32) + b":" +
    base64.b64encode(b"s" * 32) + b'"\n',
    b'"unterminated "x\n',
]


def main() -> None:
    for name, flags, stream in frame_streams():
        write("fuzz_frame_reader", name, bytes([flags, 0x12, 0x34]) + stream)
        write("fuzz_frame_reader", name + "_bytewise", bytes([flags, 0x00, 0x00]) + stream)
    for sel, bodies in FRONTEND.items():
        for i, b in enumerate(bodies):
            write("fuzz_frontend", f"{sel:02d}_{i}", bytes([sel]) + b)
    for sel, bodies in BACKEND.items():
        for i, b in enumerate(bodies):
            write("fuzz_backend", f"{sel:02d}_{i}", bytes([sel]) + b)
    for name, body in startup_bodies():
        write("fuzz_startup", name, body)
    cf, sf, cfin, sfin = scram_exchange()
    write("fuzz_scram_server", "valid", cf.encode() + b"\0" + cfin.encode())
    write("fuzz_scram_server", "first_only", cf.encode())
    write("fuzz_scram_server", "y_flag", b"y,," + cf[3:].encode() + b"\0" + cfin.encode())
    write("fuzz_scram_server", "authzid", b"n,a=bob,n=,r=abc\0c=biws,r=abc,p=AAAA")
    for mode in (0, 1, 2, 8):
        write("fuzz_scram_client", f"valid_{mode}", bytes([mode]) + sf.encode() + b"\0" + sfin.encode())
    write("fuzz_scram_client", "error_e", bytes([0]) + sf.encode() + b"\0e=invalid-proof")
    for i, sql in enumerate(SQL):
        write("fuzz_sql_lexer", f"sql_{i:02d}", sql.encode())
        write("fuzz_session_state", f"sql_{i:02d}", sql.encode())
    for path in sorted(glob.glob(os.path.join(ROOT, "conf", "*.ini"))):
        with open(path, "rb") as f:
            write("fuzz_config", os.path.basename(path), f.read())
    write("fuzz_config", "minimal.ini",
          b"[databases]\napp = host=127.0.0.1 port=5432 dbname=app pool_size=4 pool_mode=transaction "
          b"session_state_action=reset,listen:pin\n* = host=127.0.0.1\n[users]\napp = pool_mode=session\n"
          b"[pgsluice]\nlisten_port = 6432\nauth_type = trust\nsession_state_action = warn\n")
    for i, text in enumerate(AUTH_FILES):
        write("fuzz_auth_file", f"userlist_{i}", text)


if __name__ == "__main__":
    main()
