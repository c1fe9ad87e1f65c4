#!/usr/bin/env python3
"""Captures real traffic for the fuzz corpora: starts a throwaway PostgreSQL (integration/harness.py),
puts a recording TCP relay on 127.0.0.1 in front of it, runs psql (simple protocol, multi-statement,
COPY, errors), pgbench -M extended and psycopg (parameters, binary, COPY, pipeline) through the
relay with SCRAM-SHA-256 logins, then cuts both directions into messages and writes them as seeds:
  fuzz_frame_reader   the whole client stream (startup phase first) and the whole server stream
  fuzz_frontend       every client message body, with the selector byte of its parser
  fuzz_backend        every server message body, likewise
  fuzz_startup        every startup packet body
  fuzz_sql_lexer, fuzz_session_state   the SQL of every Query and Parse
Files are named cap_<sha1 prefix>, so a re-run only adds what is new. Run as root or as a user
that may run initdb (the harness runs PostgreSQL as the postgres user when root)."""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")
FRONTEND_SELECTOR = {b"Q": 0, b"P": 1, b"B": 2, b"D": 3, b"E": 4, b"C": 5, b"d": 6, b"f": 7,
                     b"S": 11, b"H": 11, b"X": 11, b"c": 11}
BACKEND_SELECTOR = {b"R": 0, b"K": 1, b"S": 2, b"Z": 3, b"E": 4, b"N": 4, b"C": 5, b"T": 6,
                    b"D": 7, b"t": 8, b"G": 9, b"H": 9, b"W": 9, b"A": 10, b"v": 11}


class Relay:
    """Accepts connections and relays each to PostgreSQL, recording (client bytes, server bytes)."""

    def __init__(self, target_port: int):
        self.target = target_port
        self.listener = socket.socket()
        self.listener.bind((harness.HOST, 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.sessions: list[list[bytearray]] = []
        self.threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection((harness.HOST, self.target))
            record = [bytearray(), bytearray()]
            self.sessions.append(record)
            for src, dst, buf in ((client, server, record[0]), (server, client, record[1])):
                t = threading.Thread(target=self._pump, args=(src, dst, buf), daemon=True)
                t.start()
                self.threads.append(t)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, buf: bytearray) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            buf += data
            try:
                dst.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()
        for t in self.threads:
            t.join(10)


def split_client(stream: bytes):
    """Yields ('startup', body) then (type, body) for each client message."""
    pos = 0
    startup = True
    while pos < len(stream):
        if startup:
            if len(stream) - pos < 8:
                return
            length = struct.unpack("!i", stream[pos:pos + 4])[0]
            body = stream[pos + 4:pos + length]
            yield b"", body
            pos += length
            code = struct.unpack("!i", body[:4])[0]
            if code >> 16 == 3:
                startup = False
        else:
            if len(stream) - pos < 5:
                return
            kind = stream[pos:pos + 1]
            length = struct.unpack("!i", stream[pos + 1:pos + 5])[0]
            yield kind, stream[pos + 5:pos + 1 + length]
            pos += 1 + length


def split_server(stream: bytes):
    pos = 0
    while len(stream) - pos >= 5:
        kind = stream[pos:pos + 1]
        length = struct.unpack("!i", stream[pos + 1:pos + 5])[0]
        yield kind, stream[pos + 5:pos + 1 + length]
        pos += 1 + length


def write_seed(target: str, data: bytes, written: dict) -> None:
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "cap_" + hashlib.sha1(data).hexdigest()[:12])
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(data)
        written[target] = written.get(target, 0) + 1


def run_clients(port: int, pg: harness.PostgresCluster) -> None:
    env = harness.clean_env(PGPASSWORD="app", PGSSLMODE="disable", PGGSSENCMODE="disable")
    base = ["-h", harness.HOST, "-p", str(port), "-U", "app"]
    harness.run(["psql", "-X", "-At"] + base + ["-d", "app", "-c",
                "SELECT 1, 'two', NULL; SET search_path = public; SELECT now()"],
                env=env, check=True)
    harness.run(["psql", "-X", "-At"] + base + ["-d", "app"], env=env, input=(
        "CREATE TEMP TABLE t (a int, b text);\n"
        "COPY t FROM STDIN;\n1\tone\n2\ttwo\n\\.\n"
        "COPY t TO STDOUT;\n"
        "SELECT * FROM nope;\n"
        "BEGIN; SELECT pg_advisory_xact_lock(1); LISTEN chan; NOTIFY chan, 'x'; COMMIT;\n"
        "DO $$ BEGIN RAISE NOTICE 'hello'; END $$;\n"))
    harness.run(["pgbench", "-n", "-M", "extended", "-c", "1", "-t", "3"] + base + ["app"],
                env=env, check=True)
    import psycopg
    with psycopg.connect(host=harness.HOST, port=port, user="app", password="app",
                         dbname="app", sslmode="disable", gssencmode="disable") as conn:
        conn.execute("SELECT %s::int + %s, %s::text, %s", (1, 2, "x", None)).fetchall()
        with conn.cursor(binary=True) as cur:
            cur.execute("SELECT %s::bigint, now()", (2**40,)).fetchall()
        conn.execute("CREATE TEMP TABLE c (a int, b text)")
        with conn.cursor() as cur:
            with cur.copy("COPY c FROM STDIN") as copy:
                copy.write_row((1, "a"))
            cur.executemany("INSERT INTO c VALUES (%s, %s)", [(i, str(i)) for i in range(5)])
        with conn.pipeline():
            conn.execute("SELECT 1")
            conn.execute("SELECT %s::int", (2,))
        conn.commit()


def main() -> None:
    pg = harness.PostgresCluster()
    relay = None
    try:
        pg.pgbench_init()
        relay = Relay(pg.port)
        run_clients(relay.port, pg)
    finally:
        if relay:
            relay.close()
        pg.stop()
    written: dict[str, int] = {}
    for client_stream, server_stream in relay.sessions:
        client_stream, server_stream = bytes(client_stream), bytes(server_stream)
        write_seed("fuzz_frame_reader", bytes([0x01, 0x12, 0x34]) + client_stream, written)
        write_seed("fuzz_frame_reader", bytes([0x08, 0x56, 0x78]) + server_stream, written)
        sasl_seen = False
        for kind, body in split_client(client_stream):
            if kind == b"":
                write_seed("fuzz_startup", body, written)
            elif kind == b"p":
                write_seed("fuzz_frontend", bytes([10 if sasl_seen else 9]) + body, written)
                sasl_seen = True
            elif kind in FRONTEND_SELECTOR:
                write_seed("fuzz_frontend", bytes([FRONTEND_SELECTOR[kind]]) + body, written)
            if kind == b"Q" or kind == b"P":
                sql = body.split(b"\0")[1 if kind == b"P" else 0]
                write_seed("fuzz_sql_lexer", sql, written)
                write_seed("fuzz_session_state", sql, written)
        for kind, body in split_server(server_stream):
            if kind in BACKEND_SELECTOR:
                write_seed("fuzz_backend", bytes([BACKEND_SELECTOR[kind]]) + body, written)
    print(f"{len(relay.sessions)} sessions captured; new seeds: {written}")


if __name__ == "__main__":
    main()
