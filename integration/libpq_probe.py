"""A libpq client driven through ctypes, for what Debian's psql and psycopg (libpq 15) cannot show:
run under LD_LIBRARY_PATH=<PostgreSQL 18's native/lib> (harness.libpq18_dir()), it is a libpq 18
client — max_protocol_version=latest, sslnegotiation=direct — and it reports the protocol
version libpq agreed on (PQfullProtocolVersion, new in 18).

    python3 libpq_probe.py info   "<conninfo>" "<sql>"  -> JSON: lib, protocol, ssl, alpn, value
    python3 libpq_probe.py cancel "<conninfo>"          -> JSON: lib, protocol, sqlstate

`cancel` starts SELECT pg_sleep(30), cancels it with PQcancelBlocking (libpq 17's cancel API,
which sends the connection's whole cancel key, 32 bytes under 3.2) and reports the SQLSTATE the
query ended with (57014 when the cancel reached it). Exits 1 with the libpq error on stderr when
the connection fails.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time

CONNECTION_OK = 0
PGRES_TUPLES_OK = 2
PG_DIAG_SQLSTATE = ord("C")


def load_libpq() -> ctypes.CDLL:
    lib = ctypes.CDLL("libpq.so.5")
    lib.PQlibVersion.restype = ctypes.c_int
    lib.PQconnectdb.restype = ctypes.c_void_p
    lib.PQconnectdb.argtypes = [ctypes.c_char_p]
    lib.PQstatus.argtypes = [ctypes.c_void_p]
    lib.PQerrorMessage.restype = ctypes.c_char_p
    lib.PQerrorMessage.argtypes = [ctypes.c_void_p]
    lib.PQfinish.argtypes = [ctypes.c_void_p]
    lib.PQexec.restype = ctypes.c_void_p
    lib.PQexec.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.PQresultStatus.argtypes = [ctypes.c_void_p]
    lib.PQgetvalue.restype = ctypes.c_char_p
    lib.PQgetvalue.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.PQresultErrorMessage.restype = ctypes.c_char_p
    lib.PQresultErrorMessage.argtypes = [ctypes.c_void_p]
    lib.PQresultErrorField.restype = ctypes.c_char_p
    lib.PQresultErrorField.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.PQclear.argtypes = [ctypes.c_void_p]
    lib.PQsslInUse.argtypes = [ctypes.c_void_p]
    lib.PQsslAttribute.restype = ctypes.c_char_p
    lib.PQsslAttribute.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.PQsendQuery.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.PQgetResult.restype = ctypes.c_void_p
    lib.PQgetResult.argtypes = [ctypes.c_void_p]
    lib.PQfullProtocolVersion.argtypes = [ctypes.c_void_p]
    lib.PQcancelCreate.restype = ctypes.c_void_p
    lib.PQcancelCreate.argtypes = [ctypes.c_void_p]
    lib.PQcancelBlocking.argtypes = [ctypes.c_void_p]
    lib.PQcancelErrorMessage.restype = ctypes.c_char_p
    lib.PQcancelErrorMessage.argtypes = [ctypes.c_void_p]
    lib.PQcancelFinish.argtypes = [ctypes.c_void_p]
    return lib


def connect(lib: ctypes.CDLL, conninfo: str) -> int:
    conn = lib.PQconnectdb(conninfo.encode())
    if lib.PQstatus(conn) != CONNECTION_OK:
        sys.stderr.write(lib.PQerrorMessage(conn).decode(errors="replace"))
        lib.PQfinish(conn)
        sys.exit(1)
    return conn


def describe(lib: ctypes.CDLL, conn: int) -> dict:
    alpn = lib.PQsslAttribute(conn, b"alpn") if lib.PQsslInUse(conn) else None
    return {"lib": lib.PQlibVersion(), "protocol": lib.PQfullProtocolVersion(conn),
            "ssl": bool(lib.PQsslInUse(conn)), "alpn": alpn.decode() if alpn else None}


def info(lib: ctypes.CDLL, conninfo: str, sql: str) -> dict:
    conn = connect(lib, conninfo)
    out = describe(lib, conn)
    res = lib.PQexec(conn, sql.encode())
    if lib.PQresultStatus(res) != PGRES_TUPLES_OK:
        sys.stderr.write(lib.PQresultErrorMessage(res).decode(errors="replace"))
        sys.exit(1)
    out["value"] = lib.PQgetvalue(res, 0, 0).decode()
    lib.PQclear(res)
    lib.PQfinish(conn)
    return out


def cancel(lib: ctypes.CDLL, conninfo: str) -> dict:
    conn = connect(lib, conninfo)
    out = describe(lib, conn)
    if not lib.PQsendQuery(conn, b"SELECT pg_sleep(30)"):
        sys.stderr.write(lib.PQerrorMessage(conn).decode(errors="replace"))
        sys.exit(1)
    time.sleep(0.5)  # the query is running on a server by now
    started = time.monotonic()
    canceller = lib.PQcancelCreate(conn)
    if not lib.PQcancelBlocking(canceller):
        sys.stderr.write(lib.PQcancelErrorMessage(canceller).decode(errors="replace"))
        sys.exit(1)
    lib.PQcancelFinish(canceller)
    sqlstate = None
    while True:
        res = lib.PQgetResult(conn)
        if not res:
            break
        code = lib.PQresultErrorField(res, PG_DIAG_SQLSTATE)
        if code:
            sqlstate = code.decode()
        lib.PQclear(res)
    out["sqlstate"] = sqlstate
    out["seconds"] = round(time.monotonic() - started, 3)
    lib.PQfinish(conn)
    return out


def main() -> None:
    lib = load_libpq()
    if sys.argv[1] == "info":
        result = info(lib, sys.argv[2], sys.argv[3])
    else:
        result = cancel(lib, sys.argv[2])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
